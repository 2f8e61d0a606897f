package interop

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func rawClient(t *testing.T) *remoting.Client {
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func srvConsumerIDs(t *testing.T, srv *testserver.Proc, group string) []string {
	c := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil))
	if err != nil || resp.Code != remoting.Success {
		return nil
	}
	var l protocol.ConsumerIDList
	if json.Unmarshal(resp.Body, &l) != nil {
		return nil
	}
	return l.ConsumerIDList
}

// awaitRoute polls the name server until topic has a route (or, for
// servers that need signatures, until it answers anything but 17).
func awaitRoute(t *testing.T, ns, topic string) {
	t.Helper()
	c := rawClient(t)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		cancel()
		if err == nil && resp.Code != remoting.TopicNotExist {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("topic %s has no route after 15s", topic)
}

// committedOffsets asks the broker for the group's committed offset of
// each queue of topic (-1 when none).
func committedOffsets(t *testing.T, srv *testserver.Proc, group, topic string, queues int) []int64 {
	t.Helper()
	c := rawClient(t)
	out := make([]int64, queues)
	for q := 0; q < queues; q++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.QueryConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(q)}, nil))
		cancel()
		require.NoError(t, err)
		out[q] = -1
		if resp.Code == remoting.Success {
			out[q], err = strconv.ParseInt(resp.Ext("offset"), 10, 64)
			require.NoError(t, err)
		}
	}
	return out
}

// TestHostileFramesKeepServing sends garbage, a 2 GiB declared length and
// truncated frames to both ports, then shows normal traffic still works.
func TestHostileFramesKeepServing(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	hostile := [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0},                              // 2 GiB declared
		{0xFF, 0xFF, 0xFF, 0xF0},                                          // negative length
		{0, 0, 0, 100, 0, 0, 0, 10, '{', '"'},                             // truncated frame
		{0, 0, 0, 12, 0, 0, 0, 8, '{', 'n', 'o', 'p', 'e', '}', '!', '!'}, // bad JSON header
		{0, 0, 0, 8, 7, 0, 0, 0, 1, 2, 3, 4},                              // unknown serialize type
	}
	for _, addr := range []string{srv.Namesrv, srv.Broker} {
		for i, h := range hostile {
			conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
			require.NoError(t, err)
			_, err = conn.Write(h)
			require.NoError(t, err, "payload %d", i)
			// The server closes the connection (or waits for more bytes on
			// a truncated frame); either way it must not answer garbage.
			conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			buf := make([]byte, 16)
			n, _ := conn.Read(buf)
			assert.Zero(t, n, "payload %d to %s got an answer", i, addr)
			conn.Close()
		}
	}
	// A request with a lying header length inside a valid frame.
	conn, err := net.Dial("tcp", srv.Broker)
	require.NoError(t, err)
	frame := make([]byte, 12)
	binary.BigEndian.PutUint32(frame, 8)
	binary.BigEndian.PutUint32(frame[4:], 0x00FFFFFF)
	_, err = conn.Write(frame)
	require.NoError(t, err)
	conn.Close()

	// Both servers still serve well-behaved clients.
	c := rawClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, srv.Namesrv, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": protocol.AutoCreateTopic}, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.Success, resp.Code)
	resp, err = c.Invoke(ctx, srv.Broker, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": protocol.AutoCreateTopic, "queueId": "0"}, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.Success, resp.Code)
	// An unknown request code is answered, not dropped.
	resp, err = c.Invoke(ctx, srv.Broker, remoting.NewRequest(9999, nil, nil))
	require.NoError(t, err)
	assert.Equal(t, remoting.RequestCodeNotSupported, resp.Code)
	p := newProducer(t, srv.Namesrv)
	sendSync(t, p, newMsg(uniq("AfterGarbage"), "ok"))
}
