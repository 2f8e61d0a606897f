// Package producer sends messages: sync, async, oneway, batches, ordered
// sends through a queue selector, delayed messages and transactions, with
// retries on another broker and latency-fault avoidance, speaking the wire
// protocol of the official RocketMQ Go client.
package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/trace"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// Option configures a Producer.
type Option func(*options)

type options struct {
	sendTimeout       time.Duration
	retries           int
	asyncRetries      int
	compressOver      int
	compressLevel     int
	selector          QueueSelector
	faultEnabled      bool
	faultIsolation    time.Duration
	createTopicKey    string
	defaultTopicQueue int
	maxMessageSize    int
	checker           TransactionListener
	autoBatch         bool
	batch             BatchOptions
	trace             *trace.Dispatcher // trace.go
}

func defaults() options {
	return options{
		sendTimeout: 3 * time.Second, retries: 2, asyncRetries: 2,
		compressOver: 4096, compressLevel: 5, selector: RoundRobin(),
		faultEnabled: true, faultIsolation: 30 * time.Second,
		createTopicKey: protocol.AutoCreateTopic, defaultTopicQueue: protocol.DefaultTopicQueueNum,
		maxMessageSize: message.DefaultMaxMessageSize,
		autoBatch:      true, batch: BatchOptions{}.norm(),
	}
}

// WithSendTimeout bounds a send end to end, retries included (default
// 3 s); a shorter context deadline wins.
func WithSendTimeout(d time.Duration) Option { return func(o *options) { o.sendTimeout = d } }

// WithRetryTimesWhenSendFailed sets extra attempts of a sync send after a
// retriable failure (default 2).
func WithRetryTimesWhenSendFailed(n int) Option { return func(o *options) { o.retries = n } }

// WithRetryTimesWhenSendAsyncFailed sets extra attempts of an async send
// (default 2). Oneway sends are never retried.
func WithRetryTimesWhenSendAsyncFailed(n int) Option {
	return func(o *options) { o.asyncRetries = n }
}

// WithCompression compresses bodies of at least over bytes with zlib at
// level (default 4096 and 5, as the official clients). over <= 0 disables.
func WithCompression(over, level int) Option {
	return func(o *options) { o.compressOver, o.compressLevel = over, level }
}

// WithQueueSelector sets the queue selector (default RoundRobin). With
// any other selector, automatic batching leaves every message alone.
func WithQueueSelector(s QueueSelector) Option { return func(o *options) { o.selector = s } }

// WithLatencyFaultAvoidance turns latency-fault avoidance on or off
// (default on) and sets how long a broker that failed or answered busy is
// skipped (default 30 s). Slow answers set a broker aside following
// RocketMQ's latency table (550 ms → 30 s ... 15 s → 10 min).
func WithLatencyFaultAvoidance(on bool, isolation time.Duration) Option {
	return func(o *options) { o.faultEnabled, o.faultIsolation = on, isolation }
}

// WithDefaultTopicQueueNums sets the queue count of auto-created topics
// (default 4).
func WithDefaultTopicQueueNums(n int) Option { return func(o *options) { o.defaultTopicQueue = n } }

// WithCreateTopicKey sets the auto-create template topic (default TBW102).
func WithCreateTopicKey(t string) Option { return func(o *options) { o.createTopicKey = t } }

// WithMaxMessageSize bounds a body before compression (default 4 MiB).
func WithMaxMessageSize(n int) Option { return func(o *options) { o.maxMessageSize = n } }

