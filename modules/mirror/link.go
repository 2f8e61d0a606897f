package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/core/protocol"
)

// link is one running mirror.
type link struct {
	cfg      Link
	log      *slog.Logger
	src, dst *client.Client
	puller   *consumer.PullConsumer // on src, for pulls only
	pattern  *regexp.Regexp
	sel      consumer.Selector
	limiter  *bucket

	// targetCluster is the target's name (config or its routes): a
	// message whose origin it is never goes back.
	targetCluster atomic.Pointer[string]
	sourceCluster atomic.Pointer[string]

	mu      sync.Mutex
	queues  map[client.MessageQueue]*queueState // by source queue
	loaded  bool                                // the checkpoint was read
	ckptAt  time.Time                           // last checkpoint written
	groups  map[groupQueue]int64                // translated offsets written
	lastErr string
	stopped bool         // the link was stopped (its last checkpoint says so)
	samples []rateSample // counters of the last seconds, for throughput

	sides       [2]sideState // sideSource, sideTarget
	reconnects  atomic.Int64
	mirrored    atomic.Int64
	loopSkipped atomic.Int64
	perTopic    sync.Map // topic → *topicCounters
	ordered     sync.Map // topic → bool: keeps oldest-first (newest_first only)
	workers     sync.WaitGroup
}

// rateSample is the link's counters at one time (throughput is the
// difference to the oldest sample of the last rateWindow).
type rateSample struct {
	at       time.Time
	msgs     int64
	bytes    int64
	perTopic map[string]int64
}

// rateWindow is the period throughput is measured over.
const rateWindow = 10 * time.Second

type topicCounters struct{ msgs, bytes atomic.Int64 }

// groupQueue is a group's target queue.
type groupQueue struct {
	group string
	mq    client.MessageQueue
}

// queueState is one source queue: where the link is, where it writes.
type queueState struct {
	src client.MessageQueue

	mu     sync.Mutex
	dst    client.MessageQueue
	hasDst bool
	next   int64 // the next source offset to mirror; all before are in the target
	known  bool  // next is set (checkpoint or start position)
	pairs  []pair
	maxOff int64
	lagTS  int64 // store time (ms) of the oldest message not yet mirrored, 0 if none
	cancel context.CancelFunc
	// gaps are source ranges behind next not yet all written (catch_up
	// newest_first: the live tail went first), oldest first; filling says
	// a goroutine is writing them, gapTS is the store time (ms) of the
	// first message it pulled last.
	gaps    []Gap
	filling bool
	gapTS   int64
}

// Gap is a source range [From, To) a newest-first link skipped to write
// the live tail first, and writes behind it.
type Gap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// gapMessages is how many offsets the gaps still hold.
func gapMessages(gs []Gap) int64 {
	var n int64
	for _, g := range gs {
		n += max(0, g.To-g.From)
	}
	return n
}

// pair says that source offset Src was written at target offset Dst.
type pair struct{ Src, Dst int64 }

// maxPairs bounds the offset pairs kept per queue; older ones are thinned
// (every other one dropped), which coarsens translation, never skips.
const maxPairs = 48

func (q *queueState) addPair(p pair) {
	if n := len(q.pairs); n > 0 && q.pairs[n-1].Src >= p.Src {
		return
	}
	q.pairs = append(q.pairs, p)
	if len(q.pairs) > maxPairs {
		half := len(q.pairs) / 2
		kept := q.pairs[:1]
		for i := 2; i < half; i += 2 {
			kept = append(kept, q.pairs[i])
		}
		q.pairs = append(kept, q.pairs[half:]...)
	}
}

// translate returns the target offset a group whose next source offset is
// c resumes at: the target offset of the last pair at or before c (the
// messages between are consumed again, none is skipped).
func translate(pairs []pair, c int64) (int64, bool) {
	i, found := slices.BinarySearchFunc(pairs, c, func(p pair, c int64) int {
		switch {
		case p.Src < c:
			return -1
		case p.Src > c:
			return 1
		}
		return 0
	})
	if found {
		return pairs[i].Dst, true
	}
	if i == 0 {
		return 0, false
	}
	return pairs[i-1].Dst, true
}

