package grpc_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/store"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// vmRSS is the process's resident set size in bytes.
func vmRSS(t testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the CPU time the process used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// TestLiteSoak is the million-lite-topic run of docs/lab/BENCHMARKS.md, off
// unless QUIVER_LITE_TOPICS is set: that many lite topics under one parent,
// each with one message sent and read (subscribed, received, acked) over
// gRPC on 127.0.0.1; then a restart from the index snapshot, one by a
// full rebuild, then every one deleted by TTL.
//
//	QUIVER_LITE_TOPICS=1000000 go test -run TestLiteSoak -timeout 60m -v ./modules/grpc/
func TestLiteSoak(t *testing.T) {
	v := os.Getenv("QUIVER_LITE_TOPICS")
	if v == "" {
		t.Skip("QUIVER_LITE_TOPICS is not set")
	}
	total, err := strconv.Atoi(v)
	require.NoError(t, err)
	liteFlush = store.FlushAsync
	t.Cleanup(func() { liteFlush = store.FlushSync })
	ttl := time.Duration(0)
	cfg := func(c *grpcmod.Config) {
		c.Lite.TopicQuota = total
		c.Lite.SubscriptionQuota = total
		c.Lite.TTL = ttl
	}
	n := openLiteNode(t, t.TempDir(), cfg)
	n.parent("chat", 8)
	name := func(i int) string { return "session-" + strconv.Itoa(i) }
	rss0 := vmRSS(t)

	// sendPass sends one message to each of lite topics 0..count-1 from
	// 8 concurrent senders and returns the sends' latencies, sorted.
	sendPass := func(count int, tag string) []time.Duration {
		const workers = 8
		lat := make([][]time.Duration, workers)
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := longCtx(fmt.Sprintf("producer@%d", w))
				for {
					i := int(next.Add(1)) - 1
					if i >= count {
						return
					}
					lite := name(i)
					sp := &grpcapi.SystemProperties{MessageType: grpcapi.MessageType_LITE, LiteTopic: &lite}
					t0 := time.Now()
					r, err := n.cli.SendMessage(ctx, &grpcapi.SendMessageRequest{Messages: []*grpcapi.Message{msg("chat", tag+lite, "token", sp)}})
					lat[w] = append(lat[w], time.Since(t0))
					if err != nil || r.GetStatus().GetCode() != grpcapi.Code_OK {
						t.Errorf("send %s: %v %v", lite, err, r.GetStatus())
						return
					}
				}
			}()
		}
		wg.Wait()
		all := slices.Concat(lat...)
		slices.Sort(all)
		return all
	}

	// Send: one message to each lite topic, each its first (creation).
	start := time.Now()
	all := sendPass(total, "m-")
	sendTook := time.Since(start)
	p99 := all[len(all)*99/100]
	require.Equal(t, total, n.srv.LiteTopics())

	// Read: one gateway subscribes to all, receives and acks each message.
	start = time.Now()
	ctx := longCtx("gw")
	for i := 0; i < total; i += 1000 {
		var set []string
		for j := i; j < min(i+1000, total); j++ {
			set = append(set, name(j))
		}
		require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "gateway", grpcapi.LiteSubscriptionAction_PARTIAL_ADD, nil, set...).GetCode())
	}
	read := 0
	for read < total {
		rs, err := n.cli.ReceiveMessage(ctx, &grpcapi.ReceiveMessageRequest{Group: res("gateway"), MessageQueue: &grpcapi.MessageQueue{Topic: res("chat"), Id: -1},
			BatchSize: 32, InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(time.Second)})
		require.NoError(t, err)
		var entries []*grpcapi.AckMessageEntry
		for {
			r, err := rs.Recv()
			if err != nil {
				break
			}
			if m := r.GetMessage(); m != nil {
				lt := m.GetSystemProperties().GetLiteTopic()
				entries = append(entries, &grpcapi.AckMessageEntry{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), LiteTopic: &lt})
			}
		}
		require.NotEmpty(t, entries, "read %d of %d", read, total)
		a, err := n.cli.AckMessage(ctx, &grpcapi.AckMessageRequest{Group: res("gateway"), Topic: res("chat"), Entries: entries})
		require.NoError(t, err)
		require.Equal(t, grpcapi.Code_OK, a.GetStatus().GetCode())
		read += len(entries)
	}
	readTook := time.Since(start)
	require.Equal(t, grpcapi.Code_OK, n.sync("gw", "chat", "gateway", grpcapi.LiteSubscriptionAction_COMPLETE_REMOVE, nil).GetCode())
	runtime.GC()
	rss := vmRSS(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	// The same sends to lite topics that exist (up to 200,000 of them):
	// what a send costs without creating anything, to set against the
	// creating sends' latency under the same concurrency.
	again := sendPass(min(total, 200_000), "again-")
	require.Equal(t, total, n.srv.LiteTopics(), "sends to existing lite topics created some")

	// Restart: the clean stop writes the index snapshot; the start loads
	// it and reads the parent queues' records after it, then the journal.
	ttl = time.Millisecond
	start = time.Now()
	n.close()
	stopTook := time.Since(start)
	start, cpu0 := time.Now(), cpuTime()
	n = openLiteNode(t, n.dir, cfg)
	restart, restartCPU := time.Since(start), cpuTime()-cpu0
	require.Equal(t, total, n.srv.LiteTopics()+0, "every lite topic is back")
	snap, reason, records := n.srv.LiteLoaded()
	assert.True(t, snap, reason)

	// And without the snapshot: the full rebuild from the parent's records.
	n.close()
	require.NoError(t, os.Rename(n.dir+"/lite/lite.snapshot", n.dir+"/lite/lite.snapshot.aside"))
	start, cpu0 = time.Now(), cpuTime()
	n = openLiteNode(t, n.dir, cfg)
	rebuild, rebuildCPU := time.Since(start), cpuTime()-cpu0
	require.Equal(t, total, n.srv.LiteTopics()+0, "every lite topic is back")

	// TTL: every lite topic expired; the sweep deletes them a batch at a
	// time (the endpoint's own ticker sweeps too), while a probe takes the
	// index every millisecond as an RPC would and notes its longest wait.
	var maxHeld, maxWait time.Duration
	probeDone := make(chan struct{})
	probed := make(chan time.Duration)
	go func() {
		var worst time.Duration
		for {
			select {
			case <-probeDone:
				probed <- worst
				return
			case <-time.After(time.Millisecond):
				worst = max(worst, n.srv.LiteLockWait())
			}
		}
	}()
	start = time.Now()
	for n.srv.LiteTopics() > 0 && time.Since(start) < 10*time.Minute {
		maxHeld = max(maxHeld, n.srv.SweepLiteOnce())
		time.Sleep(10 * time.Millisecond) // as the endpoint's sweep follows one cut short
	}
	sweepTook := time.Since(start)
	close(probeDone)
	maxWait = <-probed
	assert.Zero(t, n.srv.LiteTopics())

	t.Logf("lite soak: %d lite topics, 8 parent queues, load average %s", total, loadAvg())
	t.Logf("send (creation): %v, %.0f/s, p50 %v, p99 %v, max %v", sendTook.Round(time.Millisecond), float64(total)/sendTook.Seconds(), all[len(all)/2], p99, all[len(all)-1])
	t.Logf("send to an existing lite topic (%d): p50 %v, p99 %v, max %v", len(again), again[len(again)/2], again[len(again)*99/100], again[len(again)-1])
	t.Logf("read (subscribe, receive, ack): %v, %.0f/s", readTook.Round(time.Millisecond), float64(total)/readTook.Seconds())
	t.Logf("process RSS idle after reading: %d MiB (%d MiB before sending); heap in use %d MiB; %.0f bytes per lite topic of RSS growth",
		rss>>20, rss0>>20, ms.HeapAlloc>>20, float64(rss-rss0)/float64(total))
	t.Logf("clean stop (snapshot written): %v", stopTook.Round(time.Millisecond))
	t.Logf("restart to serving from the snapshot: %v, %v of CPU (%d parent records read after it)", restart.Round(time.Millisecond), restartCPU.Round(time.Millisecond), records)
	t.Logf("restart to serving by a full rebuild (snapshot set aside): %v, %v of CPU", rebuild.Round(time.Millisecond), rebuildCPU.Round(time.Millisecond))
	t.Logf("TTL sweep: all deleted in %v, longest hold of the index %v, longest wait of a probe for it %v", sweepTook.Round(time.Millisecond), maxHeld, maxWait)
}

// longCtx is a call context of client without the tests' 10 s bound.
func longCtx(client string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", client)
}
