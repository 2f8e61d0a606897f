package trace

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
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Dispatcher sends trace records to the trace topic in the background,
// as Java's AsyncTraceDispatcher: Append never blocks, records wait in a
// bounded buffer, one goroutine gathers them into trace messages (at most
// a batch of records or MaxMessageBytes each, keyed by the message ids
// they describe) and sends them one at a time. When the buffer is full,
// or the trace topic has no route, records are dropped and counted: a
// send never waits for its trace.
//
// The goroutine stops at Close, or when the client closes.
type Dispatcher struct {
	c     *client.Client
	o     dispatcherOptions
	log   *slog.Logger
	host  string
	in    chan Context
	flush chan chan struct{}

	dropped atomic.Int64
	sent    atomic.Int64
	failed  atomic.Int64

	mu     sync.Mutex // guards closed against Append's send on in
	closed bool
	stop   chan struct{}
	done   chan struct{}
	// ctx bounds the sends; Close cancels it when out of time.
	ctx    context.Context
	cancel context.CancelFunc
	rr     atomic.Uint32
	warned atomic.Int64 // Unix seconds of the last warning
}

// Option configures a Dispatcher.
type Option func(*dispatcherOptions)

type dispatcherOptions struct {
	topic    string
	buffer   int
	batch    int
	maxBytes int
	linger   time.Duration
	timeout  time.Duration
}

// WithTopic sets the trace topic (default RMQ_SYS_TRACE_TOPIC; a broker
// with broker.trace_topic_name set uses another).
func WithTopic(t string) Option { return func(o *dispatcherOptions) { o.topic = t } }

// WithBuffer bounds the records waiting to be sent (default 2048, Java's
// queueSize); more are dropped.
func WithBuffer(n int) Option { return func(o *dispatcherOptions) { o.buffer = n } }

// WithBatch sets how many records go into one trace message at most
// (default 100, the Go client's) and how long the first waits for
// others (default 10 ms).
func WithBatch(n int, linger time.Duration) Option {
	return func(o *dispatcherOptions) { o.batch, o.linger = n, linger }
}

// WithSendTimeout bounds the send of one trace message, its route
// lookup included (default 5 s, the Go client's).
func WithSendTimeout(d time.Duration) Option { return func(o *dispatcherOptions) { o.timeout = d } }

// MaxMessageBytes bounds one trace message's body (the Go client's
// maxMsgSize, under Java's 128 KiB).
const MaxMessageBytes = 128000 - 10*1000

// New starts a dispatcher sending through c.
func New(c *client.Client, opts ...Option) *Dispatcher {
	o := dispatcherOptions{topic: DefaultTopic, buffer: 2048, batch: 100, maxBytes: MaxMessageBytes,
		linger: 10 * time.Millisecond, timeout: 5 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	o.buffer, o.batch = max(o.buffer, 1), max(o.batch, 1)
	host, _, _ := strings.Cut(c.ID(), "@")
	d := &Dispatcher{c: c, o: o, log: c.Logger().With("component", "trace", "topic", o.topic), host: host,
		in: make(chan Context, o.buffer), flush: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	go d.loop()
	return d
}

// Topic is the trace topic.
func (d *Dispatcher) Topic() string { return d.o.topic }

// ClientHost is the address records name as their client's.
func (d *Dispatcher) ClientHost() string { return d.host }

// Append queues a record and reports whether it was taken: false when
// the buffer is full or the dispatcher closed (the record is dropped and
// counted).
func (d *Dispatcher) Append(c Context) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		select {
		case d.in <- c:
			return true
		default:
		}
	}
	d.dropped.Add(1)
	return false
}

// Stats are a dispatcher's counters.
type Stats struct {
	// Dropped records: the buffer was full or the dispatcher closed.
	Dropped int64
	// Sent and Failed count trace messages: stored, or lost (no route,
	// a refusal, a timeout).
	Sent, Failed int64
}

// Stats returns the counters.
func (d *Dispatcher) Stats() Stats {
	return Stats{Dropped: d.dropped.Load(), Sent: d.sent.Load(), Failed: d.failed.Load()}
}

// Flush sends the records queued before it and returns once they were
// sent (or lost), or ctx ends.
func (d *Dispatcher) Flush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case d.flush <- ack:
	case <-d.done:
		return errors.New("trace: dispatcher closed")
	case <-ctx.Done():
		return fmt.Errorf("trace: flush: %w", ctx.Err())
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("trace: flush: %w", ctx.Err())
	}
}

// Close sends what is queued (while ctx allows) and stops the goroutine;
// later records are dropped.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.stop)
	}
	d.mu.Unlock()
	select {
	case <-d.done:
		d.cancel()
		return nil
	case <-ctx.Done():
	}
	// Out of time: abandon the sends.
	d.cancel()
	<-d.done
	return fmt.Errorf("trace: close: %w", ctx.Err())
}