// Producer sends messages for one producer group. It is safe for
// concurrent use.
type Producer struct {
	c     *client.Client
	group string
	o     options
	log   *slog.Logger
	// queueNums is o.defaultTopicQueue in decimal, for every request.
	queueNums string
	born      atomic.Pointer[msString]
	faults    *faultTable
	// batcher gathers SendAsync calls (nil: automatic batching off);
	// defaultSelector: o.selector is the built-in round robin.
	batcher         *batcher
	defaultSelector bool
	// heartbeated: a heartbeat with this group reached the brokers
	// (request.go: replies are pushed to producers the broker knows).
	heartbeated atomic.Bool

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// New registers producer group on c and returns its producer.
func New(c *client.Client, group string, opts ...Option) (*Producer, error) {
	if err := protocol.ValidateGroup(group); err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	o := defaults()
	for _, f := range opts {
		f(&o)
	}
	if o.selector == nil {
		o.selector = RoundRobin()
	}
	p := &Producer{c: c, group: group, o: o, log: c.Logger().With("producerGroup", group), faults: newFaultTable(o.faultIsolation),
		queueNums: strconv.Itoa(o.defaultTopicQueue)}
	_, p.defaultSelector = o.selector.(*roundRobin)
	if o.autoBatch {
		p.batcher = newBatcher(p, o.batch)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err := c.RegisterProducer(group, p); err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	c.TriggerHeartbeat()
	return p, nil
}

// Group is the producer group.
func (p *Producer) Group() string { return p.group }

// Shutdown waits for async sends and transaction checks in flight (or
// ctx's end) and unregisters the group. The Client stays open.
func (p *Producer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		p.cancel()
		<-done
		err = fmt.Errorf("producer: shutdown: %w", ctx.Err())
	}
	p.cancel()
	p.c.UnregisterProducer(p.group)
	return err
}

func (p *Producer) begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("producer %s: %w", p.group, client.ErrClosed)
	}
	p.wg.Add(1)
	return nil
}

func (p *Producer) available(broker string) bool {
	return !p.o.faultEnabled || p.faults.available(broker)
}

// prepared is an encoded send: the request fields except queue and broker.
type prepared struct {
	topic   string
	batch   bool
	uniq    string
	first   *client.Message
	ext     map[string]string
	body    []byte
	parts   [][]byte // the body as a vector, when set (automatic batches)
	sysFlag int32
}

func (p *Producer) prepare(msgs []*client.Message) (*prepared, error) {
	pr := new(prepared)
	if err := p.prepareInto(pr, msgs); err != nil {
		return nil, err
	}
	return pr, nil
}

// prepareInto is prepare into pr (SendAsync's is part of its state).
func (p *Producer) prepareInto(pr *prepared, msgs []*client.Message) error {
	if err := p.validate(msgs); err != nil {
		return err
	}
	return p.encode(pr, msgs)
}

// validate checks what prepare checks before encoding.
func (p *Producer) validate(msgs []*client.Message) error {
	if len(msgs) == 0 {
		return errors.New("producer: no message")
	}
	topic := msgs[0].Topic
	if err := protocol.ValidateTopic(topic); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if protocol.IsSystemTopic(topic) {
		return fmt.Errorf("producer: topic %s is a system topic", topic)
	}
	for _, m := range msgs {
		if m.Topic != topic {
			return fmt.Errorf("producer: a batch must have one topic, got %s and %s", topic, m.Topic)
		}
		if len(m.Body) == 0 {
			return errors.New("producer: message body is empty")
		}
		if len(m.Body) > p.o.maxMessageSize {
			return fmt.Errorf("producer: message body of %d bytes is over the limit %d", len(m.Body), p.o.maxMessageSize)
		}
	}
	return nil
}

// encode is prepareInto after validation.
func (p *Producer) encode(pr *prepared, msgs []*client.Message) error {
	topic := msgs[0].Topic
	now := p.bornTimestamp()
	*pr = prepared{topic: topic, first: msgs[0]}
	if len(msgs) == 1 {
		m := msgs[0]
		props := message.Properties(m.Properties)
		// The message's own map is left alone: a missing UNIQ_KEY is
		// appended to the encoding, not added to a copy.
		pr.uniq = props[message.PropertyUniqKey]
		addUniq := pr.uniq == ""
		if addUniq {
			pr.uniq = client.NewUniqID()
		}
		body := m.Body
		if strings.EqualFold(props[message.PropertyTransactionPrepared], "true") {
			pr.sysFlag |= message.TransactionPrepared
		}
		if p.o.compressOver > 0 && len(body) >= p.o.compressOver {
			z, err := message.Deflate(body, p.o.compressLevel)
			if err != nil {
				return fmt.Errorf("producer: %w", err)
			}
			body = z
			pr.sysFlag |= message.FlagCompressed
		}
		pr.body = body
		// SEND_MESSAGE_V2's one-letter keys, as the Java client sends
		// (sendSmartMsg): 127 bytes fewer than SEND_MESSAGE's (request
		// encodes them in the binary header). Sized for the request's two
		// queue fields too (request sets them in place).
		ext := make(map[string]string, 16)
		ext["a"] = p.group
		ext["b"] = topic
		ext["c"] = p.o.createTopicKey
		ext["d"] = p.queueNums
		ext["f"] = strconv.Itoa(int(pr.sysFlag))
		ext["g"] = now
		ext["h"] = strconv.Itoa(int(m.Flag))
		ext["i"] = encodeProps(props, addUniq, pr.uniq)
		ext["j"] = "0"
		ext["k"] = "false"
		ext["l"] = "0"
		ext["m"] = "false"
		pr.ext = ext
		return nil
	}
	for _, m := range msgs {
		if m.Properties[message.PropertyDelayTimeLevel] != "" {
			return errors.New("producer: a batch cannot carry delayed messages")
		}
		if strings.EqualFold(m.Properties[message.PropertyTransactionPrepared], "true") {
			return errors.New("producer: a batch cannot carry transactional messages")
		}
	}
	p.encodeBatch(pr, msgs, nil)
	return nil
}

