package broker

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// slowStore wraps a real store and makes every append take at least delay:
// a slow disk, injected below the broker.
type slowStore struct {
	store.Store
	delay atomic.Int64
}

func (s *slowStore) Append(ctx context.Context, msgs []store.Message) ([]store.Position, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.Store.Append(ctx, msgs)
}

func (s *slowStore) LoadMeta(name string) ([]byte, error) {
	return s.Store.(store.Metadata).LoadMeta(name)
}
func (s *slowStore) SaveMeta(name string, b []byte) error {
	return s.Store.(store.Metadata).SaveMeta(name, b)
}

func startSlowBroker(t *testing.T, mod func(*Config)) (*harness, *slowStore) {
	t.Helper()
	dir := t.TempDir()
	st := &slowStore{Store: openStore(t, dir)}
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	cfg.ScanInterval = time.Hour
	if mod != nil {
		mod(cfg)
	}
	b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: map[string]filter.Compiler{}})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	h := &harness{t: t, b: b, st: st, dir: dir, addr: b.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(h.stop)
	return h, st
}

// TestSlowStoreShedsSends: with a store that takes far longer than
// busy_timeout per write, producers get SYSTEM_BUSY within about the
// timeout instead of queueing, the broker's memory stays bounded, and
// consumers keep draining what was stored.
func TestSlowStoreShedsSends(t *testing.T) {
	h, st := startSlowBroker(t, func(c *Config) {
		c.BusyTimeout = 100 * time.Millisecond
		c.StoreBusyTimeout = 300 * time.Millisecond
		c.SendQueueCapacity = 4
	})
	for i := 0; i < 20; i++ {
		require.Equal(t, remoting.Success, h.send("Flow", 0, "before", nil).Code)
	}
	st.delay.Store(int64(time.Second))

	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	const senders = 32
	var busy, ok, slowBusy atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := h.client.Invoke(ctx, h.addr, remoting.NewRequest(remoting.SendMessage, sendExt("Flow", 0, message.Properties{}), make([]byte, 1024)))
				cancel()
				if err != nil {
					continue
				}
				switch resp.Code {
				case remoting.SystemBusy:
					busy.Add(1)
					// "at once": within the busy timeout plus scheduling slack,
					// never after a store write.
					if time.Since(t0) > 900*time.Millisecond {
						slowBusy.Add(1)
					}
				case remoting.Success:
					ok.Add(1)
				}
			}
		}()
	}
	// Consumers keep draining while producers are shed.
	drained := 0
	for off := int64(0); time.Now().Before(deadline); {
		resp := h.invoke(remoting.PullMessage, pullExt("G", "Flow", 0, off, pullSubscription, 0), nil)
		if resp.Code == remoting.Success {
			msgs, err := message.DecodeAll(resp.Body)
			require.NoError(t, err)
			drained += len(msgs)
			off += int64(len(msgs))
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Wait()
	var ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	t.Logf("busy %d, stored %d, slow busy answers %d, drained %d, heap %d KiB → %d KiB", busy.Load(), ok.Load(), slowBusy.Load(), drained, ms0.HeapAlloc>>10, ms1.HeapAlloc>>10)
	assert.Positive(t, busy.Load(), "the broker answered busy")
	assert.Zero(t, slowBusy.Load(), "busy answers came at once")
	assert.GreaterOrEqual(t, drained, 20, "consumers kept draining")
	assert.Less(t, int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc), int64(64<<20), "memory stays bounded")
	fs := h.b.FlowStats()
	assert.Equal(t, busy.Load(), fs.BusyQueue+fs.BusyStore)
	assert.Positive(t, fs.BusyStore, "the store-latency guard ([PC_SYNCHRONIZED]) answered too")

	st.delay.Store(0)
	require.Eventually(t, func() bool { return h.send("Flow", 0, "after", nil).Code == remoting.Success }, 10*time.Second, 50*time.Millisecond)
}

