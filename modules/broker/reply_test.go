package broker

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// fakeRequester is a producer client that heartbeats as id and answers
// PUSH_REPLY_MESSAGE_TO_CLIENT with code, keeping what it was pushed.
type fakeRequester struct {
	mu     sync.Mutex
	pushed []*remoting.Command
}

func (f *fakeRequester) got() []*remoting.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*remoting.Command(nil), f.pushed...)
}

// startRequester's code silent: the requester never answers a push.
const silent int32 = -1

func startRequester(t *testing.T, h *harness, id string, code int32) *fakeRequester {
	t.Helper()
	f := &fakeRequester{}
	r := remoting.NewRouter()
	r.Register(remoting.PushReplyMessageToClient, func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		f.mu.Lock()
		f.pushed = append(f.pushed, req)
		f.mu.Unlock()
		if code == silent {
			return nil
		}
		return remoting.NewResponse(req, code, "")
	})
	c := remoting.NewClient(transports().Dial, r, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, h.addr, remoting.NewRequest(remoting.HeartBeat, nil, heartbeat(id, "CG", "T", "*")))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	return f
}

func replyProps(to string) message.Properties {
	p := message.Properties{"CORRELATION_ID": "corr-1", "MSG_TYPE": "reply", "TTL": "3000"}
	if to != "" {
		p[propReplyToClient] = to
	}
	return p
}

// shortExt renames a SEND_MESSAGE header to SEND_MESSAGE_V2's one-letter
// keys.
func shortExt(ext map[string]string) map[string]string {
	out := map[string]string{}
	for i, k := range longKeys {
		if v, ok := ext[k]; ok {
			out[shortKeys[i]] = v
		}
	}
	return out
}

// The reply topic exists from the start, as Java's TopicConfigManager
// makes it: <cluster>_REPLY_TOPIC, one queue, read and write.
func TestReplyTopicAtStart(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	tc, ok := h.b.TopicConfig("DefaultCluster_REPLY_TOPIC")
	require.True(t, ok)
	assert.EqualValues(t, 1, tc.ReadQueueNums)
	assert.EqualValues(t, 1, tc.WriteQueueNums)
	assert.EqualValues(t, protocol.PermRead|protocol.PermWrite, tc.Perm)
}

// A reply (324 and 325) is pushed to the requester named by
// REPLY_TO_CLIENT with Java's ReplyMessageRequestHeader and the reply's
// body, stored in the reply topic, and answered SUCCESS with the stored
// message's id.
func TestReplyPushedStoredAnswered(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	req := startRequester(t, h, "req1", remoting.Success)
	topic := ReplyTopic(protocol.DefaultCluster)
	for i, code := range []int32{remoting.SendReplyMessage, remoting.SendReplyMessageV2} {
		ext := sendExt(topic, 0, replyProps("req1"))
		ext["bornTimestamp"] = "1700000000123"
		ext["flag"] = "7"
		ext["reconsumeTimes"] = "2"
		if code == remoting.SendReplyMessageV2 {
			ext = shortExt(ext)
		}
		body := "answer-" + strconv.Itoa(i)
		resp := h.invoke(code, ext, []byte(body))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		_, off, err := message.ParseOffsetMsgID(resp.Ext("msgId"))
		require.NoError(t, err, "the answer names the stored reply")
		assert.Equal(t, "0", resp.Ext("queueId"))
		assert.Equal(t, strconv.Itoa(i), resp.Ext("queueOffset"))
		rec, err := h.b.Lookup(context.Background(), off)
		require.NoError(t, err)
		stored, _, err := message.DecodeStored(rec)
		require.NoError(t, err)
		assert.Equal(t, body, string(stored.Body))
		assert.Equal(t, topic, stored.Topic)

		pushed := req.got()
		require.Len(t, pushed, i+1)
		p := pushed[i]
		assert.Equal(t, remoting.PushReplyMessageToClient, p.Code)
		assert.Equal(t, body, string(p.Body))
		keys := make([]string, 0, len(p.ExtFields))
		for k := range p.ExtFields {
			keys = append(keys, k)
		}
		assert.ElementsMatch(t, []string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
			"sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "bornHost", "storeHost",
			"storeTimestamp"}, keys, "Java's ReplyMessageRequestHeader")
		assert.Equal(t, "PG", p.Ext("producerGroup"))
		assert.Equal(t, topic, p.Ext("topic"))
		assert.Equal(t, protocol.AutoCreateTopic, p.Ext("defaultTopic"))
		assert.Equal(t, "4", p.Ext("defaultTopicQueueNums"))
		assert.Equal(t, "0", p.Ext("queueId"))
		assert.Equal(t, "0", p.Ext("sysFlag"))
		assert.Equal(t, "1700000000123", p.Ext("bornTimestamp"))
		assert.Equal(t, "7", p.Ext("flag"))
		assert.Equal(t, "2", p.Ext("reconsumeTimes"))
		assert.Equal(t, "false", p.Ext("unitMode"))
		assert.Regexp(t, `^127\.0\.0\.1:\d+$`, p.Ext("bornHost"))
		assert.Equal(t, "127.0.0.1:10911", p.Ext("storeHost"))
		_, err = strconv.ParseInt(p.Ext("storeTimestamp"), 10, 64)
		assert.NoError(t, err)
		props := p.Ext("properties")
		assert.True(t, strings.HasSuffix(props, string(message.PropertySeparator)), "Java ends every pair with the separator")
		pp := message.ParseProperties(props)
		assert.Equal(t, "corr-1", pp["CORRELATION_ID"])
		assert.Equal(t, "req1", pp[propReplyToClient])
		assert.Equal(t, "reply", pp["MSG_TYPE"])
		_, err = strconv.ParseInt(pp[propPushReplyTime], 10, 64)
		assert.NoError(t, err, "PUSH_REPLY_TIME is set")
	}
}