// bornTimestamp is the current time in Unix milliseconds, in decimal; the
// string is shared by the sends of the same millisecond.
func (p *Producer) bornTimestamp() string {
	ms := time.Now().UnixMilli()
	if t := p.born.Load(); t != nil && t.ms == ms {
		return t.s
	}
	t := &msString{ms: ms, s: strconv.FormatInt(ms, 10)}
	p.born.Store(t)
	return t.s
}

type msString struct {
	ms int64
	s  string
}

// encodeProps writes properties as the official Go client does, with a
// trailing separator; with addUniq, UNIQ_KEY=uniq is appended.
func encodeProps(props message.Properties, addUniq bool, uniq string) string {
	var buf [512]byte
	b := props.AppendEncoded(buf[:0])
	if len(b) > 0 {
		b = append(b, message.PropertySeparator)
	}
	if addUniq {
		b = append(b, message.PropertyUniqKey...)
		b = append(b, message.NameValueSeparator)
		b = append(b, uniq...)
		b = append(b, message.PropertySeparator)
	}
	return string(b)
}

// request builds the request of one attempt to q. The queue fields are
// set in pr.ext itself, which attempts share: an attempt's request is
// encoded before the next one is built.
func (pr *prepared) request(q client.MessageQueue) *remoting.Command {
	code := remoting.SendMessageV2
	switch {
	case pr.batch:
		code = remoting.SendBatchMessage
	case client.IsReply(pr.first):
		code = remoting.SendReplyMessageV2 // request.go
	}
	pr.ext["e"] = strconv.Itoa(q.QueueID)
	pr.ext["n"] = q.BrokerName
	req := client.NewRequest(code, pr.ext, pr.body)
	// The ROCKETMQ (binary) header, which every RocketMQ broker since 4.0
	// reads (RocketMQSerializable; the Java client's
	// rocketmq.serialize.type=ROCKETMQ): about 220 bytes where the JSON
	// one takes about 315 for a lab send, so a 1 KiB message with its
	// header (about 1,250 bytes of stream data) fits one QUIC packet at an
	// MTU of 1400 (1,366-byte packets after path MTU discovery), where the
	// JSON one took two. The broker answers in the request's encoding.
	req.SerializeType = codec.SerializeRocketMQ
	req.BodyParts = pr.parts
	return req
}

func retriable(err error) bool {
	switch client.CodeOf(err) {
	case remoting.TopicNotExist, remoting.ServiceNotAvailable, remoting.SystemError, remoting.NoPermission,
		remoting.SystemBusy, remoting.FlowControl:
		return true
	case -1:
		return !errors.Is(err, context.Canceled) && !errors.Is(err, client.ErrClosed)
	}
	return false
}

func (p *Producer) sendCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.o.sendTimeout)
}

