package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The official 4.x client (official.go) starts a go-cache janitor in a
// package variable's initialisation; it lives as long as the process. Its
// push consumer's statistics goroutines sleep until the next minute, hour
// or month, its expired-message cleaner for ConsumeTimeout (15 min),
// before they look whether Shutdown closed them.
var officialClientLingering = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer.(*pushConsumer).Start.func1.2"),
	goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer.(*statsItemSet).init.func4"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer.(*statsItemSet).init.func5"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer.(*statsItemSet).init.func6"),
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, officialClientLingering...)
}

// testMQ is the mq binary for the tests: $QUIVER_PEERS_MQ, or built from
// the tree.
func testMQ(t *testing.T) string {
	t.Helper()
	if mq := os.Getenv("QUIVER_PEERS_MQ"); mq != "" {
		return mq
	}
	root, err := repoRoot()
	require.NoError(t, err)
	mq := filepath.Join(t.TempDir(), "mq")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, build(ctx, root, mq, "./cmd/mq"))
	return mq
}

// TestGRPCRows runs the 5.x client rows with tiny counts against a real
// `mq dev` (the gRPC side only: no nats-server) and checks that each
// produced its figures. It skips only when node or rocketmq-client-nodejs
// is missing (CI installs both, see .ci/run).
func TestGRPCRows(t *testing.T) {
	tmp := t.TempDir()
	if _, err := findNodeClient(tmp); err != nil {
		t.Skipf("the 5.x client rows need node and rocketmq-client-nodejs: %v", err)
	}
	mq := testMQ(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, err := startQuiver(ctx, mq, filepath.Join(tmp, "quiver"), false, "")
	require.NoError(t, err)
	defer q.close()

	f := flags{n: 300, dur: 5 * time.Second, latDur: time.Second, grpcRate: 200, window: 64,
		// two of the four send rows (and the | syntax of -only)
		only: grpcSendName(1) + "|" + grpcSendName(16) + "|backlog|end-to-end"}
	eachOf := func(qt target, fn func(target) error) error { return fn(qt) }
	withTopic := func(t target, tag string, fn func(string) error) error {
		topic, err := t.newTopic(ctx, tag)
		if err != nil {
			return err
		}
		defer t.dropTopic(context.WithoutCancel(ctx), topic)
		return fn(topic)
	}
	rep := &report{}
	require.NoError(t, grpcRows(ctx, f, tmp, q, eachOf, withTopic, rep))
	assert.Empty(t, rep.fails)

	got := func(name string) float64 {
		m := rep.index[name]
		require.NotNil(t, m, "row %q", name)
		require.Len(t, m.vals["Quiver"], 1, "row %q", name)
		return m.vals["Quiver"][0]
	}
	for _, c := range []int{1, 16} {
		name := grpcSendName(c)
		assert.Greater(t, got(name), 0.0, name)
		assert.Greater(t, got(name+": client CPU per message"), 0.0, name)
	}
	assert.Greater(t, got(grpcSendName(1)+": send p50"), 0.0)
	assert.Nil(t, rep.index[grpcSendName(64)], "not selected by -only")
	assert.Greater(t, got(grpcBacklogName), 0.0)
	e2e := grpcE2EName(200)
	p50, p99 := got(e2e+": p50"), got(e2e+": p99")
	assert.Greater(t, p50, 0.0)
	assert.GreaterOrEqual(t, p99, p50)
}

// TestGRPCRowsSkipWithoutClient: without the client module the rows are
// skipped with the reason noted, and the run goes on.
func TestGRPCRowsSkipWithoutClient(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("QUIVER_NODE_CLIENT_DIR", empty)
	_, err := findNodeClient(t.TempDir())
	require.Error(t, err)
	if !strings.Contains(err.Error(), "node is not installed") {
		assert.Contains(t, err.Error(), "npm install --prefix "+empty+" rocketmq-client-nodejs@"+nodeClientVersion)
	}
	rep := &report{}
	f := flags{only: "gRPC", grpcRate: 2000}
	fail := func(target, func(target) error) error { return assert.AnError }
	require.NoError(t, grpcRows(context.Background(), f, t.TempDir(), nil, fail, nil, rep))
	require.NoError(t, grpcRows(context.Background(), f, t.TempDir(), nil, fail, nil, rep))
	assert.Len(t, rep.fails, 1, "noted once")
	assert.Contains(t, rep.fails[0], "gRPC 5.x client rows skipped")
	assert.Empty(t, rep.rows)
}

func TestWantParts(t *testing.T) {
	tests := []struct {
		only, name string
		want       bool
	}{
		{"", "anything", true},
		{"gRPC", grpcBacklogName, true},
		{"gRPC", "official client: publish 1 KiB, 1 producer(s), sync", false},
		{"gRPC|official client: publish", "official client: publish 1 KiB, 1 producer(s), sync", true},
		{"latency|fan-out", "fan-out 1 KiB, 1 producer, 8 groups (deliveries/s)", true},
		{"latency|fan-out", "backlog consume 1 KiB, 1 consumer(s)", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, flags{only: tt.only}.want(tt.name), "%q in %q", tt.only, tt.name)
	}
	assert.True(t, flags{only: "gRPC|sync-durable"}.anyAsync())
	assert.False(t, flags{only: "sync-durable"}.anyAsync())
}
