package admin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

func liveAdmin(t *testing.T, ns string, opts ...client.Option) (*Admin, *client.Client) {
	t.Helper()
	c, err := client.New(append([]client.Option{client.WithNameServers(ns), client.WithRequestTimeout(5 * time.Second), transports.WithDialer()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return New(c), c
}

// TestQueueCalls sends, reads, searches and queries messages of one queue
// of a live mq dev through the typed calls mq admin and mq bench use, and
// their refusals.
func TestQueueCalls(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	a, _ := liveAdmin(t, dev.Namesrv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic = "QueueCalls"
	require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2}))

	// An empty queue: offsets 0, a search at any time answers 0, a pull
	// finds nothing new.
	for _, f := range []func() (int64, error){
		func() (int64, error) { return a.MinOffset(ctx, dev.Broker, topic, 0) },
		func() (int64, error) { return a.MaxOffset(ctx, dev.Broker, topic, 0) },
		func() (int64, error) { return a.SearchOffset(ctx, dev.Broker, topic, 0, time.Now().UnixMilli()) },
	} {
		off, err := f()
		require.NoError(t, err)
		assert.Zero(t, off)
	}
	pr, err := a.Pull(ctx, dev.Broker, PullRequest{Topic: topic, QueueID: 0})
	require.NoError(t, err)
	assert.NotEqual(t, PullFound, pr.Status, "nothing stored yet")
	assert.Empty(t, pr.Body)

	// Three messages on queue 0 (the second tagged B), one oneway.
	before := time.Now().UnixMilli()
	var keys []string
	for i := range 3 {
		uniq := client.NewUniqID()
		keys = append(keys, uniq)
		p := message.Properties{message.PropertyUniqKey: uniq, message.PropertyKeys: "k" + strconv.Itoa(i), "WAIT": "true"}
		if i == 1 {
			p[message.PropertyTags] = "B"
		}
		ans, err := a.SendDirect(ctx, dev.Broker, SendRequest{Group: "QueueCallsProducer", Topic: topic, QueueID: 0, Properties: p, Body: []byte("m" + strconv.Itoa(i))})
		require.NoError(t, err)
		assert.Equal(t, int64(i), ans.QueueOffset)
		assert.Equal(t, 0, ans.QueueID)
		_, off, err := message.ParseOffsetMsgID(ans.OffsetMsgID)
		require.NoError(t, err, "offsetMsgId %q", ans.OffsetMsgID)
		assert.GreaterOrEqual(t, off, int64(0))
	}
	require.NoError(t, a.SendDirectOneway(ctx, dev.Broker, SendRequest{Group: "QueueCallsProducer", Topic: topic, QueueID: 1, Body: []byte("oneway")}))
	require.Eventually(t, func() bool {
		n, err := a.MaxOffset(ctx, dev.Broker, topic, 1)
		return err == nil && n == 1
	}, 10*time.Second, 20*time.Millisecond, "the oneway message is stored")

	maxOff, err := a.MaxOffset(ctx, dev.Broker, topic, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), maxOff)
	off, err := a.SearchOffset(ctx, dev.Broker, topic, 0, before-60_000)
	require.NoError(t, err)
	assert.Zero(t, off, "a time before the first message")
	off, err = a.SearchOffset(ctx, dev.Broker, topic, 0, time.Now().Add(time.Hour).UnixMilli())
	require.NoError(t, err)
	assert.Equal(t, int64(3), off, "a time after the last message: the max offset")

	pr, err = a.Pull(ctx, dev.Broker, PullRequest{Topic: topic, QueueID: 0, Offset: 0})
	require.NoError(t, err)
	require.Equal(t, PullFound, pr.Status)
	assert.Equal(t, int64(3), pr.NextBeginOffset)
	msgs, err := pr.Messages()
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		assert.Equal(t, keys[i], m.UniqKey())
		assert.Equal(t, int64(i), m.QueueOffset)
	}
	pr, err = a.Pull(ctx, dev.Broker, PullRequest{Topic: topic, QueueID: 0, Offset: 0, Expression: "B"})
	require.NoError(t, err)
	require.Equal(t, PullFound, pr.Status)
	msgs, err = pr.Messages()
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the broker filters by tag")
	assert.Equal(t, "m1", string(msgs[0].Body))
	pr, err = a.Pull(ctx, dev.Broker, PullRequest{Topic: topic, QueueID: 0, Offset: 3})
	require.NoError(t, err)
	assert.Equal(t, PullNoNewMsg, pr.Status, "at the end of the queue")

	found, err := a.QueryMessage(ctx, dev.Broker, Query{Topic: topic, Key: "k2", MaxNum: 32, End: time.Now().Add(time.Minute).UnixMilli()})
	require.NoError(t, err)
	require.NotEmpty(t, found)
	assert.Equal(t, keys[2], found[0].UniqKey())
	found, err = a.QueryMessage(ctx, dev.Broker, Query{Topic: topic, Key: keys[0], UniqKey: true, MaxNum: 32, End: time.Now().Add(time.Minute).UnixMilli()})
	require.NoError(t, err)
	require.NotEmpty(t, found)
	assert.Equal(t, "m0", string(found[0].Body))

	t.Run("refusals", func(t *testing.T) {
		// A key nobody sent.
		_, err := a.QueryMessage(ctx, dev.Broker, Query{Topic: topic, Key: "nokey", MaxNum: 32, End: time.Now().UnixMilli()})
		require.ErrorIs(t, err, ErrMessageNotFound)
		assert.Contains(t, err.Error(), dev.Broker)

		// The name server serves no queue requests.
		_, err = a.MinOffset(ctx, dev.Namesrv, topic, 0)
		require.Error(t, err)
		assert.True(t, IsRefused(err), "%v", err)
		assert.Contains(t, err.Error(), "min offset of "+topic+" queue 0 on "+dev.Namesrv)
		_, err = a.SearchOffset(ctx, dev.Namesrv, topic, 0, 0)
		assert.True(t, IsRefused(err), "%v", err)
		_, err = a.Pull(ctx, dev.Namesrv, PullRequest{Topic: topic})
		assert.True(t, IsRefused(err), "%v", err)
		assert.Contains(t, err.Error(), "pull "+topic+" queue 0 at 0 from "+dev.Namesrv)

		// A topic the broker does not have.
		_, err = a.Pull(ctx, dev.Broker, PullRequest{Topic: "NoSuchTopic", QueueID: 0})
		require.Error(t, err)
		assert.True(t, IsRefused(err), "%v", err)

		// A read-only topic takes no message.
		require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: "QueueCallsReadOnly", ReadQueueNums: 1, WriteQueueNums: 1, Perm: protocol.PermRead}))
		_, err = a.SendDirect(ctx, dev.Broker, SendRequest{Group: "QueueCallsProducer", Topic: "QueueCallsReadOnly", Body: []byte("x")})
		require.Error(t, err)
		assert.True(t, IsRefused(err), "%v", err)
		assert.Equal(t, remoting.NoPermission, client.CodeOf(err), "%v", err)
		assert.Contains(t, err.Error(), "send to QueueCallsReadOnly queue 0 on "+dev.Broker)

		// Nothing listens: not a refusal, the address and the call named.
		dead := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
		_, err = a.MaxOffset(ctx, dead, topic, 0)
		require.Error(t, err)
		assert.False(t, IsRefused(err))
		assert.Contains(t, err.Error(), "max offset of "+topic+" queue 0 on "+dead)
	})
}