// send runs the attempt loop.
// The send timeout is a deadline on each call (swept by the connection),
// not a context per send.
func (p *Producer) send(ctx context.Context, pr *prepared, retries int, sel QueueSelector) (*client.SendResult, error) {
	deadline := p.deadline(ctx)
	over := func() bool { return ctx.Err() != nil || !time.Now().Before(deadline) }
	last := ""
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 && over() {
			break
		}
		route, err := p.publishRoute(ctx, pr.topic, deadline)
		if err != nil {
			return nil, fmt.Errorf("producer: send to %s: %w", pr.topic, err)
		}
		q := sel.Select(pr.first, route.Publish, last, p.available)
		addr, ok := p.c.BrokerAddr(q.BrokerName)
		if !ok {
			lastErr = fmt.Errorf("producer: %w: %s", client.ErrBrokerNotFound, q.BrokerName)
			last = q.BrokerName
			continue
		}
		start := time.Now()
		resp, err := p.c.InvokeDeadline(ctx, addr, pr.request(q), deadline)
		took := time.Since(start)
		var res *client.SendResult
		if err == nil {
			res, err = p.result(addr, pr, q, resp)
		}
		if p.o.faultEnabled {
			p.faults.update(q.BrokerName, took, err != nil && retriable(err))
		}
		if err == nil {
			return res, nil
		}
		lastErr = err
		last = q.BrokerName
		p.log.Debug("send attempt failed", "topic", pr.topic, "queue", q.String(), "attempt", attempt+1, "err", err)
		if client.CodeOf(err) == remoting.TopicNotExist {
			p.c.ForgetRoute(pr.topic)
		}
		if !retriable(err) || over() {
			break
		}
	}
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded) || (ctx.Err() == nil && !time.Now().Before(deadline))
	if timedOut && !errors.Is(lastErr, client.ErrTimeout) {
		return nil, fmt.Errorf("producer: send to %s: %w: %w", pr.topic, client.ErrTimeout, lastErr)
	}
	return nil, fmt.Errorf("producer: send to %s: %w", pr.topic, lastErr)
}

func (p *Producer) result(addr string, pr *prepared, q client.MessageQueue, resp *remoting.Command) (*client.SendResult, error) {
	var st client.SendStatus
	switch resp.Code {
	case remoting.Success:
		st = client.SendOK
	case remoting.FlushDiskTimeout:
		st = client.SendFlushDiskTimeout
	case remoting.FlushSlaveTimeout:
		st = client.SendFlushSlaveTimeout
	case remoting.SlaveNotAvailable:
		st = client.SendSlaveNotAvailable
	default:
		return nil, client.NewBrokerError(addr, resp)
	}
	res := &client.SendResult{Status: st, MsgID: pr.uniq, OffsetMsgID: resp.Ext("msgId"), Queue: q,
		TransactionID: resp.Ext("transactionId"), RegionID: resp.Ext("MSG_REGION"), RecallHandle: resp.Ext("recallHandle")}
	if v, err := strconv.Atoi(resp.Ext("queueId")); err == nil {
		res.Queue.QueueID = v
	}
	res.QueueOffset, _ = strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
	return res, nil
}

// SendSync sends one message, or several of one topic as a batch, and
// waits until the broker stored them. Retriable failures (timeouts,
// connection errors, SYSTEM_BUSY, SYSTEM_ERROR, TOPIC_NOT_EXIST,
// SERVICE_NOT_AVAILABLE, NO_PERMISSION) are retried on another broker
// while the send timeout allows.
func (p *Producer) SendSync(ctx context.Context, msgs ...*client.Message) (*client.SendResult, error) {
	return p.SendWithSelector(ctx, p.o.selector, msgs...)
}

// SendWithSelector is SendSync with a queue selector for this call.
func (p *Producer) SendWithSelector(ctx context.Context, sel QueueSelector, msgs ...*client.Message) (*client.SendResult, error) {
	if err := p.begin(); err != nil {
		return nil, err
	}
	defer p.wg.Done()
	pr, err := p.prepare(msgs)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := p.send(ctx, pr, p.o.retries, sel)
	if len(msgs) == 1 {
		p.tracePub(msgs[0], res, start)
	}
	return res, err
}

