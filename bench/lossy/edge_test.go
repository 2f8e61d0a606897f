//go:build linux

package lossy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/internal/testserver"
)

// edgeSets are config.edge.yaml's settings as --set flags (the test
// server takes no config file); TestEdgeSetsMatchFile keeps them equal.
var edgeSets = map[string][]string{
	"common": {
		"broker.send_queue_capacity=512",
		"broker.pull_bytes_max=128KiB",
	},
	"pebble": {
		"storage.engine=pebble",
		"storage.pebble.memtable_size=2MiB",
		"storage.pebble.block_cache_size=2MiB",
		"storage.pebble.max_open_files=256",
	},
	// config.edge.yaml's commented CommitLog alternative.
	"commitlog": {
		"storage.engine=commitlog",
		"storage.commitlog.segment_size=16MiB",
		"storage.commitlog.cq_entries_per_file=100000",
		"storage.commitlog.key_index=false",
	},
}

// TestEdgeConfigFile checks that config.edge.yaml loads strictly and sets
// exactly the common and Pebble keys TestEdgeFootprint uses.
func TestEdgeConfigFile(t *testing.T) {
	cfg, err := config.Load(config.Options{File: "../../config.edge.yaml"})
	require.NoError(t, err)
	var want []string
	for _, kv := range append(append([]string(nil), edgeSets["common"]...), edgeSets["pebble"]...) {
		k, v, _ := strings.Cut(kv, "=")
		want = append(want, k)
		assert.Equal(t, v, fmt.Sprint(cfg.Get(k)), k)
	}
	want = append(want, "transports")
	assert.ElementsMatch(t, want, cfg.Keys())
}