func newLink(cfg Link, dial client.DialFunc, log *slog.Logger) (*link, error) {
	LinkDefaults(&cfg)
	l := &link{cfg: cfg, log: log.With("link", cfg.Name), queues: map[client.MessageQueue]*queueState{}, groups: map[groupQueue]int64{}}
	if cfg.TopicPattern != "" {
		l.pattern = regexp.MustCompile("^(?:" + cfg.TopicPattern + ")$")
	}
	l.sel = consumer.All()
	if e := strings.TrimSpace(cfg.Filter.Expression); e != "" {
		l.sel = consumer.Selector{Type: consumer.ExpressionType(cfg.Filter.Type), Expression: e}
	}
	if cfg.RateLimit > 0 {
		l.limiter = newBucket(cfg.RateLimit)
	}
	if cfg.CatchUp == "" {
		l.cfg.CatchUp = CatchUpOldestFirst
	}
	if cfg.Target.Cluster != "" {
		l.targetCluster.Store(&cfg.Target.Cluster)
	}
	if cfg.Source.Cluster != "" {
		l.sourceCluster.Store(&cfg.Source.Cluster)
	}
	mk := func(side string, c Cluster) (*client.Client, error) {
		opts := []client.Option{client.WithNameServers(c.Namesrv...), client.WithDialer(dial),
			client.WithLogger(l.log.With("side", side)), client.WithInstanceName(Group(cfg.Name) + "-" + side),
			client.WithRouteRefreshInterval(cfg.RefreshInterval)}
		if c.AccessKey != "" {
			opts = append(opts, client.WithCredentials(c.AccessKey, c.SecretKey, ""))
		}
		cl, err := client.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("mirror: link %s: %s client: %w", cfg.Name, side, err)
		}
		return cl, nil
	}
	var err error
	if l.src, err = mk("source", cfg.Source); err != nil {
		return nil, err
	}
	if l.dst, err = mk("target", cfg.Target); err != nil {
		l.src.Close()
		return nil, err
	}
	if l.puller, err = consumer.NewPull(l.src, Group(cfg.Name)); err != nil {
		l.close()
		return nil, fmt.Errorf("mirror: link %s: %w", cfg.Name, err)
	}
	return l, nil
}

func (l *link) close() {
	l.src.Close()
	l.dst.Close()
}

// run drives the link until ctx ends: checkpoint first, then discovery,
// one worker per source queue and the checkpoint loop.
func (l *link) run(ctx context.Context) {
	bo := l.backoff()
	for !l.isLoaded() {
		if err := l.loadCheckpoint(ctx); err != nil {
			l.failed("read the checkpoint", onSide(sideTarget, err))
			if !bo.wait(ctx) {
				return
			}
			continue
		}
	}
	l.log.Info("mirror link started", "source", strings.Join(l.cfg.Source.Namesrv, ","), "target", strings.Join(l.cfg.Target.Namesrv, ","))
	refresh := time.NewTicker(l.cfg.RefreshInterval)
	defer refresh.Stop()
	ckpt := time.NewTicker(l.cfg.CheckpointInterval)
	defer ckpt.Stop()
	l.discover(ctx)
	for {
		select {
		case <-ctx.Done():
			l.workers.Wait()
			return
		case <-refresh.C:
			l.discover(ctx)
		case <-ckpt.C:
			if err := l.writeCheckpoint(ctx); err != nil {
				if ctx.Err() == nil {
					l.failed("write the checkpoint", onSide(sideTarget, err))
				}
				continue
			}
			l.ok(sideTarget)
			if len(l.cfg.Groups) > 0 {
				l.translateGroups(ctx)
			}
		}
	}
}

func (l *link) isLoaded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded
}

// The two ends of a link, whose failures are told apart: an idle queue
// pulling fine from the source does not make a link whose target is
// unreachable look up, and a link counts one reconnect per recovery.
const (
	sideSource = 0
	sideTarget = 1
)

var sideNames = [2]string{"source", "target"}

type sideState struct {
	seen      atomic.Bool // an exchange worked once
	down      atomic.Bool
	downSince atomic.Int64 // unix ms of the failure that took it down
}

// sideError is an error of one end.
type sideError struct {
	side int
	err  error
}

func (e *sideError) Error() string { return sideNames[e.side] + ": " + e.err.Error() }
func (e *sideError) Unwrap() error { return e.err }

func onSide(side int, err error) error {
	if err == nil {
		return nil
	}
	return &sideError{side, err}
}

// failed records an error of an end: the link is down until the end
// answers again.
func (l *link) failed(op string, err error) {
	side := sideTarget
	var se *sideError
	if errors.As(err, &se) {
		side = se.side
	}
	if !l.sides[side].down.Swap(true) {
		l.sides[side].downSince.Store(time.Now().UnixMilli())
		l.log.Warn("mirror link down", "side", sideNames[side], "op", op, "err", err)
	}
	l.mu.Lock()
	l.lastErr = op + ": " + err.Error()
	l.mu.Unlock()
}

