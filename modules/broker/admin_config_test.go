package broker

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store/retention"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		give string
		want map[string]string
	}{
		{give: "a=1\nb = 2\n", want: map[string]string{"a": "1", "b": "2"}},
		{give: "# comment\n! other\n\n  c:3\r\nd 4", want: map[string]string{"c": "3", "d": "4"}},
		{give: "e=x\\\n    y\nf=\\u0041\\t", want: map[string]string{"e": "xy", "f": "A\t"}},
		{give: "g\\=h=i\nj=", want: map[string]string{"g=h": "i", "j": ""}},
		{give: "k=1\nk=2", want: map[string]string{"k": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := parseProperties(tt.give)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := parseProperties("a=\\u00zz")
	assert.Error(t, err)
}

func brokerConfigOf(t *testing.T, h *harness) (map[string]string, string) {
	t.Helper()
	resp := h.invoke(remoting.GetBrokerConfig, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	props, err := parseProperties(string(resp.Body))
	require.NoError(t, err)
	return props, resp.Ext("version")
}

// GET_BROKER_CONFIG answers properties text and a DataVersion; an update
// of run-time keys (Java or Quiver names) takes effect at once and bumps
// the version; fixed, unknown and invalid keys are refused, all or nothing.
func TestBrokerConfigGetUpdate(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	props, version := brokerConfigOf(t, h)
	assert.Equal(t, "broker-a", props["brokerName"])
	assert.Equal(t, "1024", props["maxTransferCountOnMessageInMemory"])
	assert.Equal(t, "1024", props["broker.pull_batch_max"])
	assert.Equal(t, "200", props["waitTimeMillsInSendQueue"])
	assert.Equal(t, "200ms", props["broker.busy_timeout"])
	assert.Equal(t, "127.0.0.1", props["brokerIP1"])
	assert.Regexp(t, `^\{"counter":0,"timestamp":\d+\}$`, version)

	for i := 0; i < 5; i++ {
		require.Equal(t, remoting.Success, h.send("CfgTopic", 0, fmt.Sprintf("m%d", i), nil).Code)
	}
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "CG", "CfgTopic", "*")).Code)
	pulled := func() int {
		resp := h.invoke(remoting.PullMessage, pullExt("CG", "CfgTopic", 0, 0, 0, 0), nil)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		msgs, err := message.DecodeAll(resp.Body)
		require.NoError(t, err)
		return len(msgs)
	}
	require.Equal(t, 5, pulled())

	body := "# set by a test\nmaxTransferCountOnMessageInMemory=2\nbroker.max_suspend=5s\n"
	resp := h.invoke(remoting.UpdateBrokerConfig, nil, []byte(body))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, 2, pulled(), "the new pull limit applies to the next pull")
	props, version = brokerConfigOf(t, h)
	assert.Equal(t, "2", props["broker.pull_batch_max"])
	assert.Equal(t, "5s", props["broker.max_suspend"])
	assert.Regexp(t, `^\{"counter":1,"timestamp":\d+\}$`, version)
	assert.Equal(t, 2, h.b.Config().PullBatchMax)

	refusals := []struct {
		name     string
		give     string
		wantCode int32
		wantIn   string
	}{
		{"fixed key", "brokerName=other\nbroker.pull_batch_max=7", remoting.NoPermission, "brokerName"},
		{"fixed quiver key", "broker.listen=127.0.0.1:1", remoting.NoPermission, "broker.listen"},
		{"unknown key", "noSuchKey=1\nbroker.pull_batch_max=7", remoting.SystemError, "noSuchKey"},
		{"bad value", "broker.pull_batch_max=lots", remoting.SystemError, "broker.pull_batch_max"},
		{"invalid config", "broker.pull_batch_max=7\nbroker.max_suspend=40s", remoting.SystemError, "broker.max_suspend"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.invoke(remoting.UpdateBrokerConfig, nil, []byte(tt.give))
			assert.Equal(t, tt.wantCode, resp.Code)
			assert.Contains(t, resp.Remark, tt.wantIn)
		})
	}
	props, version = brokerConfigOf(t, h)
	assert.Equal(t, "2", props["broker.pull_batch_max"], "a refused update changes nothing")
	assert.Regexp(t, `^\{"counter":1,`, version)

	// The send-queue wait (Java name, milliseconds) reaches the send gate.
	resp = h.invoke(remoting.UpdateBrokerConfig, nil, []byte("waitTimeMillsInSendQueue=750"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.EqualValues(t, 750_000_000, h.b.gate.busyTimeout.Load())
	props, _ = brokerConfigOf(t, h)
	assert.Equal(t, "750ms", props["broker.busy_timeout"])
	assert.True(t, regexp.MustCompile(`(?m)^broker\.name=broker-a$`).MatchString(mustBody(t, h)))
}

func mustBody(t *testing.T, h *harness) string {
	resp := h.invoke(remoting.GetBrokerConfig, nil, nil)
	require.Equal(t, remoting.Success, resp.Code)
	return string(resp.Body)
}

// Updates race with the sends and pulls that read the configuration (run
// with -race): each request sees one whole snapshot.
func TestBrokerConfigUpdateUnderLoad(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	require.Equal(t, remoting.Success, h.send("Load", 0, "x", nil).Code)
	require.Equal(t, remoting.Success, h.invoke(remoting.HeartBeat, nil, heartbeat("c1", "LG", "Load", "*")).Code)
	done := make(chan struct{})
	var served int
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			if h.send("Load", 0, "y", nil).Code == remoting.Success &&
				h.invoke(remoting.PullMessage, pullExt("LG", "Load", 0, 0, 0, 0), nil).Code == remoting.Success {
				served++
			}
		}
	}()
	for i := 0; i < 50; i++ {
		body := fmt.Sprintf("broker.pull_batch_max=%d\nbroker.busy_timeout=%dms\nbroker.long_polling=%t", 1+i%3, 100+i, i%2 == 0)
		resp := h.invoke(remoting.UpdateBrokerConfig, nil, []byte(body))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	<-done
	assert.Equal(t, 50, served)
	props, version := brokerConfigOf(t, h)
	assert.Equal(t, "2", props["broker.pull_batch_max"])
	assert.Equal(t, "false", props["longPollingEnable"])
	assert.Regexp(t, `^\{"counter":50,`, version)
}

