package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/quivermq/quiver/internal/testserver"
)

// fastLevels makes delay levels short so retries and delays are testable.
const fastLevels = "schedule.delay_levels=300ms 600ms 900ms 1200ms 1500ms 1800ms 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"

// configAccepts reports whether mq dev accepts the --set keys (a module
// owning them is composed).
func configAccepts(t *testing.T, sets ...string) bool {
	args := []string{"dev", "--check-config"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(testserver.Binary(t), args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("mq dev --check-config %v: %v: %s", sets, err, out)
	}
	return err == nil
}

// TestClusteringSplitsQueues runs two consumers of one group on a
// four-queue topic: each holds two queues, and together they get every
// message exactly once.
func TestClusteringSplitsQueues(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic, group := uniq("Split"), uniq("CG")
		e.createTopic(t, topic, 4)
		c1, c2 := newCollector(), newCollector()
		pc1 := e.push(t, topic, pushOpts{group: group}, c1.handle)
		pc2 := e.push(t, topic, pushOpts{group: group}, c2.handle)
		held := func(pc *consumer.PushConsumer) []client.MessageQueue {
			var out []client.MessageQueue
			for _, q := range pc.Queues() {
				if q.Topic == topic {
					out = append(out, q)
				}
			}
			return out
		}
		waitFor(t, 30*time.Second, func() bool { return len(held(pc1)) == 2 && len(held(pc2)) == 2 }, "a 2+2 split (have %v / %v)", held(pc1), held(pc2))
		assert.NotEqual(t, held(pc1), held(pc2))
		p := e.producer(t)
		for i := 0; i < 40; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("m-%d", i)))
		}
		waitFor(t, 30*time.Second, func() bool { return c1.count()+c2.count() >= 40 }, "40 messages")
		assert.NotZero(t, c1.count())
		assert.NotZero(t, c2.count())
		for _, b := range c1.bodies() {
			assert.Nil(t, c2.get(b), "%s consumed by both", b)
		}
		q1 := map[int]bool{}
		for _, b := range c1.bodies() {
			q1[c1.get(b).Queue.QueueID] = true
		}
		for _, b := range c2.bodies() {
			assert.False(t, q1[c2.get(b).Queue.QueueID], "queue %d served to both", c2.get(b).Queue.QueueID)
		}
	})
}

// TestBroadcasting gives two broadcasting consumers of one group every
// message, and keeps their offsets in local files.
func TestBroadcasting(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic, group := uniq("Bcast"), uniq("CG")
		e.createTopic(t, topic, 4)
		d1, d2 := t.TempDir(), t.TempDir()
		c1, c2 := newCollector(), newCollector()
		pc1 := e.push(t, topic, pushOpts{group: group, opts: []consumer.Option{consumer.WithModel(consumer.Broadcasting), consumer.WithOffsetDir(d1), consumer.WithPersistInterval(200 * time.Millisecond)}}, c1.handle)
		e.push(t, topic, pushOpts{group: group, opts: []consumer.Option{consumer.WithModel(consumer.Broadcasting), consumer.WithOffsetDir(d2)}}, c2.handle)
		p := e.producer(t)
		for i := 0; i < 20; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("b-%d", i)))
		}
		c1.wait(t, 20, 30*time.Second)
		c2.wait(t, 20, 30*time.Second)
		assert.Equal(t, c1.bodies(), c2.bodies())
		require.NoError(t, pc1.Shutdown(context.Background()))
		b, err := os.ReadFile(filepath.Join(d1, "offsets.json"))
		require.NoError(t, err)
		var total int64
		for _, q := range []string{"0", "1", "2", "3"} {
			i := strings.Index(string(b), `\"queueId\":`+q)
			require.GreaterOrEqual(t, i, 0, "queue %s in %s", q, b)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if _, v, ok := strings.Cut(line, "}\": "); ok {
				n, _ := strconv.ParseInt(strings.TrimRight(strings.TrimSpace(v), ","), 10, 64)
				total += n
			}
		}
		assert.Equal(t, int64(20), total, "offsets file:\n%s", b)
	})
}

