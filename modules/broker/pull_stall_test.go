package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// Stalled-consumer set-up: stallPulls pulls held on one connection that
// does not read, each answered with one stallBody-sized message: far more
// than the consumer's receive window and the broker's socket send buffer
// (at most 4 MiB by Linux's default tcp_wmem) take, so the broker's
// writes to it block.
const (
	stallPulls = 32
	stallBody  = 768 << 10
)

// startStallBroker starts a broker whose tcp writes give up after
// writeTimeout, with pulls big enough to carry one stallBody message.
func startStallBroker(tb testing.TB, writeTimeout time.Duration) (*Broker, string) {
	tb.Helper()
	dir := tb.TempDir()
	st := openStoreTB(tb, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	cfg.PullBytesMax = 1 << 20
	tcfg := tcp.NewConfig()
	tcfg.WriteTimeout = writeTimeout
	set := transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcfg}, transport.Deps{})
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(tb, err)
	b, err := New(cfg, Deps{Store: st, Transports: set, DataDir: dir, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(tb, err)
	require.NoError(tb, b.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(tb, b.Stop(ctx))
		require.NoError(tb, st.Close())
	})
	return b, b.Addrs()[0]
}

func stallInvoke(tb testing.TB, c *remoting.Client, addr string, code int32, ext map[string]string, body []byte) *remoting.Command {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	require.NoError(tb, err)
	return resp
}

func stallSend(tb testing.TB, c *remoting.Client, addr, topic string, body []byte) {
	tb.Helper()
	resp := stallInvoke(tb, c, addr, remoting.SendMessage, sendExt(topic, 0, message.Properties{}), body)
	require.Equal(tb, remoting.Success, resp.Code, resp.Remark)
}

// stalledConsumer is a raw connection that sends pulls and does not read
// their answers until told to.
type stalledConsumer struct {
	conn    *net.TCPConn
	opaques []int32
	peer    *remoting.Peer // the broker's end
}

// stall dials b, holds stallPulls pulls of topic (queue 0, from offset)
// and finds the broker's end of the connection.
func stall(tb testing.TB, b *Broker, addr, topic string, offset int64) *stalledConsumer {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(tb, err)
	// Its receive window stays at the initial size (Linux grows it only
	// as the application reads); a receive buffer shrunk after connect
	// would make the kernel drop data and back off retransmitting it.
	tc := c.(*net.TCPConn)
	tb.Cleanup(func() { tc.Close() })
	s := &stalledConsumer{conn: tc}
	var frames []byte
	for range stallPulls {
		req := remoting.NewRequest(remoting.PullMessage, pullExt("GS", topic, 0, offset, pullSuspend|pullSubscription, 60*time.Second), nil)
		s.opaques = append(s.opaques, req.Opaque)
		frames = append(frames, codec.EncodeWithLength(req)...)
	}
	_, err = tc.Write(frames)
	require.NoError(tb, err)
	require.Eventually(tb, func() bool {
		for _, p := range b.server.Peers() {
			if p.RemoteAddr() == tc.LocalAddr().String() {
				s.peer = p
			}
		}
		return s.peer != nil
	}, 10*time.Second, time.Millisecond)
	return s
}