// SendAsync sends in the background and calls cb once with the outcome.
// The error returned is about the messages themselves (validation) or a
// closed producer; cb is not called then.
//
// No goroutine or context is made per message: the request is queued on
// the broker connection, cb runs on the connection's callback goroutine
// when the answer arrives (or the send timeout passes: the connection
// sweeps for expired calls), and a retriable failure is retried from
// there, on another broker, while WithRetryTimesWhenSendAsyncFailed and
// the send timeout allow. A slow cb delays the other callbacks of that
// broker connection. The first send of a topic fetches its route before
// SendAsync returns.
func (p *Producer) SendAsync(ctx context.Context, cb func(context.Context, *client.SendResult, error), msgs ...*client.Message) error {
	if err := p.begin(); err != nil {
		return err
	}
	if err := p.validate(msgs); err != nil {
		p.wg.Done()
		return err
	}
	cb = p.traced(msgs, cb)
	if len(msgs) == 1 && p.batchable(msgs[0]) {
		p.sendBatched(ctx, cb, msgs[0])
		return nil
	}
	s := &asyncSend{p: p, ctx: ctx, cb: cb, sel: p.o.selector}
	if err := p.encode(&s.prep, msgs); err != nil {
		p.wg.Done()
		return err
	}
	s.pr, s.deadline = &s.prep, p.deadline(ctx)
	s.next()
	return nil
}

// deadline is when a send starting now must end: the send timeout from
// now, or ctx's deadline if earlier.
func (p *Producer) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(p.o.sendTimeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// asyncSend is one SendAsync in flight: the attempt loop of send, driven
// by response callbacks instead of a goroutine.
type asyncSend struct {
	p        *Producer
	ctx      context.Context
	cb       func(context.Context, *client.SendResult, error)
	pr       *prepared // &prep
	prep     prepared
	sel      QueueSelector
	deadline time.Time

	attempt int
	last    string // broker of the last failed attempt
	lastErr error
	// the attempt in flight
	q     client.MessageQueue
	addr  string
	start time.Time
}

// over reports whether the send may not try again: ctx ended or the send
// timeout passed.
func (s *asyncSend) over() bool {
	return s.ctx.Err() != nil || !time.Now().Before(s.deadline)
}

// next starts the next attempt, or finishes when none is left. It returns
// once an attempt is in flight (its callback continues) or cb was called.
func (s *asyncSend) next() {
	p := s.p
	for ; s.attempt <= p.o.asyncRetries; s.attempt++ {
		if s.over() && s.lastErr != nil {
			break
		}
		route, err := p.publishRoute(s.ctx, s.pr.topic, s.deadline)
		if err != nil {
			s.finish(nil, fmt.Errorf("producer: send to %s: %w", s.pr.topic, err))
			return
		}
		q := s.sel.Select(s.pr.first, route.Publish, s.last, p.available)
		addr, ok := p.c.BrokerAddr(q.BrokerName)
		if !ok {
			s.lastErr = fmt.Errorf("producer: %w: %s", client.ErrBrokerNotFound, q.BrokerName)
			s.last = q.BrokerName
			continue
		}
		s.q, s.addr, s.start = q, addr, time.Now()
		err = p.c.InvokeAsyncDeadline(s.ctx, addr, s.pr.request(q), s.deadline, s.done)
		if err == nil {
			return // s belongs to the callback now
		}
		if !s.failed(err) {
			break
		}
	}
	s.finish(nil, s.err())
}

// done is the attempt's callback.
func (s *asyncSend) done(resp *remoting.Command, err error) {
	var res *client.SendResult
	if err == nil {
		res, err = s.p.result(s.addr, s.pr, s.q, resp)
		if err == nil {
			if s.p.o.faultEnabled {
				s.p.faults.update(s.q.BrokerName, time.Since(s.start), false)
			}
			s.finish(res, nil)
			return
		}
	}
	if !s.failed(err) {
		s.finish(nil, s.err())
		return
	}
	s.attempt++
	s.next()
}

// failed records a failed attempt; true when another may follow.
func (s *asyncSend) failed(err error) bool {
	p := s.p
	if p.o.faultEnabled {
		p.faults.update(s.q.BrokerName, time.Since(s.start), retriable(err))
	}
	s.lastErr = err
	s.last = s.q.BrokerName
	p.log.Debug("send attempt failed", "topic", s.pr.topic, "queue", s.q.String(), "attempt", s.attempt+1, "err", err)
	if client.CodeOf(err) == remoting.TopicNotExist {
		p.c.ForgetRoute(s.pr.topic)
	}
	return retriable(err) && !s.over()
}

func (s *asyncSend) err() error {
	timedOut := errors.Is(s.ctx.Err(), context.DeadlineExceeded) || (s.ctx.Err() == nil && !time.Now().Before(s.deadline))
	if timedOut && !errors.Is(s.lastErr, client.ErrTimeout) {
		return fmt.Errorf("producer: send to %s: %w: %w", s.pr.topic, client.ErrTimeout, s.lastErr)
	}
	return fmt.Errorf("producer: send to %s: %w", s.pr.topic, s.lastErr)
}

func (s *asyncSend) finish(res *client.SendResult, err error) {
	s.p.callback(s.ctx, s.cb, res, err)
}

// callback calls an async send's cb, surviving its panic, and releases
// the send's count.
func (p *Producer) callback(ctx context.Context, cb func(context.Context, *client.SendResult, error), res *client.SendResult, err error) {
	defer p.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("send callback panicked", "panic", r)
		}
	}()
	cb(ctx, res, err)
}