// TestTagAndSQLSubscriptions filters by tag expression and by SQL92.
func TestTagAndSQLSubscriptions(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic := uniq("Filter")
	e.createTopic(t, topic, 2)
	tags, sql, all := newCollector(), newCollector(), newCollector()
	e.push(t, topic, pushOpts{group: uniq("CGtag"), sel: consumer.Tags("TagA || TagB")}, tags.handle)
	e.push(t, topic, pushOpts{group: uniq("CGall")}, all.handle)
	sqlOK := hasPlugin(t, "filter", "sql92")
	if sqlOK {
		e.push(t, topic, pushOpts{group: uniq("CGsql"), sel: consumer.SQL("color = 'red' AND n > 5")}, sql.handle)
	}
	p := e.producer(t)
	var wantTags, wantSQL []string
	for i := 0; i < 30; i++ {
		tag := []string{"TagA", "TagB", "TagC"}[i%3]
		color := []string{"red", "blue"}[i%2]
		body := fmt.Sprintf("f-%02d-%s-%s", i, tag, color)
		sendSync(t, p, msg(topic, body).SetTag(tag).SetProperty("color", color).SetProperty("n", strconv.Itoa(i)))
		if tag != "TagC" {
			wantTags = append(wantTags, body)
		}
		if color == "red" && i > 5 {
			wantSQL = append(wantSQL, body)
		}
	}
	all.wait(t, 30, 30*time.Second)
	tags.wait(t, len(wantTags), 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, wantTags, tags.bodies())
	if !sqlOK {
		t.Skipf("SQL92 part skipped: the sql92 filter is not composed into mq (mq plugins: %q)", mqPlugins(t))
	}
	sql.wait(t, len(wantSQL), 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, wantSQL, sql.bodies())
}

// TestRetryLater returns RetryLater on the first delivery; the message
// comes back through %RETRY%<group> with its original topic and
// ReconsumeTimes 1.
func TestRetryLater(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s, fastLevels)
		topic, group := uniq("Retry"), uniq("CG")
		e.createTopic(t, topic, 2)
		var mu sync.Mutex
		seen := map[string][]int32{}
		var topics sync.Map
		h := func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
			mu.Lock()
			defer mu.Unlock()
			m := msgs[0]
			seen[string(m.Body)] = append(seen[string(m.Body)], m.ReconsumeTimes)
			topics.Store(m.Topic, true)
			if len(seen[string(m.Body)]) == 1 {
				return consumer.ConsumeRetryLater
			}
			return consumer.ConsumeSuccess
		}
		e.push(t, topic, pushOpts{group: group}, h)
		p := e.producer(t)
		for i := 0; i < 5; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("r-%d", i)))
		}
		waitFor(t, 40*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, v := range seen {
				if len(v) >= 2 {
					n++
				}
			}
			return n == 5
		}, "5 redeliveries")
		mu.Lock()
		for b, v := range seen {
			assert.Equal(t, []int32{0, 1}, v[:2], b)
		}
		mu.Unlock()
		topics.Range(func(k, _ any) bool { assert.Equal(t, topic, k); return true })
	})
}

