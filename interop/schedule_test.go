package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// arrivals records when each body was delivered, and how often.
type arrivals struct {
	mu    sync.Mutex
	at    map[string][]time.Time
	msgs  map[string][]*primitive.MessageExt
	retry func(m *primitive.MessageExt) bool // return true to ask for a retry
}

func newArrivals() *arrivals {
	return &arrivals{at: map[string][]time.Time{}, msgs: map[string][]*primitive.MessageExt{}}
}

func (a *arrivals) handle(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	now := time.Now()
	res := consumer.ConsumeSuccess
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range msgs {
		b := string(m.Body)
		a.at[b] = append(a.at[b], now)
		a.msgs[b] = append(a.msgs[b], m)
		if a.retry != nil && a.retry(m) {
			res = consumer.ConsumeRetryLater
		}
	}
	return res, nil
}

func (a *arrivals) times(body string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at[body]...)
}

func (a *arrivals) deliveries(body string) []*primitive.MessageExt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*primitive.MessageExt(nil), a.msgs[body]...)
}

// waitN polls until body arrived n times.
func (a *arrivals) waitN(t *testing.T, body string, n int, timeout time.Duration) []time.Time {
	t.Helper()
	require.Eventually(t, func() bool { return len(a.times(body)) >= n }, timeout, 10*time.Millisecond, "%q arrived %d of %d times", body, len(a.times(body)), n)
	return a.times(body)
}

// readyConsumer creates topic with a warm-up message, starts a consumer of
// group on it and waits until the warm-up arrived, so later deliveries are
// timed from an idle, long-polling consumer.
func readyConsumer(t *testing.T, ns string, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, group string, a *arrivals, extra ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	warm := "warmup-" + group
	res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(warm)))
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)
	waitRoute(t, ns, topic)
	c := newPushConsumer(t, ns, topic, consumerOpts{group: group, extra: extra}, a.handle)
	a.waitN(t, warm, 1, 40*time.Second)
	return c
}

// waitRoute polls the name server until it routes topic (brokers register
// new topics asynchronously; a consumer started before fails).
func waitRoute(t *testing.T, ns, topic string) {
	t.Helper()
	c := rawClient(t)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		return err == nil && resp.Code == remoting.Success
	}, 20*time.Second, 20*time.Millisecond, "no route for %s", topic)
}