// TestEdgeFootprint runs `mq dev` with the edge profile of engine
// QUIVER_EDGE_ENGINE (pebble or commitlog; QUIVER_EDGE_SETS adds
// comma-separated key=value overrides) under QUIVER_EDGE_RATE (default
// 5,000) async sends a second of 1 KiB for QUIVER_EDGE_SECONDS, with a
// consumer tailing the topic, and prints one EDGE line: the broker's peak
// RSS (VmHWM), sends slower than 100 ms, the slowest send, busy answers,
// and the largest consumer lag.
func TestEdgeFootprint(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("QUIVER_EDGE_SECONDS"))
	if secs <= 0 {
		t.Skip("set QUIVER_EDGE_SECONDS (and QUIVER_EDGE_ENGINE=pebble|commitlog)")
	}
	engine := envOr("QUIVER_EDGE_ENGINE", "pebble")
	rate, _ := strconv.Atoi(envOr("QUIVER_EDGE_RATE", "5000"))
	sets := append(append([]string{"log.level=warn"}, edgeSets["common"]...), edgeSets[engine]...)
	if s := os.Getenv("QUIVER_EDGE_SETS"); s != "" {
		sets = append(sets, strings.Split(s, ",")...)
	}
	if os.Getenv("QUIVER_EDGE_DEFAULTS") != "" {
		sets = []string{"log.level=warn", "storage.engine=" + engine}
	}
	var env []string
	if e := os.Getenv("QUIVER_EDGE_ENV"); e != "" {
		env = strings.Split(e, ",")
	}
	srv := testserver.StartDev(t, testserver.Options{Sets: sets, Env: env})
	c, err := client.New(client.WithNameServers(srv.Namesrv), transports.WithDialer(), client.WithRequestTimeout(10*time.Second))
	require.NoError(t, err)
	defer c.Close()
	p, err := producer.New(c, "EDGE_P", producer.WithSendTimeout(10*time.Second), producer.WithRetryTimesWhenSendAsyncFailed(0))
	require.NoError(t, err)
	defer p.Shutdown(context.Background())
	topic := "EdgeBench"
	body := make([]byte, 1024)
	_, err = p.SendSync(context.Background(), client.NewMessage(topic, body))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumed atomic.Int64
	pc, err := consumer.NewPull(c, "EDGE_C")
	require.NoError(t, err)
	// The first send auto-created the topic; its registration with the
	// name server may land just after the send's answer.
	var qs []client.MessageQueue
	require.Eventually(t, func() bool {
		qs, err = pc.Queues(ctx, topic)
		return err == nil && len(qs) > 0
	}, 10*time.Second, 20*time.Millisecond, "route of %s: %v", topic, err)
	var cwg sync.WaitGroup
	for _, mq := range qs {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			var off int64
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				res, err := pc.PullEach(pctx, mq, consumer.All(), off, 32, func(*client.MessageExt) { consumed.Add(1) })
				pcancel()
				if err != nil {
					continue
				}
				off = res.NextBeginOffset
			}
		}()
	}

	var acked, busy, failed, slow, inflight atomic.Int64
	var maxLat atomic.Int64
	var maxLag, maxInflight int64
	var hwm int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(time.Duration(secs) * time.Second)
	const tick = 2 * time.Millisecond
	tk := time.NewTicker(tick)
	lastSample := start
	sent := 0
	for now := range tk.C {
		if now.After(deadline) {
			break
		}
		// Catch up to the schedule: rate × elapsed.
		want := int(float64(rate) * now.Sub(start).Seconds())
		for ; sent < want; sent++ {
			t0 := time.Now()
			inflight.Add(1)
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, _ *client.SendResult, err error) {
				defer wg.Done()
				inflight.Add(-1)
				d := time.Since(t0)
				for {
					m := maxLat.Load()
					if int64(d) <= m || maxLat.CompareAndSwap(m, int64(d)) {
						break
					}
				}
				if d > 100*time.Millisecond {
					slow.Add(1)
				}
				switch {
				case err == nil:
					acked.Add(1)
				case isBusy(err):
					busy.Add(1)
				default:
					failed.Add(1)
				}
			}, client.NewMessage(topic, body))
			if err != nil {
				inflight.Add(-1)
				wg.Done()
				failed.Add(1)
			}
		}
		if now.Sub(lastSample) >= 250*time.Millisecond {
			lastSample = now
			maxLag = max(maxLag, acked.Load()-consumed.Load())
			maxInflight = max(maxInflight, inflight.Load())
			hwm = max(hwm, vmHWM(srv.PID()))
		}
	}
	tk.Stop()
	wg.Wait()
	// Let the consumer catch up (bounded), then stop it.
	for i := 0; i < 100 && consumed.Load() < acked.Load(); i++ {
		time.Sleep(50 * time.Millisecond) // polling the consumer's progress
	}
	cancel()
	cwg.Wait()
	hwm = max(hwm, vmHWM(srv.PID()))
	el := time.Since(start)
	fmt.Printf("EDGE engine=%s env=%q sets=%q rate=%d secs=%d acked=%d acked_per_sec=%.0f busy=%d failed=%d sends_over_100ms=%d max_send=%v max_inflight=%d max_lag=%d final_lag=%d vm_hwm_mib=%.1f\n",
		engine, strings.Join(env, ","), strings.Join(sets[1:], ","), rate, secs, acked.Load(), float64(acked.Load())/el.Seconds(), busy.Load(), failed.Load(), slow.Load(),
		time.Duration(maxLat.Load()).Round(time.Millisecond), maxInflight, maxLag, acked.Load()-consumed.Load(), float64(hwm)/(1<<20))
	if logs := srv.Logs(); strings.Contains(logs, "stall") {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "stall") {
				fmt.Println("EDGE log:", l)
			}
		}
	}
}

func isBusy(err error) bool {
	var ce interface{ ResponseCode() int }
	if errors.As(err, &ce) {
		return ce.ResponseCode() == 2 // SYSTEM_BUSY
	}
	return strings.Contains(err.Error(), "busy")
}

// vmHWM is process pid's peak resident set size in bytes (0 if unknown).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