// A reply sent one-way is pushed all the same (and not answered).
func TestReplyOneway(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	req := startRequester(t, h, "req1", remoting.Success)
	r := remoting.NewRequest(remoting.SendReplyMessage, sendExt(ReplyTopic(protocol.DefaultCluster), 0, replyProps("req1")), []byte("one-way"))
	r.Flag |= codec.FlagOneway
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.client.InvokeOneway(ctx, h.addr, r))
	for len(req.got()) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no push within 10s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	assert.Equal(t, "one-way", string(req.got()[0].Body))
}

// Java's answers when the push fails: SYSTEM_ERROR and its remark; the
// reply is stored anyway.
func TestReplyPushFailures(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	startRequester(t, h, "refuser", remoting.SystemError)
	topic := ReplyTopic(protocol.DefaultCluster)
	tests := []struct {
		name, to, remark string
	}{
		{"requester gone", "gone", "push reply message fail, channel of <gone> not found."},
		{"no REPLY_TO_CLIENT", "", "reply message properties[REPLY_TO_CLIENT] is null"},
		{"requester refuses", "refuser", "push reply message to refuserfail."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.invoke(remoting.SendReplyMessage, sendExt(topic, 0, replyProps(tt.to)), []byte("x"))
			assert.Equal(t, remoting.SystemError, resp.Code)
			assert.Equal(t, tt.remark, resp.Remark)
			_, _, err := message.ParseOffsetMsgID(resp.Ext("msgId"))
			assert.NoError(t, err, "stored all the same (storeReplyMessageEnable)")
		})
	}
}

// A requester that takes no push answers within replyPushTimeout: the
// replier gets SYSTEM_ERROR as from Java's timed-out callClient.
func TestReplyPushTimeout(t *testing.T) {
	old := replyPushTimeout
	replyPushTimeout = 200 * time.Millisecond
	t.Cleanup(func() { replyPushTimeout = old })
	h := startBroker(t, t.TempDir(), nil)
	req := startRequester(t, h, "mute", silent)
	resp := h.invoke(remoting.SendReplyMessage, sendExt(ReplyTopic(protocol.DefaultCluster), 0, replyProps("mute")), []byte("x"))
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Equal(t, "push reply message to mutefail.", resp.Remark)
	assert.Len(t, req.got(), 1, "pushed once")
}

// Crafted frames: 324 and 325 with bad headers are refused like sends.
func TestReplyBadHeaders(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	topic := ReplyTopic(protocol.DefaultCluster)
	good := sendExt(topic, 0, replyProps("x"))
	without := func(ext map[string]string, k string) map[string]string {
		out := map[string]string{}
		for kk, v := range ext {
			if kk != k {
				out[kk] = v
			}
		}
		return out
	}
	with := func(ext map[string]string, k, v string) map[string]string {
		out := without(ext, k)
		out[k] = v
		return out
	}
	tests := []struct {
		name string
		code int32
		ext  map[string]string
		want int32
		in   string
	}{
		{"no topic", remoting.SendReplyMessage, without(good, "topic"), remoting.SystemError, "topic"},
		{"no queue id", remoting.SendReplyMessage, without(good, "queueId"), remoting.SystemError, "queueId"},
		{"queue id not a number", remoting.SendReplyMessage, with(good, "queueId", "zero"), remoting.SystemError, "queueId"},
		{"queue id out of range", remoting.SendReplyMessage, with(good, "queueId", "9"), remoting.SystemError, "queueId[9] is illegal"},
		{"bad topic name", remoting.SendReplyMessage, with(good, "topic", "a b"), remoting.SystemError, "topic"},
		{"unknown topic", remoting.SendReplyMessage, with(with(good, "topic", "NoSuchReplyTopic"), "defaultTopic", "none"), remoting.TopicNotExist, "not exist"},
		{"v2 long names", remoting.SendReplyMessageV2, good, remoting.SystemError, "the custom field <"},
		{"v2 no topic", remoting.SendReplyMessageV2, without(shortExt(good), "b"), remoting.SystemError, "b"},
		{"v2 bad queue id", remoting.SendReplyMessageV2, with(shortExt(good), "e", "-x"), remoting.SystemError, "e"},
		{"nothing", remoting.SendReplyMessage, nil, remoting.SystemError, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.invoke(tt.code, tt.ext, []byte("x"))
			assert.Equal(t, tt.want, resp.Code, resp.Remark)
			assert.Contains(t, resp.Remark, tt.in)
		})
	}
	// Nothing was stored in the reply topic.
	resp := h.invoke(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "0", resp.Ext("offset"))
}
