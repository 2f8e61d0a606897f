package namesrv

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func tcpSet() *transport.Set {
	return transport.NewSet([]transport.Provider{tcp.NewProvider()}, map[string]any{"tcp": tcp.NewConfig()}, transport.Deps{})
}

// startServer runs a name server on 127.0.0.1:0 and returns it with its
// address; it stops at the end of the test.
func startServer(t *testing.T) (*Server, string) {
	t.Helper()
	cfg := NewConfig()
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kvConfig.json")
	return startServerCfg(t, cfg)
}

// startServerCfg runs a name server with cfg, listening on 127.0.0.1:0.
func startServerCfg(t *testing.T, cfg *Config) (*Server, string) {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	s, err := New(cfg, tcpSet(), testLogger(t))
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	addrs := s.Addrs()
	require.Len(t, addrs, 1)
	return s, addrs[0]
}

// newClient returns a remoting client over TCP, closed at the end of the
// test (before the server stops: cleanups run last-in first-out).
func newClient(t *testing.T) *remoting.Client {
	t.Helper()
	dial := func(ctx context.Context, addr string) (transport.Conn, error) {
		c, err := tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c := remoting.NewClient(dial, nil, testLogger(t), remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func invoke(t *testing.T, c *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, req)
	require.NoError(t, err)
	return resp
}

// broker describes a registering broker in tests.
type broker struct {
	cluster, name, addr, ha string
	id                      int64
	dv                      protocol.DataVersion
	topics                  []*protocol.TopicConfig
}

func (b broker) wrapper() protocol.TopicConfigWrapper {
	w := protocol.TopicConfigWrapper{DataVersion: b.dv, TopicConfigTable: map[string]*protocol.TopicConfig{}}
	for _, tc := range b.topics {
		w.TopicConfigTable[tc.TopicName] = tc
	}
	return w
}

func (b broker) header() map[string]string {
	cluster := b.cluster
	if cluster == "" {
		cluster = protocol.DefaultCluster
	}
	return map[string]string{
		"brokerName":   b.name,
		"brokerAddr":   b.addr,
		"clusterName":  cluster,
		"haServerAddr": b.ha,
		"brokerId":     strconv.FormatInt(b.id, 10),
		"compressed":   "false",
		"bodyCrc32":    "0",
	}
}

// registerJSON builds a plain REGISTER_BROKER request.
func (b broker) registerJSON(t testing.TB) *remoting.Command {
	body, err := json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: b.wrapper(), FilterServerList: []string{}})
	require.NoError(t, err)
	return remoting.NewRequest(remoting.RegisterBroker, b.header(), body)
}

// registration is the table-level form of b.
func (b broker) registration() BrokerRegistration {
	cluster := b.cluster
	if cluster == "" {
		cluster = protocol.DefaultCluster
	}
	return BrokerRegistration{ClusterName: cluster, BrokerName: b.name, BrokerAddr: b.addr, BrokerID: b.id, HAServerAddr: b.ha, Topics: b.wrapper()}
}

func topic(name string, queues, perm int32) *protocol.TopicConfig {
	return &protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: perm, TopicFilterType: "SINGLE_TAG"}
}

// javaCompressed encodes like Java's RegisterBrokerBody.encode(true); with
// jsonTopics each topic chunk is TopicConfig JSON instead of Java's
// space-separated TopicConfig.encode().
func javaCompressed(t testing.TB, w protocol.TopicConfigWrapper, filters []string, jsonTopics bool) []byte {
	var raw bytes.Buffer
	chunk := func(b []byte) {
		binary.Write(&raw, binary.BigEndian, int32(len(b)))
		raw.Write(b)
	}
	dv, err := json.Marshal(w.DataVersion)
	require.NoError(t, err)
	chunk(dv)
	binary.Write(&raw, binary.BigEndian, int32(len(w.TopicConfigTable)))
	for _, tc := range w.TopicConfigTable {
		if jsonTopics {
			b, err := json.Marshal(tc)
			require.NoError(t, err)
			chunk(b)
		} else {
			chunk([]byte(strings.Join([]string{tc.TopicName, itoa(tc.ReadQueueNums), itoa(tc.WriteQueueNums), itoa(tc.Perm), tc.TopicFilterType}, " ")))
		}
	}
	fs, err := json.Marshal(filters)
	require.NoError(t, err)
	chunk(fs)
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write(raw.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return z.Bytes()
}

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }

// goClientBrokerAddrs mimics how rocketmq-client-go parses brokerAddrs
// (spec §3.1): take the raw text of the object, drop its first and last
// character, split on ",", split each piece at its first ":", strip every
// '"' and parse the key as int64.
func goClientBrokerAddrs(t testing.TB, raw string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	inner := raw[1 : len(raw)-1]
	if inner == "" {
		return out
	}
	for _, piece := range strings.Split(inner, ",") {
		k, v, found := strings.Cut(piece, ":")
		require.True(t, found, "piece %q has no ':'", piece)
		id, err := strconv.ParseInt(strings.ReplaceAll(k, `"`, ""), 10, 64)
		require.NoError(t, err, "key of %q", piece)
		out[id] = strings.ReplaceAll(v, `"`, "")
	}
	return out
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