// TestDelayedDelivery sends with a delay level and with a delivery time
// and checks neither arrives early.
func TestDelayedDelivery(t *testing.T) {
	if !configAccepts(t, fastLevels) {
		t.Skip("no scheduler composed into mq dev (schedule.* keys are refused): delayed delivery cannot be tested")
	}
	e := startEnv(t, tcpScheme, fastLevels)
	topic := uniq("Delay")
	e.createTopic(t, topic, 2)
	var mu sync.Mutex
	got := map[string]time.Time{}
	e.push(t, topic, pushOpts{group: uniq("CG")}, func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
		mu.Lock()
		got[string(msgs[0].Body)] = time.Now()
		mu.Unlock()
		return consumer.ConsumeSuccess
	})
	p := e.producer(t)
	time.Sleep(500 * time.Millisecond)
	sent := time.Now()
	sendSync(t, p, msg(topic, "level-5").SetDelayLevel(5)) // 1500ms
	sendSync(t, p, msg(topic, "at-2s").SetDeliverTime(sent.Add(2*time.Second)))
	sendSync(t, p, msg(topic, "now"))
	waitFor(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 }, "3 messages")
	mu.Lock()
	defer mu.Unlock()
	if got["level-5"].Sub(sent) < time.Second && got["at-2s"].Sub(sent) < time.Second {
		t.Skip("delayed messages arrived at once: the scheduler is not enabled in this mq build")
	}
	assert.GreaterOrEqual(t, got["level-5"].Sub(sent), 1400*time.Millisecond)
	assert.GreaterOrEqual(t, got["at-2s"].Sub(sent), 1900*time.Millisecond)
	assert.Less(t, got["now"].Sub(sent), time.Second)
}

// TestOrderly sends three keys with a sharding key and consumes orderly:
// per key the order holds, even with a local retry in the middle.
func TestOrderly(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic := uniq("Order")
		e.createTopic(t, topic, 4)
		var mu sync.Mutex
		order := map[string][]int{}
		queues := map[string]map[int]bool{}
		var failed atomic.Bool
		h := func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				k, n, _ := strings.Cut(string(m.Body), ":")
				i, _ := strconv.Atoi(n)
				if i == 7 && !failed.Load() {
					failed.Store(true)
					return consumer.ConsumeRetryLater
				}
				order[k] = append(order[k], i)
				if queues[k] == nil {
					queues[k] = map[int]bool{}
				}
				queues[k][m.Queue.QueueID] = true
			}
			return consumer.ConsumeSuccess
		}
		e.push(t, topic, pushOpts{group: uniq("CG"), opts: []consumer.Option{consumer.WithOrderly(), consumer.WithSuspendCurrentQueueTime(100 * time.Millisecond)}}, h)
		p := e.producer(t)
		keys := []string{"alpha", "beta", "gamma"}
		for i := 0; i < 20; i++ {
			for _, k := range keys {
				sendSync(t, p, msg(topic, fmt.Sprintf("%s:%d", k, i)).SetShardingKey(k))
			}
		}
		waitFor(t, 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				if len(order[k]) < 20 {
					return false
				}
			}
			return true
		}, "60 ordered messages")
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			want := make([]int, 20)
			for i := range want {
				want[i] = i
			}
			assert.Equal(t, want, order[k][:20], k)
			assert.Len(t, queues[k], 1, "key %s spread over queues", k)
		}
		assert.True(t, failed.Load())
	})
}

// TestOffsetSurvivesRestart consumes, shuts the consumer down, sends more,
// and checks a new consumer of the group continues where the first left.
func TestOffsetSurvivesRestart(t *testing.T) {
	forSchemes(t, func(t *testing.T, s scheme) {
		e := startEnv(t, s)
		topic, group := uniq("Restart"), uniq("CG")
		e.createTopic(t, topic, 2)
		p := e.producer(t)
		for i := 0; i < 10; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("first-%d", i)))
		}
		c1 := newCollector()
		pc1 := e.push(t, topic, pushOpts{group: group}, c1.handle)
		c1.wait(t, 10, 30*time.Second)
		require.NoError(t, pc1.Shutdown(context.Background()))
		for i := 0; i < 10; i++ {
			sendSync(t, p, msg(topic, fmt.Sprintf("second-%d", i)))
		}
		c2 := newCollector()
		e.push(t, topic, pushOpts{group: group}, c2.handle)
		c2.wait(t, 10, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		for _, b := range c2.bodies() {
			assert.True(t, strings.HasPrefix(b, "second-"), "redelivered %s", b)
		}
		assert.Equal(t, 10, c2.count())
	})
}

