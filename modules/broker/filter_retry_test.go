package broker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/filter/sql92"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// filterPlan plans the configuration raw with the stock filter plugins.
func filterPlan(raw map[string]any) (*kernel.Plan, error) {
	return kernel.NewPlan(config.FromMap(raw), kernel.Spec{Plugins: kernel.Plugins{
		Filter: []filter.Provider{tag.NewProvider(), sql92.NewProvider()}, Transport: []transport.Provider{tcp.NewProvider()}}})
}

// stockFilters builds the TAG and SQL92 compilers the way the app does,
// from the plan of the filter section raw.
func stockFilters(tb testing.TB, raw map[string]any) map[string]filter.Compiler {
	tb.Helper()
	p, err := filterPlan(raw)
	require.NoError(tb, err)
	filters, err := filtersFromPlan(p)
	require.NoError(tb, err)
	return filters
}

// startBrokerFilters is startBroker with the stock filter plugins built
// from the configuration raw.
func startBrokerFilters(t *testing.T, raw map[string]any) *harness {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: stockFilters(t, raw)})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)
	return h
}

// subscribe heart-beats one consumer of group with subs (topic → type,
// expression); it returns the answer.
func (h *harness) subscribe(client, group string, subs ...protocol.SubscriptionData) *remoting.Command {
	h.t.Helper()
	for i := range subs {
		subs[i].SubVersion = protocol.FlexInt64(time.Now().UnixNano())
	}
	hb := protocol.HeartbeatData{ClientID: client, ConsumerDataSet: []protocol.ConsumerData{{
		GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering,
		ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", SubscriptionDataSet: subs,
	}}}
	body, err := json.Marshal(hb)
	require.NoError(h.t, err)
	return h.invoke(remoting.HeartBeat, nil, body)
}

// sendRetry stores a message in %RETRY%<group> as a send-back does.
func (h *harness) sendRetry(group, body string, props message.Properties) {
	h.t.Helper()
	ext := sendExt(protocol.RetryTopic(group), 0, props)
	ext["maxReconsumeTimes"] = "16"
	ext["reconsumeTimes"] = "1"
	resp := h.invoke(remoting.SendMessage, ext, []byte(body))
	require.Equal(h.t, remoting.Success, resp.Code, resp.Remark)
}