// mqAdmin runs `mq admin ...` against srv and returns its output.
func mqAdmin(t *testing.T, srv *testserver.Proc, args ...string) string {
	t.Helper()
	cmd := exec.Command(testserver.Binary(t), append([]string{"admin", "--namesrv", srv.Namesrv}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "mq admin %v:\n%s", args, out)
	return string(out)
}

func testDelayLevel2(t *testing.T, sets []string, want time.Duration) {
	srv := testserver.StartDev(t, testserver.Options{Sets: sets})
	topic := uniq("Delay")
	p := newProducer(t, srv.Namesrv)
	a := newArrivals()
	readyConsumer(t, srv.Namesrv, p, topic, uniq("CG"), a)

	sent := time.Now()
	sendSync(t, p, primitive.NewMessage(topic, []byte("delayed")).WithDelayTimeLevel(2))
	got := a.waitN(t, "delayed", 1, want+10*time.Second)
	late := got[0].Sub(sent)
	t.Logf("level 2 (%s) arrived after %s", want, late)
	assert.GreaterOrEqual(t, late, want, "arrived early")
	assert.Less(t, late, want+time.Second, "arrived more than 1s late")
	m := a.deliveries("delayed")[0]
	assert.Equal(t, topic, m.Topic)
	// Java's ScheduleMessageService.messageTimeUp keeps the held
	// properties: the official client's getDelayTimeLevel() is the level.
	assert.Equal(t, "2", m.GetProperty("DELAY"))
	assert.Equal(t, topic, m.GetProperty("REAL_TOPIC"))
	assert.Equal(t, strconv.Itoa(m.Queue.QueueId), m.GetProperty("REAL_QID"))
}

// TestDelayLevelShort: with delay_levels "1s 2s 3s", level 2 arrives
// 2s after sending, within 1s.
func TestDelayLevelShort(t *testing.T) {
	testDelayLevel2(t, []string{"schedule.delay_levels=1s 2s 3s"}, 2*time.Second)
}

// TestDelayLevelDefault: RocketMQ's table, level 2 = 5s.
func TestDelayLevelDefault(t *testing.T) {
	testDelayLevel2(t, nil, 5*time.Second)
}

// TestTimerMessage: TIMER_DELIVER_MS (the client's WithDelayTimestamp),
// __STARTDELIVERTIME and TIMER_DELAY_MS arrive at their time.
func TestTimerMessage(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Timer")
	p := newProducer(t, srv.Namesrv)
	a := newArrivals()
	readyConsumer(t, srv.Namesrv, p, topic, uniq("CG"), a)

	at := time.Now().Add(2500 * time.Millisecond)
	sendSync(t, p, primitive.NewMessage(topic, []byte("deliver-ms")).WithDelayTimestamp(at))
	m := primitive.NewMessage(topic, []byte("start-deliver"))
	m.WithProperty("__STARTDELIVERTIME", strconv.FormatInt(at.Add(500*time.Millisecond).UnixMilli(), 10))
	sendSync(t, p, m)
	m = primitive.NewMessage(topic, []byte("delay-ms"))
	m.WithProperty("TIMER_DELAY_MS", "1500")
	sent := time.Now()
	sendSync(t, p, m)

	for body, due := range map[string]time.Time{"deliver-ms": at, "start-deliver": at.Add(500 * time.Millisecond), "delay-ms": sent.Add(1500 * time.Millisecond)} {
		got := a.waitN(t, body, 1, 15*time.Second)
		// Millisecond precision: the broker's store time of the delivered
		// copy is not before the due time; arrival follows within ~100ms.
		late := got[0].Sub(due)
		t.Logf("%s: %s late", body, late)
		assert.GreaterOrEqual(t, got[0].Add(5*time.Millisecond), due, body)
		assert.Less(t, late, time.Second, body)
	}

	// Beyond schedule.max_delay is refused.
	far := primitive.NewMessage(topic, []byte("far"))
	far.WithProperty("TIMER_DELAY_MS", strconv.FormatInt((41*24*time.Hour).Milliseconds(), 10))
	_, err := p.SendSync(context.Background(), far)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_delay")
	assert.Contains(t, err.Error(), "CODE: 13")
}

// TestRetryLaterBackoff: a consumer asking for a retry gets the message
// again after the back-off (levels 3+ are 1s here), with ReconsumeTimes
// counted and the original topic restored.
func TestRetryLaterBackoff(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"schedule.delay_levels=1s 1s 1s 1s 1s 1s 1s"}})
	topic := uniq("Retry")
	p := newProducer(t, srv.Namesrv)
	a := newArrivals()
	a.retry = func(m *primitive.MessageExt) bool { return string(m.Body) == "flaky" && m.ReconsumeTimes < 2 }
	readyConsumer(t, srv.Namesrv, p, topic, uniq("CG"), a)

	sendSync(t, p, primitive.NewMessage(topic, []byte("flaky")).WithTag("T1"))
	got := a.waitN(t, "flaky", 3, 60*time.Second)
	for i := 1; i < 3; i++ {
		gap := got[i].Sub(got[i-1])
		t.Logf("retry %d after %s", i, gap)
		assert.GreaterOrEqual(t, gap, 900*time.Millisecond, "retry %d came before the back-off", i)
	}
	ds := a.deliveries("flaky")
	for i, m := range ds[:3] {
		assert.Equal(t, int32(i), m.ReconsumeTimes, "delivery %d", i)
		assert.Equal(t, topic, m.Topic, "delivery %d: topic restored from RETRY_TOPIC", i)
		assert.Equal(t, "T1", m.GetTags())
	}
	time.Sleep(2 * time.Second)
	assert.Len(t, a.times("flaky"), 3, "no delivery after success")
}