// TestFlowControl floods a topic while a slow consumer with small
// thresholds drains it: the per-queue cache (messages, then bytes) stays
// within one pull batch of the threshold, and every message is consumed.
func TestFlowControl(t *testing.T) {
	tests := []struct {
		name string
		opt  consumer.Option
		cap  func(consumer.QueueStats) int64
		min  int64 // the threshold: reached, so pulling had to pause
		max  int64
	}{
		{"messages", consumer.WithPullThresholdForQueue(20), func(s consumer.QueueStats) int64 { return int64(s.Cached) }, 20, 20 + 8},
		{"bytes", consumer.WithPullThresholdSizeForQueue(20 << 10), func(s consumer.QueueStats) int64 { return s.Bytes }, 20 << 10, 20<<10 + 8*1040},
	}
	e := startEnv(t, tcpScheme)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := uniq("Flow")
			e.createTopic(t, topic, 1)
			col := newCollector()
			slow := func(ctx context.Context, msgs []*client.MessageExt) consumer.Result {
				time.Sleep(5 * time.Millisecond)
				return col.handle(ctx, msgs)
			}
			pc := e.push(t, topic, pushOpts{group: uniq("CG"), opts: []consumer.Option{
				tt.opt, consumer.WithPullBatchSize(8), consumer.WithConsumeGoroutines(1)}}, slow)
			p := e.producer(t)
			const n = 400
			body := make([]byte, 1024)
			errs := make(chan error, 1)
			go func() {
				defer close(errs)
				for i := 0; i < n; i += 20 {
					var batch []*client.Message
					for j := i; j < i+20; j++ {
						m := client.NewMessage(topic, append([]byte(fmt.Sprintf("fc-%03d-", j)), body...))
						batch = append(batch, m)
					}
					if _, err := p.SendSync(context.Background(), batch...); err != nil {
						errs <- err
						return
					}
				}
			}()
			// The cache is sampled every millisecond (a coarser look can
			// miss the moment it is full).
			var peakV atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					for _, st := range pc.Stats() {
						if v := tt.cap(st); v > peakV.Load() {
							peakV.Store(v)
						}
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			waitFor(t, 60*time.Second, func() bool { return col.count() >= n }, "%d messages", n)
			close(stop)
			<-sampled
			peak := peakV.Load()
			require.NoError(t, <-errs)
			assert.LessOrEqual(t, peak, tt.max, "cache exceeded threshold + one pull batch")
			assert.GreaterOrEqual(t, peak, tt.min, "the consumer never fell behind: flow control untested")
			t.Logf("peak cache %d (limit %d)", peak, tt.max)
		})
	}
}

// TestOrderlyTwoConsumers moves queues (and their broker locks) from one
// orderly consumer to a second one mid-stream; every key is still first
// delivered in order.
func TestOrderlyTwoConsumers(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic, group := uniq("Order2"), uniq("CG")
	e.createTopic(t, topic, 4)
	var mu sync.Mutex
	order := map[string][]int{}
	h := func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			k, n, _ := strings.Cut(string(m.Body), ":")
			i, _ := strconv.Atoi(n)
			order[k] = append(order[k], i)
		}
		return consumer.ConsumeSuccess
	}
	opts := []consumer.Option{consumer.WithOrderly(), consumer.WithPersistInterval(200 * time.Millisecond)}
	pc1 := e.push(t, topic, pushOpts{group: group, opts: opts}, h)
	p := e.producer(t)
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	const n = 40
	send := func(from, to int) {
		for i := from; i < to; i++ {
			for _, k := range keys {
				sendSync(t, p, msg(topic, fmt.Sprintf("%s:%d", k, i)).SetShardingKey(k))
			}
		}
	}
	send(0, n/2)
	pc2 := e.push(t, topic, pushOpts{group: group, opts: opts}, h)
	send(n/2, n)
	waitFor(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if len(firstSeen(order[k])) < n {
				return false
			}
		}
		return true
	}, "%d ordered messages per key", n)
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		got := firstSeen(order[k])
		for i := range got {
			require.Equal(t, i, got[i], "key %s first deliveries out of order: %v", k, order[k])
		}
	}
	held := func(pc *consumer.PushConsumer) int {
		c := 0
		for _, q := range pc.Queues() {
			if q.Topic == topic {
				c++
			}
		}
		return c
	}
	assert.Equal(t, 2, held(pc1))
	assert.Equal(t, 2, held(pc2))
}

