package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/internal/testserver"
)

// acceptRecorder is a loopback listener that records the remote address
// of every connection it accepts.
type acceptRecorder struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []string
	own  map[string]bool // the recorder's own probe connections
	done chan struct{}
}

func newAcceptRecorder(t *testing.T) *acceptRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &acceptRecorder{ln: ln, own: map[string]bool{}, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.seen = append(r.seen, c.RemoteAddr().String())
			r.mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-r.done })
	return r
}

func (r *acceptRecorder) addrPort() netip.AddrPort {
	return r.ln.Addr().(*net.TCPAddr).AddrPort()
}

// acceptedBefore dials the listener itself and waits until that probe is
// accepted. Connections are accepted in the order they were made, so the
// connections it returns (all but its probes) are every one made by
// others before the call.
func (r *acceptRecorder) acceptedBefore(t *testing.T) []string {
	t.Helper()
	c, err := net.Dial("tcp", r.ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	probe := c.LocalAddr().String()
	r.mu.Lock()
	r.own[probe] = true
	r.mu.Unlock()
	var out []string
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		out = out[:0]
		for _, a := range r.seen {
			if a == probe {
				return true
			}
			if !r.own[a] {
				out = append(out, a)
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)
	return out
}

// TestMessageGetByEitherID sends with the official Go client and finds
// the message through `mq admin message get` and the console by both ids
// of its SendResult: the msgId (UNIQ_KEY, which decodes as the producer's
// address) and the offsetMsgId. An id naming an address that is no
// registered broker is never dialled.
func TestMessageGetByEitherID(t *testing.T) {
	rlog.SetLogLevel("error") // runs in -short too: one mq dev, about a second once mq is built
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=" + consoleAddr}})
	waitListening(t, consoleAddr)
	ns, base := dev.Namesrv, "http://"+consoleAddr
	const topic = "MsgIDTopic"
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "2", "--write-queues", "2")
	require.Eventually(t, func() bool { // the name server learns of it at the broker's next registration
		_, err := mqRun(t, ns, "topic", "route", "--topic", topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)

	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName("MsgIDProducer"),
		producer.WithInstanceName(fmt.Sprintf("msgid-%d", time.Now().UnixNano())), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	var results []*primitive.SendResult
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("by-id-%d", len(results))))
		m.WithKeys([]string{fmt.Sprintf("k-%d", len(results))})
		res, err := p.SendSync(ctx, m)
		if err == nil && res.Status == primitive.SendOK {
			results = append(results, res)
		}
		return len(results) == 2
	}, 20*time.Second, 50*time.Millisecond)
	for _, r := range results {
		require.NotEqual(t, r.MsgID, r.OffsetMsgID)
		require.Len(t, r.MsgID, 32)
	}

	t.Run("mq admin message get", func(t *testing.T) {
		for i, r := range results {
			want := fmt.Sprintf("by-id-%d", i)
			for _, id := range []string{r.MsgID, r.OffsetMsgID} {
				var m messageView
				mqJSON(t, ns, &m, "message", "get", "--id", id)
				assert.Equal(t, want, m.Body, "id %s", id)
				assert.Equal(t, r.MsgID, m.MsgID)
				assert.Equal(t, r.OffsetMsgID, m.OffsetMsgID)
				assert.Equal(t, topic, m.Topic)
				assert.Equal(t, "broker-a", m.Broker)
			}
			var m messageView
			mqJSON(t, ns, &m, "message", "get", "--id", r.MsgID, "--topic", topic)
			assert.Equal(t, want, m.Body)
		}
		rows := parseTable(t, mqOK(t, ns, "message", "get", "--id", results[1].MsgID))
		fields := map[string]string{}
		for _, r := range rows {
			fields[r["FIELD"]] = r["VALUE"]
		}
		assert.Equal(t, "by-id-1", fields["Body"])
		assert.Equal(t, results[1].OffsetMsgID, fields["Offset msg ID"])

		// The broker's own address with an offset it holds no message at:
		// VIEW_MESSAGE_BY_ID fails, the unique-key lookup finds nothing.
		host, err := netip.ParseAddrPort(dev.Broker)
		require.NoError(t, err)
		_, err = mqRun(t, ns, "message", "get", "--id", message.OffsetMsgID(host, 1<<40))
		assert.ErrorContains(t, err, "message not found")
		assert.ErrorContains(t, err, "on broker-a")

		_, err = mqRun(t, ns, "message", "get", "--id", results[0].MsgID, "--topic", "NoSuchTopic")
		assert.Error(t, err)
		_, err = mqRun(t, ns, "message", "get", "--id", "not-an-id")
		assert.ErrorContains(t, err, "malformed message id")
	})

	t.Run("console search", func(t *testing.T) {
		for i, r := range results {
			for _, id := range []string{r.MsgID, r.OffsetMsgID} {
				var ms []messageView
				require.Equal(t, http.StatusOK, httpJSON(t, "GET", base+"/api/messages?id="+id, nil, &ms))
				require.Len(t, ms, 1, "id %s", id)
				assert.Equal(t, fmt.Sprintf("by-id-%d", i), ms[0].Body)
				assert.Equal(t, r.OffsetMsgID, ms[0].OffsetMsgID)
			}
		}
		var ms []messageView
		httpJSON(t, "GET", base+"/api/messages?"+url.Values{"id": {results[0].MsgID}, "topic": {topic}}.Encode(), nil, &ms)
		require.Len(t, ms, 1)
		assert.Equal(t, "by-id-0", ms[0].Body)
	})

	// An offsetMsgId (and so a msgId: the same 32 digits) naming a
	// listener that is no registered broker: looked up as a unique key,
	// never dialled.
	t.Run("unregistered address not dialled", func(t *testing.T) {
		rec := newAcceptRecorder(t)
		id := message.OffsetMsgID(rec.addrPort(), 0)
		_, err := mqRun(t, ns, "message", "get", "--id", id)
		assert.ErrorContains(t, err, "message not found")
		var e map[string]string
		assert.Equal(t, http.StatusBadGateway, httpJSON(t, "GET", base+"/api/messages?id="+id, nil, &e))
		assert.Contains(t, e["error"], "message not found")
		assert.Empty(t, rec.acceptedBefore(t), "connections to the address in the id")

		// The same with the offset of a stored message.
		_, off, err := message.ParseOffsetMsgID(results[0].OffsetMsgID)
		require.NoError(t, err)
		id = message.OffsetMsgID(rec.addrPort(), off)
		_, err = mqRun(t, ns, "message", "get", "--id", id)
		assert.ErrorContains(t, err, "message not found")
		assert.Equal(t, http.StatusBadGateway, httpJSON(t, "GET", base+"/api/messages?id="+id, nil, &e))
		assert.Empty(t, rec.acceptedBefore(t), "connections to the address in the id")
	})
}