// TestDLQAndResend: with max reconsume times 2 the message ends in
// %DLQ%<group>; `mq admin dlq list` shows it, clients may not send to the
// DLQ, and `mq admin dlq resend` brings it back to that group only.
func TestDLQAndResend(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"schedule.delay_levels=1s 1s 1s 1s 1s 1s 1s"}})
	topic := uniq("DLQ")
	p := newProducer(t, srv.Namesrv)
	var accept atomic.Bool
	g1, g2 := uniq("CG1"), uniq("CG2")
	a1, a2 := newArrivals(), newArrivals()
	a1.retry = func(m *primitive.MessageExt) bool { return string(m.Body) == "poison" && !accept.Load() }
	readyConsumer(t, srv.Namesrv, p, topic, g1, a1, consumer.WithMaxReconsumeTimes(2))
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: g2}, a2.handle)
	a2.waitN(t, "warmup-"+g1, 1, 40*time.Second)

	res := sendSync(t, p, primitive.NewMessage(topic, []byte("poison")))
	a2.waitN(t, "poison", 1, 20*time.Second)
	a1.waitN(t, "poison", 3, 60*time.Second) // first try + 2 retries (the first waits for the client to route %RETRY%)
	var out string
	require.Eventually(t, func() bool {
		out = mqAdmin(t, srv, "dlq", "list", "--group", g1)
		return strings.Contains(out, res.MsgID)
	}, 20*time.Second, 500*time.Millisecond, "dlq list:\n%s", out)
	t.Logf("dlq list:\n%s", out)
	assert.Contains(t, out, "1 dead letter(s)")
	assert.Len(t, a1.times("poison"), 3, "no delivery after the DLQ")

	// Clients cannot send to a DLQ.
	_, err := p.SendSync(context.Background(), primitive.NewMessage("%DLQ%"+g1, []byte("x")))
	require.Error(t, err)

	accept.Store(true)
	out = mqAdmin(t, srv, "dlq", "resend", "--group", g1, "--msg-id", res.MsgID)
	t.Logf("dlq resend:\n%s", out)
	assert.Contains(t, out, "1 dead letter(s) resent")
	got := a1.waitN(t, "poison", 4, 30*time.Second)
	_ = got
	back := a1.deliveries("poison")[3]
	assert.Equal(t, topic, back.Topic)
	assert.Equal(t, int32(0), back.ReconsumeTimes, "reconsume count reset")
	time.Sleep(3 * time.Second)
	assert.Len(t, a2.times("poison"), 1, "the other group does not get it again")
	assert.Len(t, a1.times("poison"), 4)
}

// TestOffsetResetByTime rewinds a group to a time with its consumer online
// (the broker tells it with RESET_CONSUMER_CLIENT_OFFSET) and offline.
func TestOffsetResetByTime(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{})
	topic := uniq("Rewind")
	group := uniq("CG")
	p := newProducer(t, srv.Namesrv)
	for i := 0; i < 8; i++ {
		sendSync(t, p, primitive.NewMessage(topic, []byte(fmt.Sprintf("old-%d", i))))
	}
	time.Sleep(1100 * time.Millisecond)
	mark := time.Now()
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 8; i++ {
		sendSync(t, p, primitive.NewMessage(topic, []byte(fmt.Sprintf("new-%d", i))))
	}
	waitRoute(t, srv.Namesrv, topic)
	a := newArrivals()
	c := newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group}, a.handle)
	for i := 0; i < 8; i++ {
		a.waitN(t, fmt.Sprintf("new-%d", i), 1, 40*time.Second)
		a.waitN(t, fmt.Sprintf("old-%d", i), 1, 40*time.Second)
	}
	// Online.
	ts := mark.UTC().Format("2006-01-02T15:04:05.000Z")
	out := mqAdmin(t, srv, "offset", "reset", "--yes", "--group", group, "--topic", topic, "--timestamp", ts)
	t.Logf("offset reset:\n%s", out)
	assert.Contains(t, out, "1 online consumer(s) told")
	for i := 0; i < 8; i++ {
		a.waitN(t, fmt.Sprintf("new-%d", i), 2, 60*time.Second)
	}
	for i := 0; i < 8; i++ {
		assert.Len(t, a.times(fmt.Sprintf("old-%d", i)), 1, "old-%d is before the reset time", i)
	}
	// Offline: everything since an hour ago, picked up by the next start.
	c.Shutdown()
	out = mqAdmin(t, srv, "offset", "reset", "--yes", "--group", group, "--topic", topic, "--timestamp=-1h")
	assert.Contains(t, out, "0 online consumer(s) told")
	b := newArrivals()
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group}, b.handle)
	for i := 0; i < 8; i++ {
		b.waitN(t, fmt.Sprintf("old-%d", i), 1, 40*time.Second)
		b.waitN(t, fmt.Sprintf("new-%d", i), 1, 40*time.Second)
	}
}

