package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// benchBroker starts a broker for a benchmark; testing.B shares the
// harness through a *testing.T-like adapter.
func benchBroker(b *testing.B) *harness {
	return startBrokerTB(b, b.TempDir())
}

func startBrokerTB(b *testing.B, dir string) *harness {
	st := openStoreTB(b, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	br, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir})
	require.NoError(b, err)
	require.NoError(b, br.Start(context.Background()))
	h := &harness{b: br, st: st, dir: dir, addr: br.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	b.Cleanup(func() {
		h.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		br.Stop(ctx)
		st.Close()
	})
	return h
}

// BenchmarkSendThroughBroker measures SEND_MESSAGE round trips of 1 KiB
// bodies over loopback TCP, from parallel senders on one connection.
func BenchmarkSendThroughBroker(b *testing.B) {
	h := benchBroker(b)
	body := make([]byte, 1024)
	ext := sendExt("BenchSend", 0, message.Properties{"TAGS": "T"})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e := make(map[string]string, len(ext))
			for k, v := range ext {
				e[k] = v
			}
			resp, err := h.client.Invoke(context.Background(), h.addr, remoting.NewRequest(remoting.SendMessage, e, body))
			if err != nil || resp.Code != remoting.Success {
				b.Fatalf("send: %v %v", err, resp)
			}
		}
	})
}

// BenchmarkPullThroughBroker measures PULL_MESSAGE of 32 × 1 KiB messages
// per request over loopback TCP.
func BenchmarkPullThroughBroker(b *testing.B) {
	h := benchBroker(b)
	body := make([]byte, 1024)
	const n = 4096
	for i := 0; i < n; i++ {
		resp, err := h.client.Invoke(context.Background(), h.addr, remoting.NewRequest(remoting.SendMessage, sendExt("BenchPull", 0, nil), body))
		require.NoError(b, err)
		require.Equal(b, remoting.Success, resp.Code)
	}
	b.SetBytes(32 * 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64((i * 32) % (n - 32))
		resp, err := h.client.Invoke(context.Background(), h.addr, remoting.NewRequest(remoting.PullMessage, pullExt("G", "BenchPull", 0, off, pullSubscription, 0), nil))
		if err != nil || resp.Code != remoting.Success {
			b.Fatalf("pull: %v %v", err, resp)
		}
		if got := resp.Ext("nextBeginOffset"); got != strconv.FormatInt(off+32, 10) {
			b.Fatalf("nextBeginOffset %s", got)
		}
	}
}