// The Java keys mqadmin runbooks change at run time (issue 42):
// autoCreateTopicEnable and brokerPermission apply at once (the template
// topic, the permissions registered), fileReservedTime and deleteWhen reach
// storage's retention loop, flushDiskType is refused unless unchanged.
func TestBrokerConfigJavaRuntimeKeys(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	cl := retention.New(h.st, retention.Config{Retention: 72 * time.Hour, CleanAt: []int{4}}, nil)
	h.b.deps.Cleaner = cl
	update := func(body string) *remoting.Command {
		t.Helper()
		return h.invoke(remoting.UpdateBrokerConfig, nil, []byte(body))
	}
	props, _ := brokerConfigOf(t, h)
	assert.Equal(t, "6", props["brokerPermission"])
	assert.Equal(t, "72", props["fileReservedTime"])
	assert.Equal(t, "04", props["deleteWhen"])
	assert.Equal(t, "ASYNC_FLUSH", props["flushDiskType"])
	assert.Equal(t, "true", props["autoCreateTopicEnable"])

	resp := update("fileReservedTime=48\ndeleteWhen=03;15")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	r, at := cl.Schedule()
	assert.Equal(t, 48*time.Hour, r)
	assert.Equal(t, []int{3, 15}, at)
	props, _ = brokerConfigOf(t, h)
	assert.Equal(t, "48", props["fileReservedTime"])
	assert.Equal(t, "03;15", props["deleteWhen"])

	// brokerPermission 4: every registered topic loses its write bit and
	// the data version moves, so name servers take the table.
	before := h.b.topics.dataVersion()
	resp = update("brokerPermission=4")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.NotEqual(t, before, h.b.topics.dataVersion())
	for name, tc := range h.b.registeredTopics().TopicConfigTable {
		assert.Zero(t, tc.Perm&protocol.PermWrite, "%s registered writable", name)
	}
	live, _ := h.b.topics.get(protocol.AutoCreateTopic)
	assert.NotZero(t, live.Perm&protocol.PermWrite, "the topic table itself is unchanged")
	resp = update("brokerPermission=6")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, int32(protocol.PermInherit|protocol.PermRead|protocol.PermWrite), h.b.registeredTopics().TopicConfigTable[protocol.AutoCreateTopic].Perm,
		"read-write: permissions registered as they are (TBW102 keeps its inherit bit)")

	// autoCreateTopicEnable false: sends no longer create topics; true
	// again: they do.
	resp = update("autoCreateTopicEnable=false")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	tc, err := h.b.autoCreateTopic("AutoOff", protocol.AutoCreateTopic, 4)
	require.NoError(t, err)
	assert.Nil(t, tc)
	resp = update("autoCreateTopicEnable=true")
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	tc, err = h.b.autoCreateTopic("AutoOn", protocol.AutoCreateTopic, 4)
	require.NoError(t, err)
	require.NotNil(t, tc)

	for _, tt := range []struct{ give, wantIn string }{
		{"flushDiskType=SYNC_FLUSH", "flushDiskType"},
		{"brokerPermission=9", "brokerPermission"},
		{"deleteWhen=25", "deleteWhen"},
		{"fileReservedTime=0", "fileReservedTime"},
	} {
		resp := update(tt.give)
		assert.NotEqual(t, remoting.Success, resp.Code, tt.give)
		assert.Contains(t, resp.Remark, tt.wantIn, tt.give)
	}
	resp = update("flushDiskType=ASYNC_FLUSH")
	assert.Equal(t, remoting.Success, resp.Code, "an unchanged flushDiskType is accepted: %s", resp.Remark)
}

// A broker started without autoCreateTopicEnable has no TBW102; turning
// it on at run time creates the template, so producers can create topics.
func TestBrokerConfigAutoCreateCreatesTemplate(t *testing.T) {
	h := startBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopic = false })
	_, ok := h.b.topics.get(protocol.AutoCreateTopic)
	require.False(t, ok)
	resp := h.invoke(remoting.UpdateBrokerConfig, nil, []byte("autoCreateTopicEnable=true"))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	_, ok = h.b.topics.get(protocol.AutoCreateTopic)
	assert.True(t, ok)
}