// testPendingSurvive leaves delayed, timer and retry messages pending,
// stops the broker with stop, and checks each is delivered exactly once
// when due.
func testPendingSurvive(t *testing.T, stop func(*testserver.Proc)) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"schedule.delay_levels=1s 2s 6s", "broker.offset_flush_interval=100ms"}})
	topic := uniq("Pending")
	group := uniq("CG")
	p := newProducer(t, srv.Namesrv)
	a := newArrivals()
	a.retry = func(m *primitive.MessageExt) bool { return string(m.Body) == "retry-me" && m.ReconsumeTimes == 0 }
	c := readyConsumer(t, srv.Namesrv, p, topic, group, a)

	sent := time.Now()
	due := map[string]time.Time{}
	for i := 0; i < 5; i++ {
		b := fmt.Sprintf("delay-%d", i)
		sendSync(t, p, primitive.NewMessage(topic, []byte(b)).WithDelayTimeLevel(3))
		due[b] = sent.Add(6 * time.Second)
		b = fmt.Sprintf("timer-%d", i)
		at := sent.Add(time.Duration(5000+300*i) * time.Millisecond)
		sendSync(t, p, primitive.NewMessage(topic, []byte(b)).WithDelayTimestamp(at))
		due[b] = at
	}
	// Delivered before the stop, not to be delivered again.
	sendSync(t, p, primitive.NewMessage(topic, []byte("early")).WithDelayTimeLevel(1))
	// Failed once before the stop: its retry (level 3 = 6s) is pending.
	sendSync(t, p, primitive.NewMessage(topic, []byte("retry-me")))
	a.waitN(t, "early", 1, 10*time.Second)
	a.waitN(t, "retry-me", 1, 10*time.Second)
	retryDue := a.times("retry-me")[0].Add(6 * time.Second)
	time.Sleep(300 * time.Millisecond) // the send-back lands
	// Stop the consumer (it commits its offsets) and then the broker.
	c.Shutdown()
	time.Sleep(500 * time.Millisecond)
	stop(srv)
	waitRoute(t, srv.Namesrv, topic)
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: group}, a.handle)
	for b := range due {
		a.waitN(t, b, 1, 40*time.Second)
	}
	a.waitN(t, "retry-me", 2, 60*time.Second)
	time.Sleep(3 * time.Second)
	for b, d := range due {
		got := a.deliveries(b)
		assert.Len(t, got, 1, "%s delivered once", b)
		if len(got) > 0 {
			// The delivered copy's store time is when it was released.
			assert.GreaterOrEqual(t, got[0].StoreTimestamp+5, d.UnixMilli(), "%s released early", b)
		}
	}
	assert.Len(t, a.deliveries("early"), 1, "early delivered once")
	rs := a.deliveries("retry-me")
	if assert.Len(t, rs, 2, "retry-me: first try and one retry") {
		assert.Equal(t, int32(1), rs[1].ReconsumeTimes)
		assert.Equal(t, topic, rs[1].Topic)
		assert.GreaterOrEqual(t, rs[1].StoreTimestamp+5, retryDue.UnixMilli()-300, "retry released early")
	}
}

func TestPendingSurviveSIGTERM(t *testing.T) {
	testPendingSurvive(t, func(p *testserver.Proc) { p.Restart() })
}

func TestPendingSurviveSIGKILL(t *testing.T) {
	testPendingSurvive(t, func(p *testserver.Proc) { p.Kill(); p.Start() })
}