// pullBodies pulls queue 0 of topic from offset 0 and returns the bodies.
func (h *harness) pullBodies(ext map[string]string) []string {
	h.t.Helper()
	resp := h.invoke(remoting.PullMessage, ext, nil)
	if resp.Code != remoting.Success {
		require.Equal(h.t, remoting.PullRetryImmediately, resp.Code, resp.Remark)
		return nil
	}
	msgs, err := message.DecodeAll(resp.Body)
	require.NoError(h.t, err)
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

func TestRetryTopicAppliesOriginalTopicFilter(t *testing.T) {
	const group = "CGR"
	retry := protocol.RetryTopic(group)
	tests := []struct {
		name     string
		give     []protocol.SubscriptionData // besides %RETRY%<group> "*"
		wantBody []string
	}{
		{
			name:     "SQL92 on the original topic",
			give:     []protocol.SubscriptionData{{Topic: "RT", SubString: "a > 5", ExpressionType: filter.TypeSQL92}},
			wantBody: []string{"a7", "other-topic", "no-retry-topic", "tag-B"},
		},
		{
			name:     "TAG on the original topic",
			give:     []protocol.SubscriptionData{{Topic: "RT", SubString: "A", ExpressionType: filter.TypeTag}},
			wantBody: []string{"a1", "a7", "no-a", "other-topic", "no-retry-topic"},
		},
		{
			name:     "original topic not subscribed: everything",
			give:     []protocol.SubscriptionData{{Topic: "Elsewhere", SubString: "a > 100", ExpressionType: filter.TypeSQL92}},
			wantBody: []string{"a1", "a7", "no-a", "other-topic", "no-retry-topic", "tag-B"},
		},
		{
			name:     "original topic subscribed with *",
			give:     []protocol.SubscriptionData{{Topic: "RT", SubString: "*", ExpressionType: filter.TypeTag}},
			wantBody: []string{"a1", "a7", "no-a", "other-topic", "no-retry-topic", "tag-B"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startBrokerFilters(t, nil)
			subs := append([]protocol.SubscriptionData{{Topic: retry, SubString: "*", ExpressionType: filter.TypeTag}}, tt.give...)
			resp := h.subscribe("c1", group, subs...)
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			h.sendRetry(group, "a1", message.Properties{message.PropertyRetryTopic: "RT", "TAGS": "A", "a": "1"})
			h.sendRetry(group, "a7", message.Properties{message.PropertyRetryTopic: "RT", "TAGS": "A", "a": "7"})
			h.sendRetry(group, "no-a", message.Properties{message.PropertyRetryTopic: "RT", "TAGS": "A"})
			h.sendRetry(group, "other-topic", message.Properties{message.PropertyRetryTopic: "Other", "TAGS": "B", "a": "1"})
			h.sendRetry(group, "no-retry-topic", message.Properties{"a": "1"})
			h.sendRetry(group, "tag-B", message.Properties{message.PropertyRetryTopic: "RT", "TAGS": "B", "a": "9"})

			// The retry subscription from the heartbeat.
			assert.Equal(t, tt.wantBody, h.pullBodies(pullExt(group, retry, 0, 0, 0, 0)))
			// The retry subscription carried by the pull.
			assert.Equal(t, tt.wantBody, h.pullBodies(pullExt(group, retry, 0, 0, pullSubscription, 0)))
		})
	}
}

func TestRetryTopicFilterFollowsSubscriptionChanges(t *testing.T) {
	const group = "CGS"
	retry := protocol.RetryTopic(group)
	h := startBrokerFilters(t, nil)
	sub := func(expr string) {
		resp := h.subscribe("c1", group,
			protocol.SubscriptionData{Topic: retry, SubString: "*", ExpressionType: filter.TypeTag},
			protocol.SubscriptionData{Topic: "RT", SubString: expr, ExpressionType: filter.TypeSQL92})
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	sub("a > 5")
	h.sendRetry(group, "a1", message.Properties{message.PropertyRetryTopic: "RT", "a": "1"})
	h.sendRetry(group, "a7", message.Properties{message.PropertyRetryTopic: "RT", "a": "7"})
	assert.Equal(t, []string{"a7"}, h.pullBodies(pullExt(group, retry, 0, 0, 0, 0)))
	sub("a < 5")
	assert.Equal(t, []string{"a1"}, h.pullBodies(pullExt(group, retry, 0, 0, 0, 0)))
	// Another group pulling this retry topic has no subscription of RT:
	// it gets everything.
	assert.Equal(t, []string{"a1", "a7"}, h.pullBodies(pullExt("CGX", retry, 0, 0, pullSubscription, 0)))
	// Only non-matching messages past the offset: retry immediately,
	// the offset still advances.
	sub("a > 100")
	resp := h.invoke(remoting.PullMessage, pullExt(group, retry, 0, 0, 0, 0), nil)
	assert.Equal(t, remoting.PullRetryImmediately, resp.Code)
	assert.Equal(t, "2", resp.Ext("nextBeginOffset"))
}

func TestRetryTopicFilterHeldPull(t *testing.T) {
	const group = "CGH"
	retry := protocol.RetryTopic(group)
	h := startBrokerFilters(t, nil)
	resp := h.subscribe("c1", group,
		protocol.SubscriptionData{Topic: retry, SubString: "*", ExpressionType: filter.TypeTag},
		protocol.SubscriptionData{Topic: "RT", SubString: "a > 5", ExpressionType: filter.TypeSQL92})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	done := make(chan *remoting.Command, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := h.client.Invoke(ctx, h.addr, remoting.NewRequest(remoting.PullMessage, pullExt(group, retry, 0, 0, pullSuspend, 5*time.Second), nil))
		if err != nil {
			r = nil
		}
		done <- r
	}()
	require.Eventually(t, func() bool { return h.b.holds.held() == 1 }, 5*time.Second, 5*time.Millisecond)
	h.sendRetry(group, "a1", message.Properties{message.PropertyRetryTopic: "RT", "a": "1"})
	h.sendRetry(group, "a7", message.Properties{message.PropertyRetryTopic: "RT", "a": "7"})
	r := <-done
	require.NotNil(t, r)
	// The held pull woke on the first arrival; whatever it returns
	// passed the filter.
	if r.Code == remoting.Success {
		msgs, err := message.DecodeAll(r.Body)
		require.NoError(t, err)
		for _, m := range msgs {
			assert.Equal(t, "a7", string(m.Body))
		}
	} else {
		assert.Equal(t, remoting.PullRetryImmediately, r.Code, r.Remark)
	}
}