// TestResendDLQ resends a dead letter of a live mq dev to the group's
// retry topic, then finds nothing more to resend: ErrMessageNotFound for
// an id the broker does not hold, a refusal for a resend it skipped.
func TestResendDLQ(t *testing.T) {
	dev := testserver.StartDev(t, testserver.Options{})
	a, c := liveAdmin(t, dev.Namesrv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic, group = "ResendCalls", "ResendCallsGroup"
	require.NoError(t, a.CreateTopic(ctx, TopicConfig{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}))
	uniq := client.NewUniqID()
	ans, err := a.SendDirect(ctx, dev.Broker, SendRequest{Group: "ResendCallsProducer", Topic: topic,
		Properties: message.Properties{message.PropertyUniqKey: uniq, "WAIT": "true"}, Body: []byte("dead")})
	require.NoError(t, err)
	_, off, err := message.ParseOffsetMsgID(ans.OffsetMsgID)
	require.NoError(t, err)

	_, err = a.ResendDLQ(ctx, dev.Broker, ResendSpec{Group: group, MsgID: uniq})
	require.ErrorIs(t, err, ErrMessageNotFound, "no dead letter yet")
	assert.Contains(t, err.Error(), "resend dead letters of "+group+" on "+dev.Broker)

	// Straight to the DLQ (delay level -1), as a consumer giving up does.
	resp, err := c.Invoke(ctx, dev.Broker, client.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
		"group": group, "offset": strconv.FormatInt(off, 10), "delayLevel": "-1", "originMsgId": ans.OffsetMsgID, "maxReconsumeTimes": "16",
	}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	res, err := a.ResendDLQ(ctx, dev.Broker, ResendSpec{Group: group, MsgID: uniq})
	require.NoError(t, err)
	assert.Equal(t, group, res.Group)
	require.Len(t, res.Resent, 1)
	assert.Equal(t, uniq, res.Resent[0].MsgID)
	assert.Equal(t, topic, res.Resent[0].Topic)
	assert.NotEmpty(t, res.Resent[0].NewOffset)

	res, err = a.ResendDLQ(ctx, dev.Broker, ResendSpec{Group: group})
	require.NoError(t, err)
	assert.Empty(t, res.Resent, "resent before: skipped without Again")
	require.Len(t, res.Skipped, 1)
	res, err = a.ResendDLQ(ctx, dev.Broker, ResendSpec{Group: group, Again: true})
	require.NoError(t, err)
	assert.Len(t, res.Resent, 1)

	_, err = a.ResendDLQ(ctx, dev.Namesrv, ResendSpec{Group: group})
	require.Error(t, err)
	assert.True(t, IsRefused(err), "%v", err)
	assert.False(t, errors.Is(err, ErrMessageNotFound))
}

// TestAuthenticated probes a live mq dev with ACL on: the right secret
// authenticates (an account without the permission too), a wrong one
// does not.
func TestAuthenticated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(`accounts:
  - accessKey: appKey01
    secretKey: appSecret01
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
`), 0o644))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + file},
		Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "adminKey01", "adminSecret01", "") }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tt := range []struct {
		name, ak, sk string
		want         bool
	}{
		{name: "admin", ak: "adminKey01", sk: "adminSecret01", want: true},
		{name: "account without the permission", ak: "appKey01", sk: "appSecret01", want: true},
		{name: "wrong secret", ak: "appKey01", sk: "wrongSecret01", want: false},
		{name: "unknown account", ak: "nobody01", sk: "appSecret01", want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := liveAdmin(t, dev.Namesrv, client.WithCredentials(tt.ak, tt.sk, ""))
			ok, err := a.Authenticated(ctx, dev.Broker, "AuthProbeGroup")
			require.NoError(t, err)
			assert.Equal(t, tt.want, ok)
		})
	}
	a, _ := liveAdmin(t, dev.Namesrv)
	dead := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	_, err := a.Authenticated(ctx, dead, "AuthProbeGroup")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "authentication probe on "+dead)
}
