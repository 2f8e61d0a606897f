package consumer

import (
	"time"

	"github.com/quivermq/quiver/client/trace"
)

// Model is the message model.
type Model int

// Message models.
const (
	// Clustering shares the group's queues among its consumers; offsets
	// are kept by the broker.
	Clustering Model = iota
	// Broadcasting gives every consumer every message; offsets are kept
	// in a local file.
	Broadcasting
)

func (m Model) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// From says where a group without a committed offset starts.
type From int

// Start positions.
const (
	FromLastOffset From = iota
	FromFirstOffset
	FromTimestamp
)

func (f From) String() string {
	switch f {
	case FromFirstOffset:
		return "CONSUME_FROM_FIRST_OFFSET"
	case FromTimestamp:
		return "CONSUME_FROM_TIMESTAMP"
	}
	return "CONSUME_FROM_LAST_OFFSET"
}

// Option configures a consumer.
type Option func(*options)

type options struct {
	model              Model
	from               From
	fromTime           time.Time
	orderly            bool
	goroutines         int
	batchSize          int
	pullBatchSize      int
	thresholdCount     int
	thresholdSize      int64
	maxSpan            int64
	maxReconsume       int
	retryDelayLevel    int
	suspendOrderly     time.Duration
	rebalanceInterval  time.Duration
	persistInterval    time.Duration
	lockInterval       time.Duration
	lockRetry          time.Duration
	routeRetry         time.Duration
	pullDelayOnError   time.Duration
	flowControlDelay   time.Duration
	offsetMovedDelay   time.Duration
	suspendTimeout     time.Duration
	pullTimeout        time.Duration
	offsetDir          string
	postSubscription   bool
	localRetryInterval time.Duration
	trace              *trace.Dispatcher // trace.go
}

func defaults() options {
	return options{
		model: Clustering, from: FromLastOffset, fromTime: time.Now().Add(-30 * time.Minute),
		goroutines: 20, batchSize: 1, pullBatchSize: 32,
		thresholdCount: 1000, thresholdSize: 100 << 20, maxSpan: 2000,
		maxReconsume: -1, suspendOrderly: time.Second,
		rebalanceInterval: 20 * time.Second, persistInterval: 5 * time.Second, lockInterval: 20 * time.Second, lockRetry: time.Second, routeRetry: 3 * time.Second,
		pullDelayOnError: 3 * time.Second, flowControlDelay: 50 * time.Millisecond, offsetMovedDelay: 10 * time.Second,
		suspendTimeout: 20 * time.Second, pullTimeout: 30 * time.Second, localRetryInterval: 5 * time.Second,
	}
}

// WithModel sets clustering (default) or broadcasting.
func WithModel(m Model) Option { return func(o *options) { o.model = m } }

// WithConsumeFrom sets where a group without committed offset starts
// (default FromLastOffset; brokers start young queues at 0 anyway).
func WithConsumeFrom(f From) Option { return func(o *options) { o.from = f } }

// WithConsumeTimestamp sets FromTimestamp's time (default 30 min ago).
func WithConsumeTimestamp(t time.Time) Option {
	return func(o *options) { o.from, o.fromTime = FromTimestamp, t }
}

// WithOrderly consumes each queue in order, one goroutine per queue,
// holding the broker's queue lock (LOCK_BATCH_MQ, renewed every 20 s).
func WithOrderly() Option { return func(o *options) { o.orderly = true } }

// WithConsumeGoroutines bounds concurrent handler calls (default 20;
// concurrent consumers only).
func WithConsumeGoroutines(n int) Option { return func(o *options) { o.goroutines = n } }

// WithConsumeBatchSize sets messages per handler call (default 1).
func WithConsumeBatchSize(n int) Option { return func(o *options) { o.batchSize = n } }

// WithPullBatchSize sets messages asked per pull (default 32).
func WithPullBatchSize(n int) Option { return func(o *options) { o.pullBatchSize = n } }

// WithPullThresholdForQueue pauses pulling a queue while it caches more
// messages (default 1000).
func WithPullThresholdForQueue(n int) Option { return func(o *options) { o.thresholdCount = n } }

// WithPullThresholdSizeForQueue pauses pulling a queue while its cached
// bodies exceed n bytes (default 100 MiB).
func WithPullThresholdSizeForQueue(n int64) Option { return func(o *options) { o.thresholdSize = n } }

// WithMaxSpan pauses pulling an orderly queue while its cached offsets
// span more than n (default 2000).
func WithMaxSpan(n int64) Option { return func(o *options) { o.maxSpan = n } }

// WithMaxReconsumeTimes sets how often a message is retried before it
// goes to the DLQ: concurrent default 16 (-1), orderly default unlimited
// (-1).
func WithMaxReconsumeTimes(n int) Option { return func(o *options) { o.maxReconsume = n } }

// WithRetryDelayLevel sets the delay level of send-backs (default 0: the
// broker uses 3 + reconsume times).
func WithRetryDelayLevel(n int) Option { return func(o *options) { o.retryDelayLevel = n } }

// WithSuspendCurrentQueueTime sets how long an orderly queue waits before
// retrying a failed batch locally (default 1 s).
func WithSuspendCurrentQueueTime(d time.Duration) Option {
	return func(o *options) { o.suspendOrderly = d }
}

// WithRebalanceInterval sets the periodic rebalance (default 20 s).
func WithRebalanceInterval(d time.Duration) Option {
	return func(o *options) { o.rebalanceInterval = d }
}

// WithPersistInterval sets the offset commit period (default 5 s).
func WithPersistInterval(d time.Duration) Option { return func(o *options) { o.persistInterval = d } }

// WithOffsetDir sets the directory of broadcasting offsets (default
// ~/.quiver_offsets/<clientId>/<group>).
func WithOffsetDir(dir string) Option { return func(o *options) { o.offsetDir = dir } }

// WithPullDelayOnError sets the wait after a failed pull (default 3 s).
func WithPullDelayOnError(d time.Duration) Option { return func(o *options) { o.pullDelayOnError = d } }

// WithOffsetMovedDelay sets the pause after PULL_OFFSET_MOVED before the
// queue is re-added at the broker's offset (default 10 s, as the official
// client).
func WithOffsetMovedDelay(d time.Duration) Option { return func(o *options) { o.offsetMovedDelay = d } }

// WithPostSubscriptionWhenPull sends the expression with every pull.
func WithPostSubscriptionWhenPull() Option { return func(o *options) { o.postSubscription = true } }