func (d *Dispatcher) loop() {
	defer close(d.done)
	defer d.cancel()
	batch := make([]Context, 0, d.o.batch)
	var linger *time.Timer
	var lingerC <-chan time.Time
	send := func() {
		if linger != nil {
			linger.Stop()
			lingerC = nil
		}
		if len(batch) > 0 {
			d.commit(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	drain := func() {
		for {
			select {
			case c := <-d.in:
				batch = append(batch, c)
				if len(batch) == d.o.batch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case c := <-d.in:
			batch = append(batch, c)
			if len(batch) >= d.o.batch {
				send()
			} else if lingerC == nil {
				if linger == nil {
					linger = time.NewTimer(d.o.linger)
				} else {
					linger.Reset(d.o.linger)
				}
				lingerC = linger.C
			}
		case <-lingerC:
			lingerC = nil
			send()
		case ack := <-d.flush:
			drain()
			close(ack)
		case <-d.stop:
			drain()
			return
		case <-d.c.Done():
			d.mu.Lock()
			d.closed = true
			d.mu.Unlock()
			return
		}
	}
}

// commit writes a batch as trace messages of at most o.maxBytes.
func (d *Dispatcher) commit(batch []Context) {
	var (
		body strings.Builder
		keys = map[string]bool{}
	)
	for i := range batch {
		data, ks := batch[i].Encode()
		if data == "" {
			continue
		}
		body.WriteString(data)
		for _, k := range ks {
			keys[k] = true
		}
		if body.Len() >= d.o.maxBytes {
			d.send(body.String(), keys)
			body.Reset()
			keys = map[string]bool{}
		}
	}
	if body.Len() > 0 {
		d.send(body.String(), keys)
	}
}

// send stores one trace message, counting the outcome.
func (d *Dispatcher) send(body string, keys map[string]bool) {
	ctx, cancel := context.WithTimeout(d.ctx, d.o.timeout)
	defer cancel()
	if err := d.sendOnce(ctx, body, keys); err != nil {
		d.failed.Add(1)
		d.warn("trace message lost", err)
		return
	}
	d.sent.Add(1)
}

// sendOnce stores one trace message on a queue of the trace topic, round
// robin, as SEND_MESSAGE_V2 of the trace producer group. The topic's
// route is the name servers' (never TBW102's, as the Go client's
// dispatcher): without broker.trace_topic_enable there is none.
func (d *Dispatcher) sendOnce(ctx context.Context, body string, keys map[string]bool) error {
	route := d.c.CachedPublishRoute(d.o.topic)
	if route == nil {
		r, err := d.c.FetchRoute(ctx, d.o.topic)
		if err != nil {
			return err
		}
		if len(r.Publish) == 0 {
			return fmt.Errorf("trace: topic %s: %w", d.o.topic, client.ErrNoRoute)
		}
		route = r
	}
	q := route.Publish[int(d.rr.Add(1)-1)%len(route.Publish)]
	addr, ok := d.c.BrokerAddr(q.BrokerName)
	if !ok {
		return fmt.Errorf("trace: %w: %s", client.ErrBrokerNotFound, q.BrokerName)
	}
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	props := message.Properties{message.PropertyKeys: strings.Join(ks, " "), message.PropertyUniqKey: client.NewUniqID()}
	ext := map[string]string{
		"a": ProducerGroup, "b": d.o.topic, "c": protocol.AutoCreateTopic, "d": strconv.Itoa(protocol.DefaultTopicQueueNum),
		"e": strconv.Itoa(q.QueueID), "f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0",
		"i": string(props.AppendEncoded(nil)), "j": "0", "k": "false", "l": "0", "m": "false", "n": q.BrokerName,
	}
	resp, err := d.c.Invoke(ctx, addr, client.NewRequest(remoting.SendMessageV2, ext, []byte(body)))
	if err != nil {
		return fmt.Errorf("trace: send to %s: %w", d.o.topic, err)
	}
	switch resp.Code {
	case remoting.Success, remoting.FlushDiskTimeout, remoting.FlushSlaveTimeout, remoting.SlaveNotAvailable:
		return nil
	case remoting.TopicNotExist:
		d.c.ForgetRoute(d.o.topic)
	}
	return fmt.Errorf("trace: send to %s: %w", d.o.topic, client.NewBrokerError(addr, resp))
}

// warn logs a lost trace message at most every 30 s.
func (d *Dispatcher) warn(msg string, err error) {
	now := time.Now().Unix()
	last := d.warned.Load()
	if now-last < 30 || !d.warned.CompareAndSwap(last, now) {
		d.log.Debug(msg, "err", err)
		return
	}
	d.log.Warn(msg, "err", err, "stats", d.Stats())
}