// brokerRSS returns VmRSS and VmHWM (KiB) of the mq process serving srv.
func brokerRSS(t *testing.T, srv *testserver.Proc) (rss, hwm int64) {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cl), "storage.dir="+srv.Dir) {
			continue
		}
		st, err := os.ReadFile("/proc/" + d.Name() + "/status")
		require.NoError(t, err)
		for _, line := range strings.Split(string(st), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "VmRSS:" {
				rss, _ = strconv.ParseInt(f[1], 10, 64)
			}
			if len(f) >= 2 && f[0] == "VmHWM:" {
				hwm, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
		return rss, hwm
	}
	t.Fatal("mq process not found")
	return 0, 0
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// sendTimers sends n timer messages in batches, the i-th due at at(i).
func sendTimers(t *testing.T, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic string, n int, at func(i int) time.Time) {
	t.Helper()
	const batch, workers = 200, 4
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := int(next.Add(batch)) - batch
				if start >= n {
					return
				}
				var ms []*primitive.Message
				for i := start; i < min(start+batch, n); i++ {
					due := at(i)
					ms = append(ms, primitive.NewMessage(topic, []byte(strconv.FormatInt(due.UnixMilli(), 10)+"-"+strconv.Itoa(i))).WithDelayTimestamp(due))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := p.SendSync(ctx, ms...)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestTimerBenchmark measures timer accuracy (100,000 timers due at random
// times over 60 s: lateness of the broker's release and of the official
// consumer's receipt) and the broker's memory while it holds 1,000,000
// pending timers. It takes a few minutes: run it with
// TIMER_BENCH=1 go test -run TestTimerBenchmark -v ./interop
func TestTimerBenchmark(t *testing.T) {
	if testing.Short() || os.Getenv("TIMER_BENCH") == "" {
		t.Skip("benchmark: set TIMER_BENCH=1 (and no -short)")
	}
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"log.level=info"}})
	topic := uniq("TimerBench")
	p := newProducer(t, srv.Namesrv)

	const n = 100_000
	var mu sync.Mutex
	recv := make([]time.Duration, 0, n)
	release := make([]time.Duration, 0, n)
	seen := map[string]bool{}
	h := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			b := string(m.Body)
			ms, err := strconv.ParseInt(strings.SplitN(b, "-", 2)[0], 10, 64)
			if err != nil || seen[b] {
				continue
			}
			seen[b] = true
			recv = append(recv, now.Sub(time.UnixMilli(ms)))
			release = append(release, time.Duration(m.StoreTimestamp-ms)*time.Millisecond)
		}
		return consumer.ConsumeSuccess, nil
	}
	a := newArrivals()
	readyConsumer(t, srv.Namesrv, p, topic, uniq("CG"), a)
	_ = a
	newPushConsumer(t, srv.Namesrv, topic, consumerOpts{group: uniq("CGB")}, h)
	time.Sleep(3 * time.Second)

	t0 := time.Now().Add(30 * time.Second)
	rng := make([]time.Duration, n)
	for i := range rng {
		rng[i] = time.Duration(int64(i) * int64(60*time.Second) / n)
	}
	// A fixed permutation keeps due times random but reproducible.
	for i := range rng {
		j := (i*7919 + 13) % n
		rng[i], rng[j] = rng[j], rng[i]
	}
	sendStart := time.Now()
	sendTimers(t, p, topic, n, func(i int) time.Time { return t0.Add(rng[i]) })
	t.Logf("sent %d timers in %s", n, time.Since(sendStart))
	require.Less(t, time.Since(sendStart), 30*time.Second, "sending overran the first due time")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(recv) >= n }, 150*time.Second, time.Second, "received %d of %d", len(recv), n)
	mu.Lock()
	slices.Sort(recv)
	slices.Sort(release)
	t.Logf("BENCH accuracy n=%d release(store time - due): p50=%s p99=%s max=%s min=%s; receipt(consumer - due): p50=%s p99=%s max=%s",
		len(release), quantile(release, .5), quantile(release, .99), release[len(release)-1], release[0],
		quantile(recv, .5), quantile(recv, .99), recv[len(recv)-1])
	mu.Unlock()
	rss, hwm := brokerRSS(t, srv)
	t.Logf("BENCH after accuracy run: broker VmRSS=%d MiB VmHWM=%d MiB", rss>>10, hwm>>10)

	// 1,000,000 pending timers, due between 30 and 90 minutes from now.
	const m = 1_000_000
	topic2 := uniq("TimerHold")
	base := time.Now().Add(30 * time.Minute)
	sendStart = time.Now()
	sendTimers(t, p, topic2, m, func(i int) time.Time { return base.Add(time.Duration(int64(i) * int64(time.Hour) / m)) })
	t.Logf("sent %d timers in %s", m, time.Since(sendStart))
	time.Sleep(10 * time.Second) // indexing finishes, GC settles
	rss, hwm = brokerRSS(t, srv)
	files, _ := os.ReadDir(srv.Dir + "/store/timerwheel")
	var entries int64
	for _, f := range files {
		if info, err := f.Info(); err == nil {
			entries += info.Size() / 16
		}
	}
	assert.GreaterOrEqual(t, entries, int64(m), "every timer indexed")
	t.Logf("BENCH holding %d pending timers: broker VmRSS=%d MiB VmHWM=%d MiB, %d wheel slot files with %d entries", m, rss>>10, hwm>>10, len(files), entries)
}

// TestModulesDisabled: with schedule.enabled=false a delayed message is
// delivered at once; with retry.enabled=false the broker refuses
// send-back and the official client falls back to sending the message to
// %RETRY%<group> itself, so the retry still arrives.
func TestModulesDisabled(t *testing.T) {
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"schedule.enabled=false", "retry.enabled=false"}})
	topic := uniq("Disabled")
	p := newProducer(t, srv.Namesrv)
	a := newArrivals()
	a.retry = func(m *primitive.MessageExt) bool { return string(m.Body) == "flaky" && m.ReconsumeTimes == 0 }
	readyConsumer(t, srv.Namesrv, p, topic, uniq("CG"), a)

	sent := time.Now()
	sendSync(t, p, primitive.NewMessage(topic, []byte("delayed")).WithDelayTimeLevel(4)) // 30s if scheduled
	got := a.waitN(t, "delayed", 1, 10*time.Second)
	assert.Less(t, got[0].Sub(sent), 5*time.Second)

	sendSync(t, p, primitive.NewMessage(topic, []byte("flaky")))
	a.waitN(t, "flaky", 2, 60*time.Second)
	ds := a.deliveries("flaky")
	assert.Equal(t, int32(1), ds[1].ReconsumeTimes)
	assert.Equal(t, topic, ds[1].Topic)
}