// ok records a success with an end: one that was down counts a
// reconnect.
func (l *link) ok(side int) {
	l.sides[side].seen.Store(true)
	if l.sides[side].down.Swap(false) {
		l.reconnects.Add(1)
		l.log.Info("mirror link up again", "side", sideNames[side])
		if !l.sides[1-side].down.Load() {
			l.mu.Lock()
			l.lastErr = ""
			l.mu.Unlock()
		}
	}
}

// isUp reports whether both ends answered and neither has failed since.
func (l *link) isUp() bool {
	for i := range l.sides {
		if !l.sides[i].seen.Load() || l.sides[i].down.Load() {
			return false
		}
	}
	return true
}

// topics lists the source topics the link follows.
func (l *link) topics(ctx context.Context) ([]string, error) {
	want := slices.Clone(l.cfg.Topics)
	if l.pattern != nil {
		all, err := admin.New(l.src).Topics(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range all {
			if l.pattern.MatchString(t) {
				want = append(want, t)
			}
		}
	}
	out := want[:0]
	for _, t := range want {
		if protocol.IsSystemTopic(t) || protocol.IsRetryTopic(t) || strings.HasPrefix(t, protocol.DLQGroupPrefix) ||
			strings.HasPrefix(t, "MIRROR_CHECKPOINT_") || t == "TBW102" || strings.HasPrefix(t, "rmq_sys_") {
			continue
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// discover lists topics and routes, maps new source queues to target
// queues and starts their workers.
func (l *link) discover(ctx context.Context) {
	topics, err := l.topics(ctx)
	if err != nil {
		l.failed("list the source topics", onSide(sideSource, err))
		return
	}
	for _, t := range topics {
		if ctx.Err() != nil {
			return
		}
		if err := l.discoverTopic(ctx, t); err != nil {
			l.failed("route "+t, err)
		}
	}
}

func (l *link) discoverTopic(ctx context.Context, topic string) error {
	sr, err := l.src.FetchRoute(ctx, topic)
	if err != nil {
		if errors.Is(err, client.ErrNoRoute) {
			return nil // not created yet
		}
		return onSide(sideSource, err)
	}
	if l.sourceCluster.Load() == nil {
		for _, bd := range sr.Data.BrokerDatas {
			c := bd.Cluster
			l.sourceCluster.CompareAndSwap(nil, &c)
			break
		}
	}
	srcQs := slices.Clone(sr.Subscribe)
	sortMQ(srcQs)
	if len(srcQs) == 0 {
		return nil
	}
	if l.cfg.CatchUp == CatchUpNewestFirst {
		l.checkOrdered(ctx, topic, sr)
	}
	tr, err := l.targetRoute(ctx, topic, sr)
	if err != nil {
		return onSide(sideTarget, err)
	}
	dstQs := slices.Clone(tr.Publish)
	sortMQ(dstQs)
	if len(dstQs) == 0 {
		return fmt.Errorf("no writable queue of %s in the target", topic)
	}
	if l.targetCluster.Load() == nil {
		for _, bd := range tr.Data.BrokerDatas {
			c := bd.Cluster
			l.targetCluster.CompareAndSwap(nil, &c)
			break
		}
	}
	for i, sq := range srcQs {
		dq := dstQs[i%len(dstQs)]
		l.mu.Lock()
		q, ok := l.queues[sq]
		if !ok {
			q = &queueState{src: sq}
			l.queues[sq] = q
		}
		l.mu.Unlock()
		q.mu.Lock()
		if q.hasDst && q.dst != dq {
			// The target's queues changed: the pairs recorded name the
			// old queue.
			l.log.Warn("mirror: target queue of a source queue changed", "source", sq.String(), "from", q.dst.String(), "to", dq.String())
			q.pairs = nil
		}
		q.dst, q.hasDst = dq, true
		running := q.cancel != nil
		if !running {
			wctx, cancel := context.WithCancel(ctx)
			q.cancel = cancel
			l.workers.Add(1)
			go func() {
				defer l.workers.Done()
				l.work(wctx, q)
			}()
		}
		q.mu.Unlock()
	}
	return nil
}

// checkOrdered records whether topic is ordered (the route's
// orderTopicConf, the order flag or message.type FIFO of its config on a
// source broker): an ordered topic, or one whose config cannot be read,
// catches up oldest first whatever catch_up says.
func (l *link) checkOrdered(ctx context.Context, topic string, sr *client.TopicRoute) {
	ordered := true
	switch {
	case sr.Data != nil && sr.Data.OrderTopicConf != "":
	case len(sr.Subscribe) > 0:
		addr, ok := l.src.BrokerAddr(sr.Subscribe[0].BrokerName)
		if !ok {
			break
		}
		tc, err := admin.New(l.src).BrokerTopicConfig(ctx, addr, topic)
		if err != nil {
			l.log.Warn("mirror: topic config unreadable, catching up oldest first", "topic", topic, "err", err)
			break
		}
		ordered = tc.Order || tc.Attributes[protocol.AttrMessageType] == protocol.MessageTypeFIFO
	}
	if old, seen := l.ordered.Swap(topic, ordered); (!seen || old.(bool) != ordered) && ordered {
		l.log.Info("mirror: ordered topic catches up oldest first (catch_up newest_first ignored)", "topic", topic)
	}
}

// targetRoute returns topic's route in the target, creating the topic
// with the source's queue count per broker when create_topics is on.
func (l *link) targetRoute(ctx context.Context, topic string, sr *client.TopicRoute) (*client.TopicRoute, error) {
	tr, err := l.dst.FetchRoute(ctx, topic)
	if err == nil && len(tr.Publish) > 0 {
		return tr, nil
	}
	if err != nil && !errors.Is(err, client.ErrNoRoute) {
		return nil, err
	}
	if !l.cfg.CreateTopics {
		return nil, fmt.Errorf("topic %s does not exist in the target (create it, or set create_topics)", topic)
	}
	perBroker := map[string]int{}
	for _, q := range sr.Subscribe {
		perBroker[q.BrokerName]++
	}
	n := 0
	for _, c := range perBroker {
		n = max(n, c)
	}
	if err := admin.New(l.dst).CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: n, WriteQueueNums: n}); err != nil {
		return nil, err
	}
	l.log.Info("mirror: created the topic in the target", "topic", topic, "queues", n)
	return l.waitRoute(ctx, topic)
}

// waitRoute polls the target's name servers until they route topic (a
// broker registers a new topic with them at once, but asynchronously).
func (l *link) waitRoute(ctx context.Context, topic string) (*client.TopicRoute, error) {
	var last error
	for i := 0; i < 50; i++ {
		tr, err := l.dst.FetchRoute(ctx, topic)
		if err == nil && len(tr.Publish) > 0 {
			return tr, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("topic %s created in the target but not routed yet: %v", topic, last)
}

func sortMQ(qs []client.MessageQueue) {
	slices.SortFunc(qs, func(a, b client.MessageQueue) int {
		if a.BrokerName != b.BrokerName {
			return cmpStr(a.BrokerName, b.BrokerName)
		}
		return a.QueueID - b.QueueID
	})
}

func (l *link) counters(topic string) *topicCounters {
	if v, ok := l.perTopic.Load(topic); ok {
		return v.(*topicCounters)
	}
	v, _ := l.perTopic.LoadOrStore(topic, &topicCounters{})
	return v.(*topicCounters)
}

// state is the link's state (LinkStatus.State) and the end that is
// down, if one is.
func (l *link) state(now time.Time) (state, down string) {
	l.mu.Lock()
	loaded, stopped := l.loaded, l.stopped
	l.mu.Unlock()
	if stopped {
		return StateStopped, ""
	}
	if !loaded {
		return StateStarting, ""
	}
	for i := range l.sides {
		if l.sides[i].down.Load() {
			if now.UnixMilli()-l.sides[i].downSince.Load() >= cutAfter.Milliseconds() {
				return StateCut, sideNames[i]
			}
			return StateBackingOff, sideNames[i]
		}
	}
	for i := range l.sides {
		if !l.sides[i].seen.Load() {
			return StateStarting, ""
		}
	}
	return StateRunning, ""
}

func (l *link) status() LinkStatus {
	now := time.Now()
	st := LinkStatus{Name: l.cfg.Name, Source: strings.Join(l.cfg.Source.Namesrv, ","), Target: strings.Join(l.cfg.Target.Namesrv, ","),
		Up: l.isUp(), Mirrored: l.mirrored.Load(), LoopSkipped: l.loopSkipped.Load(), Reconnects: l.reconnects.Load(), CatchUp: l.cfg.CatchUp}
	st.State, st.Down = l.state(now)
	perTopic := map[string]*topicCounters{}
	var bytes int64
	l.perTopic.Range(func(k, v any) bool {
		tc := v.(*topicCounters)
		perTopic[k.(string)] = tc
		bytes += tc.bytes.Load()
		return true
	})
	l.mu.Lock()
	st.LastError = l.lastErr
	if !l.ckptAt.IsZero() {
		st.CheckpointAge = time.Since(l.ckptAt).Seconds()
	}
	base := l.sample(now, st.Mirrored, bytes, perTopic)
	if dt := now.Sub(base.at).Seconds(); dt > 0 {
		st.Rate = float64(st.Mirrored-base.msgs) / dt
		st.ByteRate = float64(bytes-base.bytes) / dt
	}
	qs := make([]*queueState, 0, len(l.queues))
	for _, q := range l.queues {
		qs = append(qs, q)
	}
	l.mu.Unlock()
	nowMs := now.UnixMilli()
	for _, q := range qs {
		q.mu.Lock()
		s := QueueStatus{Topic: q.src.Topic, Broker: q.src.BrokerName, Queue: q.src.QueueID, Next: q.next, MaxOffset: q.maxOff,
			LagMessages: max(0, q.maxOff-q.next) + gapMessages(q.gaps), GapMessages: gapMessages(q.gaps),
			TargetBroker: q.dst.BrokerName, TargetQueue: q.dst.QueueID}
		oldest := q.lagTS
		if len(q.gaps) > 0 && q.gapTS > 0 && (oldest == 0 || q.gapTS < oldest) {
			oldest = q.gapTS
		}
		if oldest > 0 {
			s.LagSeconds = float64(max(0, nowMs-oldest)) / 1000
		}
		q.mu.Unlock()
		st.Queues = append(st.Queues, s)
	}
	sortQueues(st.Queues)
	for topic, tc := range perTopic {
		ts := TopicStatus{Topic: topic, Messages: tc.msgs.Load(), Bytes: tc.bytes.Load()}
		if dt := now.Sub(base.at).Seconds(); dt > 0 {
			ts.Rate = float64(ts.Messages-base.perTopic[topic]) / dt
		}
		st.Topics = append(st.Topics, ts)
	}
	slices.SortFunc(st.Topics, func(a, b TopicStatus) int { return cmpStr(a.Topic, b.Topic) })
	return st
}

// sample records the counters (at most one sample a second, those of the
// last rateWindow kept) and returns the oldest sample to measure
// throughput against. l.mu is held.
func (l *link) sample(now time.Time, msgs, bytes int64, perTopic map[string]*topicCounters) rateSample {
	if n := len(l.samples); n == 0 || now.Sub(l.samples[n-1].at) >= time.Second {
		pt := make(map[string]int64, len(perTopic))
		for k, tc := range perTopic {
			pt[k] = tc.msgs.Load()
		}
		l.samples = append(l.samples, rateSample{at: now, msgs: msgs, bytes: bytes, perTopic: pt})
	}
	// Keep one sample at or before the window's start.
	for len(l.samples) > 2 && now.Sub(l.samples[1].at) >= rateWindow {
		l.samples = l.samples[1:]
	}
	return l.samples[0]
}

// backoff waits 100ms, doubling up to max_backoff, with jitter.
type backoff struct {
	cur, max time.Duration
}

func (l *link) backoff() *backoff {
	return &backoff{cur: 100 * time.Millisecond, max: l.cfg.MaxBackoff}
}

func (b *backoff) reset() { b.cur = 100 * time.Millisecond }

// wait sleeps the next backoff; false when ctx ended.
func (b *backoff) wait(ctx context.Context) bool {
	d := b.cur/2 + rand.N(b.cur/2+1)
	b.cur = min(2*b.cur, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// bucket is a token bucket of rate tokens per second, burst one second.
// Live writes go first: a backfill (a newest-first link's gap) takes
// tokens only while no live write waits for them.
type bucket struct {
	mu      sync.Mutex
	rate    float64
	tokens  float64
	last    time.Time
	waiting int // live writes waiting for tokens
}

func newBucket(rate int) *bucket {
	return &bucket{rate: float64(rate), tokens: float64(rate), last: time.Now()}
}

// backfillPoll is how often a backfill waiting behind live writes looks
// again.
const backfillPoll = 5 * time.Millisecond

// take waits until n tokens are there (n above the burst waits for the
// burst); live says the write is the live tail's (else a backfill's, which
// yields to waiting live writes); false when ctx ended.
func (b *bucket) take(ctx context.Context, n int, live bool) bool {
	need := min(float64(n), b.rate)
	counted := false
	defer func() {
		if counted {
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		now := time.Now()
		b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
		var wait time.Duration
		switch {
		case !live && b.waiting > 0:
			wait = backfillPoll
		case b.tokens >= need:
			b.tokens -= need
			b.mu.Unlock()
			return true
		default:
			if live && !counted {
				b.waiting++
				counted = true
			}
			wait = time.Duration((need - b.tokens) / b.rate * float64(time.Second))
		}
		b.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