func firstSeen(xs []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// TestBrokerRestart restarts mq dev under a running producer and
// consumer: both reconnect, and the consumer continues from its
// committed offsets.
func TestBrokerRestart(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic, group := uniq("Restart"), uniq("CG")
	e.createTopic(t, topic, 2)
	p := e.producer(t)
	col := newCollector()
	e.push(t, topic, pushOpts{group: group, opts: []consumer.Option{consumer.WithPersistInterval(100 * time.Millisecond), consumer.WithPullDelayOnError(200 * time.Millisecond)}}, col.handle)
	for i := 0; i < 10; i++ {
		sendSync(t, p, msg(topic, fmt.Sprintf("before-%d", i)))
	}
	col.wait(t, 10, 30*time.Second)
	time.Sleep(500 * time.Millisecond) // let offsets reach the broker
	e.srv.Restart()
	waitFor(t, 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := p.SendSync(ctx, msg(topic, "after-0"))
		return err == nil
	}, "a send after the restart")
	for i := 1; i < 10; i++ {
		sendSync(t, p, msg(topic, fmt.Sprintf("after-%d", i)))
	}
	col.wait(t, 20, 60*time.Second)
	col.mu.Lock()
	defer col.mu.Unlock()
	dup := 0
	for _, b := range col.order {
		if strings.HasPrefix(b, "before-") {
			dup++
		}
	}
	assert.Equal(t, 10, dup, "messages consumed before the restart were redelivered")
}

// TestDeadLetter: a message that keeps failing ends in %DLQ%<group> once
// the retry budget is spent, for concurrent (broker send-back) and orderly
// (local retries, then send-back with delay level -1) consumers.
func TestDeadLetter(t *testing.T) {
	e := startEnv(t, tcpScheme, fastLevels)
	tests := []struct {
		name string
		opts []consumer.Option
		want int // deliveries
	}{
		{"concurrent", []consumer.Option{consumer.WithMaxReconsumeTimes(1)}, 2},
		{"orderly", []consumer.Option{consumer.WithOrderly(), consumer.WithMaxReconsumeTimes(2), consumer.WithSuspendCurrentQueueTime(50 * time.Millisecond)}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic, group := uniq("DLQ"), uniq("CG")
			e.createTopic(t, topic, 1)
			var n atomic.Int64
			e.push(t, topic, pushOpts{group: group, opts: tt.opts}, func(context.Context, []*client.MessageExt) consumer.Result {
				n.Add(1)
				return consumer.ConsumeRetryLater
			})
			p := e.producer(t)
			sendSync(t, p, msg(topic, "doomed").SetProperty("why", "test"))
			pl, err := consumer.NewPull(e.client(t), uniq("DLQReader"))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, pl.Start(ctx))
			defer pl.Shutdown(context.Background())
			var dead []*client.MessageExt
			waitFor(t, 30*time.Second, func() bool {
				qs, err := pl.Queues(ctx, "%DLQ%"+group)
				if err != nil || len(qs) == 0 {
					return false
				}
				res, err := pl.Pull(context.Background(), qs[0], consumer.All(), 0, 32)
				if err != nil || res.Status != consumer.Found {
					return false
				}
				dead = res.Messages
				return true
			}, "the message in %%DLQ%%%s (deliveries %d)", group, n.Load())
			require.Len(t, dead, 1)
			assert.Equal(t, "doomed", string(dead[0].Body))
			assert.Equal(t, "test", dead[0].Property("why"))
			assert.EqualValues(t, tt.want, n.Load())
		})
	}
}
