// Package mirror copies topics from one Quiver cluster to another: an
// edge broker forwarding to a central cluster over a link that comes and
// goes, or a second datacenter kept ready for failover.
//
// A link follows a set of source topics (names or a pattern, optionally
// a TAG or SQL92 filter) through the source's name servers with Quiver's
// own client, over any transport the process has (TCP, QUIC, NATS), and
// writes each source queue into one target queue, in order, one batch in
// flight per queue. Messages keep their id (UNIQ_KEY), keys, tags,
// properties, born host and time, and due time; only committed
// transactional messages reach a topic, so only they are mirrored.
//
// Exactly once in steady state: the link's position in every source
// queue is checkpointed in the target (a snapshot message in the topic
// MIRROR_CHECKPOINT_<link>) after the writes it covers; a restart resumes
// from it, and the target broker refuses copies of a mirrored message id
// over a bounded window (modules/broker/mirror.go), so the batch replayed
// after a crash stores nothing twice. Every mirrored message carries its
// origin cluster, and a link never writes a message into the cluster it
// came from (active-active without loops). Committed offsets of chosen
// consumer groups are translated into the target (MirrorMaker 2's
// checkpoints): a group started there after a failover continues with
// at most one checkpoint interval of duplicates and nothing skipped.
//
// Memory is two batches per source queue (one written, the next
// pulled meanwhile): the source's store is the buffer while the target
// is unreachable (store and forward).
package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
)

// Deps are what a mirror needs from its process.
type Deps struct {
	// Dial opens connections to both clusters (a transport.Set's Dial,
	// or client/transports.Dialer()).
	Dial   client.DialFunc
	Logger *slog.Logger
}

// Service runs the links of a Config.
type Service struct {
	links []*link
	log   *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds the links of cfg; Start runs them.
func New(cfg *Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Dial == nil {
		return nil, errors.New("mirror: no dialer")
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{log: log.With("component", "mirror")}
	for _, lc := range cfg.Links {
		if len(lc.Source.Namesrv) == 0 {
			return nil, fmt.Errorf("mirror: link %s: source.namesrv is empty (only a broker fills it with its own name servers)", lc.Name)
		}
		l, err := newLink(lc, deps.Dial, s.log)
		if err != nil {
			for _, o := range s.links {
				o.close()
			}
			return nil, err
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

// Start runs every link in the background: a link whose clusters are
// unreachable keeps trying with backoff, so Start does not wait for them.
func (s *Service) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("mirror: already started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, l := range s.links {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.run(ctx)
		}()
	}
	return nil
}

// Stop stops the links, writes their last checkpoints (bounded by ctx)
// and closes their clients.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		s.wg.Wait()
	}
	var errs []error
	for _, l := range s.links {
		if cancel != nil {
			if err := l.finalCheckpoint(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		l.close()
	}
	return errors.Join(errs...)
}

// Status describes every link.
func (s *Service) Status() []LinkStatus {
	out := make([]LinkStatus, 0, len(s.links))
	for _, l := range s.links {
		out = append(out, l.status())
	}
	return out
}

// Link states (LinkStatus.State).
const (
	// StateStarting: the checkpoint is being read, or an end has not
	// answered yet.
	StateStarting = "starting"
	// StateRunning: both ends answered their last exchange.
	StateRunning = "running"
	// StateBackingOff: an end failed and the link retries with backoff
	// (100ms doubling up to max_backoff), for less than cutAfter so far.
	StateBackingOff = "backing off"
	// StateCut: an end has been failing for cutAfter or longer; read
	// from the target (Snapshot.StateAt), also a link whose checkpoint is
	// overdue (it cannot reach the target, or its process died).
	StateCut = "cut"
	// StateStopped: the link was stopped (its last checkpoint says so).
	StateStopped = "stopped"
)

// cutAfter is how long an end fails before the link counts as cut.
const cutAfter = 5 * time.Second

// LinkStatus is a link's state, as `mq admin mirror status` shows it.
type LinkStatus struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Target string `json:"target"`
	Up     bool   `json:"up"`
	// State is one of the State constants; Down names the failing end
	// (source or target) in backing off and cut.
	State         string  `json:"state,omitempty"`
	Down          string  `json:"down,omitempty"`
	CatchUp       string  `json:"catchUp,omitempty"`
	LastError     string  `json:"lastError,omitempty"`
	Mirrored      int64   `json:"mirrored"`
	LoopSkipped   int64   `json:"loopSkipped"`
	Reconnects    int64   `json:"reconnects"`
	CheckpointAge float64 `json:"checkpointAgeSeconds"`
	// Rate and ByteRate are messages and body bytes written per second
	// over the last 10 s.
	Rate     float64       `json:"rate"`
	ByteRate float64       `json:"byteRate"`
	Queues   []QueueStatus `json:"queues"`
	Topics   []TopicStatus `json:"topics"`
}

// TopicStatus is what a link wrote of one source topic.
type TopicStatus struct {
	Topic    string `json:"topic"`
	Messages int64  `json:"messages"`
	Bytes    int64  `json:"bytes"`
	// Rate is messages written per second over the last 10 s.
	Rate float64 `json:"rate"`
}

// QueueStatus is one source queue of a link.
type QueueStatus struct {
	Topic     string `json:"topic"`
	Broker    string `json:"broker"`
	Queue     int    `json:"queue"`
	Next      int64  `json:"next"`
	MaxOffset int64  `json:"maxOffset"`
	// LagMessages is what the link has yet to write: the offsets from
	// Next to MaxOffset and those of the gaps behind Next (GapMessages).
	LagMessages  int64   `json:"lagMessages"`
	GapMessages  int64   `json:"gapMessages,omitempty"`
	LagSeconds   float64 `json:"lagSeconds"`
	TargetBroker string  `json:"targetBroker"`
	TargetQueue  int     `json:"targetQueue"`
}

func sortQueues(qs []QueueStatus) {
	slices.SortFunc(qs, func(a, b QueueStatus) int {
		if a.Topic != b.Topic {
			return cmpStr(a.Topic, b.Topic)
		}
		if a.Broker != b.Broker {
			return cmpStr(a.Broker, b.Broker)
		}
		return a.Queue - b.Queue
	})
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CheckpointTopic is the topic of link name's checkpoints in the target.
func CheckpointTopic(name string) string { return "MIRROR_CHECKPOINT_" + name }

// Group is the consumer and producer group a link uses in both clusters.
func Group(name string) string { return "MIRROR_" + name }

func wrap(op string, err error) error { return fmt.Errorf("mirror: %s: %w", op, err) }