// readAnswers reads the connection's answers: one to each pull, each
// with the big message. (Their order is the order the pulls were parked
// in, which is not the order they were sent: a connection's requests are
// served concurrently.)
func (s *stalledConsumer) readAnswers(tb testing.TB) {
	tb.Helper()
	require.NoError(tb, s.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	r := bufio.NewReaderSize(s.conn, 1<<20)
	var got []int32
	for i := range s.opaques {
		var lb [4]byte
		_, err := io.ReadFull(r, lb[:])
		require.NoError(tb, err, "answer %d", i)
		frame := make([]byte, binary.BigEndian.Uint32(lb[:]))
		_, err = io.ReadFull(r, frame)
		require.NoError(tb, err, "answer %d", i)
		resp, err := codec.Decode(frame)
		require.NoError(tb, err)
		got = append(got, resp.Opaque)
		require.Equal(tb, remoting.Success, resp.Code, resp.Remark)
		msgs, err := message.DecodeAll(resp.Body)
		require.NoError(tb, err)
		require.Len(tb, msgs, 1)
		assert.Len(tb, msgs[0].Body, stallBody)
	}
	assert.ElementsMatch(tb, s.opaques, got)
}

// TestHeldPullNotDelayedByStalledConsumer: a consumer whose socket does
// not drain holds up only its own held-pull answers. Another consumer's
// held pull, woken after the stalled one's, is answered while the
// stalled connection is still open with its answers unwritten (before
// the broker's write timeout drops it), and the stalled consumer, once
// it reads, gets all its answers in order.
func TestHeldPullNotDelayedByStalledConsumer(t *testing.T) {
	const writeTimeout = 10 * time.Second
	b, addr := startStallBroker(t, writeTimeout)
	client := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	defer client.Close()

	big := []byte(strings.Repeat("s", stallBody))
	stallSend(t, client, addr, "Stall", []byte("first"))
	stallSend(t, client, addr, "Normal", []byte("first"))
	s := stall(t, b, addr, "Stall", 1)

	got := make(chan *remoting.Command, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*writeTimeout)
	defer cancel()
	req := remoting.NewRequest(remoting.PullMessage, pullExt("GN", "Normal", 0, 1, pullSuspend|pullSubscription, 60*time.Second), nil)
	require.NoError(t, client.InvokeAsync(ctx, addr, req, func(c *remoting.Command, err error) {
		if err != nil {
			c = &remoting.Command{Code: -1, Remark: err.Error()}
		}
		got <- c
	}))
	require.Eventually(t, func() bool { return b.holds.held() == stallPulls+1 }, 10*time.Second, time.Millisecond)

	// Wakes the stalled consumer's pulls first: ~24 MiB of answers to a
	// connection that reads nothing.
	stallSend(t, client, addr, "Stall", big)
	stallSend(t, client, addr, "Normal", []byte("second"))

	var c *remoting.Command
	select {
	case c = <-got:
	case <-time.After(2 * writeTimeout):
		t.Fatalf("the normal consumer's held pull was not answered within twice the write timeout (%v)", writeTimeout)
	}
	// Checked before anything else: the stalled connection is still
	// blocked, not dropped by the write timeout.
	select {
	case <-s.peer.Done():
		t.Fatal("the normal consumer was answered only after the stalled connection hit the write timeout")
	default:
	}
	require.Equal(t, remoting.Success, c.Code, c.Remark)
	msgs, err := message.DecodeAll(c.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "second", string(msgs[0].Body))

	s.readAnswers(t)
	assert.Zero(t, b.holds.held())
}

// BenchmarkHeldPullWithStalledPeer measures a long poll's round trip:
// a held pull, a send to its queue, the pull's answer. With stalled=1
// another connection holds pulls whose answers it never reads (they
// were woken before the timed loop and keep the broker's writes to it
// blocked); its write timeout (20 s) outlasts the loop.
func BenchmarkHeldPullWithStalledPeer(b *testing.B) {
	for _, stalled := range []int{0, 1} {
		b.Run(fmt.Sprintf("stalled=%d", stalled), func(b *testing.B) {
			br, addr := startStallBroker(b, 20*time.Second)
			client := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
			defer client.Close()
			stallSend(b, client, addr, "Normal", []byte("first"))
			if stalled > 0 {
				stallSend(b, client, addr, "Stall", []byte("first"))
				stall(b, br, addr, "Stall", 1)
				require.Eventually(b, func() bool { return br.holds.held() == stallPulls }, 10*time.Second, time.Millisecond)
				stallSend(b, client, addr, "Stall", []byte(strings.Repeat("s", stallBody)))
			}
			got := make(chan *remoting.Command, 1)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			body := []byte("m")
			b.ResetTimer()
			for i := range b.N {
				req := remoting.NewRequest(remoting.PullMessage, pullExt("GN", "Normal", 0, int64(i+1), pullSuspend|pullSubscription, 60*time.Second), nil)
				require.NoError(b, client.InvokeAsync(ctx, addr, req, func(c *remoting.Command, err error) {
					if err != nil {
						c = &remoting.Command{Code: -1, Remark: err.Error()}
					}
					got <- c
				}))
				// Until the pull is parked (the stalled connection's
				// pulls were all woken), so the send wakes it.
				for wait := time.Now().Add(10 * time.Second); br.holds.held() == 0; {
					if time.Now().After(wait) {
						b.Fatalf("pull %d not held", i)
					}
					time.Sleep(10 * time.Microsecond)
				}
				stallSend(b, client, addr, "Normal", body)
				if c := <-got; c.Code != remoting.Success {
					b.Fatalf("pull %d: %d %s", i, c.Code, c.Remark)
				}
			}
		})
	}
}