func TestQuotaPerTopicAndGroup(t *testing.T) {
	h, _ := startSlowBroker(t, func(c *Config) {
		c.Quota = QuotaConfig{
			Topics: map[string]QuotaLimit{"Limited": {MessagesPerSec: 5}},
			Groups: map[string]QuotaLimit{"PG": {BytesPerSec: 1 << 20}},
		}
	})
	codes := map[int32]int{}
	var refusal string
	start := time.Now()
	for i := 0; i < 20; i++ {
		resp := h.send("Limited", 0, "x", nil)
		codes[resp.Code]++
		if resp.Code == remoting.SystemBusy {
			refusal = resp.Remark
		}
	}
	// The bucket refills at 5 msg/s while the sends go on: one more
	// success per 200 ms they take (under -race on a busy machine, 20
	// sends took over 200 ms and the bucket let a sixth through).
	refilled := int(time.Since(start).Seconds() * 5)
	assert.GreaterOrEqual(t, codes[remoting.Success], 5, "a burst of one second's worth")
	assert.LessOrEqual(t, codes[remoting.Success], 5+refilled, "a burst of one second's worth, and what refilled in %v", time.Since(start))
	assert.Equal(t, 20, codes[remoting.Success]+codes[remoting.SystemBusy])
	assert.Contains(t, refusal, "topic Limited over its quota of 5 msg/s")
	// Other topics are not limited by the topic quota; the group quota
	// counts bytes.
	assert.Equal(t, remoting.Success, h.send("Free", 0, "x", nil).Code)
	big := h.invoke(remoting.SendMessage, sendExt("Free", 0, message.Properties{}), make([]byte, 2<<20))
	assert.Equal(t, remoting.SystemBusy, big.Code, big.Remark)
	assert.Contains(t, big.Remark, "producer group PG")
}

func TestBucketRefills(t *testing.T) {
	now := time.Unix(1000, 0)
	k := &bucket{limit: QuotaLimit{MessagesPerSec: 10}, msgs: 10, last: now}
	for i := 0; i < 10; i++ {
		require.True(t, k.take(now, 1, 0))
	}
	assert.False(t, k.take(now, 1, 0))
	assert.True(t, k.take(now.Add(200*time.Millisecond), 2, 0), "refills at the rate")
	assert.False(t, k.take(now.Add(200*time.Millisecond), 1, 0))
	assert.True(t, k.take(now.Add(10*time.Second), 10, 0), "caps at one second's burst")
	assert.False(t, k.take(now.Add(10*time.Second), 1, 0))
}

// TestStoreGuardWatchesStoreWrites: the store-latency guard answers
// [PC_SYNCHRONIZED] only while a store write is under way and none has
// finished for store_busy_timeout (Java's isOSPageCacheBusy); sends that
// are admitted but not yet writing (starved of CPU, parsing, waiting for
// a replica) do not trip it.
func TestStoreGuardWatchesStoreWrites(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newSendGate(8, 200*time.Millisecond, time.Second, nil)
	g.now = func() time.Time { return now }
	req := remoting.NewRequest(remoting.SendMessage, nil, nil)
	enter := func() *remoting.Command {
		busy := g.enter(context.Background(), req, "T", "G", 1, 1)
		if busy == nil {
			t.Cleanup(g.leave)
		}
		return busy
	}
	require.Nil(t, enter(), "an admitted send, not yet writing")
	now = now.Add(5 * time.Second)
	assert.Nil(t, enter(), "no store write under way: not busy, however long since the last one")

	g.storeWrite()
	now = now.Add(900 * time.Millisecond)
	assert.Nil(t, enter(), "a write under way for less than store_busy_timeout")
	now = now.Add(200 * time.Millisecond)
	busy := enter()
	require.NotNil(t, busy, "a write stuck for 1.1 s")
	assert.Equal(t, int32(remoting.SystemBusy), busy.Code)
	assert.Equal(t, busyStoreRemark, busy.Remark)

	g.storeWrite() // a second write joins the stuck one
	g.storeWritten()
	assert.Nil(t, enter(), "a write finished just now")
	g.storeWritten()
	assert.Equal(t, int64(0), g.writing.Load())
	assert.Equal(t, int64(1), g.busyStore.Load())
}