// publishRoute is the topic's route, fetched within deadline when it is
// not cached.
func (p *Producer) publishRoute(ctx context.Context, topic string, deadline time.Time) (*client.TopicRoute, error) {
	if r := p.c.CachedPublishRoute(topic); r != nil {
		return r, nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return p.c.PublishRoute(ctx, topic, p.o.defaultTopicQueue)
}

// SendOneway writes the message without waiting for the broker; it is
// never retried.
func (p *Producer) SendOneway(ctx context.Context, msgs ...*client.Message) error {
	if err := p.begin(); err != nil {
		return err
	}
	defer p.wg.Done()
	pr, err := p.prepare(msgs)
	if err != nil {
		return err
	}
	ctx, cancel := p.sendCtx(ctx)
	defer cancel()
	route, err := p.c.PublishRoute(ctx, pr.topic, p.o.defaultTopicQueue)
	if err != nil {
		return fmt.Errorf("producer: send to %s: %w", pr.topic, err)
	}
	q := p.o.selector.Select(pr.first, route.Publish, "", p.available)
	addr, ok := p.c.BrokerAddr(q.BrokerName)
	if !ok {
		return fmt.Errorf("producer: %w: %s", client.ErrBrokerNotFound, q.BrokerName)
	}
	if err := p.c.SendOneway(ctx, addr, pr.request(q)); err != nil {
		return fmt.Errorf("producer: oneway send to %s: %w", pr.topic, err)
	}
	return nil
}

// CheckTransaction implements client.ProducerHandler.
func (p *Producer) CheckTransaction(ctx context.Context, peer *remoting.Peer, req *remoting.Command) {
	if p.o.checker == nil {
		p.log.Warn("transaction check for a producer without a transaction listener")
		return
	}
	if err := p.begin(); err != nil {
		return
	}
	defer p.wg.Done()
	msgs, err := client.DecodeMessages(req.Body, "")
	if err != nil || len(msgs) == 0 {
		return
	}
	m := msgs[0]
	st := p.safeCheck(ctx, m)
	tid := req.Ext("transactionId")
	if tid == "" {
		tid = m.Properties[message.PropertyUniqKey]
	}
	end := client.NewRequest(remoting.EndTransaction, map[string]string{
		"producerGroup":        p.group,
		"tranStateTableOffset": req.Ext("tranStateTableOffset"),
		"commitLogOffset":      req.Ext("commitLogOffset"),
		"commitOrRollback":     strconv.Itoa(int(st.code())),
		"fromTransactionCheck": "true",
		"msgId":                m.MsgID,
		"transactionId":        tid,
		"bname":                "",
	}, nil)
	end.Remark = ""
	if err := p.c.SendOnPeer(ctx, peer, end); err != nil {
		p.log.Warn("end transaction after check", "msgId", m.MsgID, "err", err)
	} else {
		p.traceEnd(&m.Message, m.MsgID, tid, m.StoreHost, st, true) // trace.go
	}
}

func (p *Producer) safeCheck(ctx context.Context, m *client.MessageExt) (st LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("transaction check panicked", "panic", r)
			st = Unknown
		}
	}()
	return p.o.checker.CheckLocalTransaction(ctx, m)
}
