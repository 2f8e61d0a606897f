package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/core/remoting"
)

// Snapshot is a link's checkpoint: where it is in every source queue,
// with the offset pairs that translate consumer offsets. It is the body
// of the last message of the link's checkpoint topic in the target; the
// newest one (by Time) of the topic's brokers wins.
type Snapshot struct {
	Version int    `json:"version"`
	Link    string `json:"link"`
	// Time is when it was written (epoch ms).
	Time          int64  `json:"time"`
	SourceCluster string `json:"sourceCluster,omitempty"`
	TargetCluster string `json:"targetCluster,omitempty"`
	Mirrored      int64  `json:"mirrored"`
	// IntervalMs is the link's checkpoint_interval: a checkpoint much
	// older than it is overdue (StateAt).
	IntervalMs int64       `json:"intervalMs,omitempty"`
	Queues     []QueueCkpt `json:"queues"`
	Groups     []GroupCkpt `json:"groups,omitempty"`
	Status     *LinkStatus `json:"status,omitempty"`
}

// QueueCkpt is one source queue's position.
type QueueCkpt struct {
	Topic  string `json:"topic"`
	Broker string `json:"broker"`
	Queue  int    `json:"queue"`
	// Next is the first source offset not yet known to be in the target.
	Next      int64  `json:"next"`
	MaxOffset int64  `json:"maxOffset"`
	DstBroker string `json:"dstBroker,omitempty"`
	DstQueue  int    `json:"dstQueue"`
	Pairs     []pair `json:"pairs,omitempty"`
	// Gaps are ranges before Next not yet all in the target (catch_up
	// newest_first), oldest first.
	Gaps []Gap `json:"gaps,omitempty"`
}

// Lag is the messages of the queue the link had yet to write: from Next
// to MaxOffset, and the gaps.
func (q QueueCkpt) Lag() int64 { return max(0, q.MaxOffset-q.Next) + gapMessages(q.Gaps) }

// Overdue is how old a checkpoint gets before its link counts as cut:
// three checkpoint intervals, at least 5 s.
func (s *Snapshot) Overdue() time.Duration {
	return max(3*time.Duration(s.IntervalMs)*time.Millisecond, cutAfter)
}

// StateAt is the link's state as the target sees it at now: the state its
// checkpoint recorded, or cut when the checkpoint is overdue (the link
// cannot reach the target, or its process is gone) and the link was not
// stopped.
func (s *Snapshot) StateAt(now time.Time) string {
	st := StateRunning
	if s.Status != nil && s.Status.State != "" {
		st = s.Status.State
	} else if s.Status != nil && !s.Status.Up {
		st = StateBackingOff
	}
	if st != StateStopped && now.Sub(time.UnixMilli(s.Time)) > s.Overdue() {
		return StateCut
	}
	return st
}

// GroupCkpt is a translated offset written to the target.
type GroupCkpt struct {
	Group  string `json:"group"`
	Topic  string `json:"topic"`
	Broker string `json:"broker"`
	Queue  int    `json:"queue"`
	Offset int64  `json:"offset"`
}

func (p pair) MarshalJSON() ([]byte, error) {
	return []byte("[" + strconv.FormatInt(p.Src, 10) + "," + strconv.FormatInt(p.Dst, 10) + "]"), nil
}

func (p *pair) UnmarshalJSON(b []byte) error {
	var v [2]int64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p.Src, p.Dst = v[0], v[1]
	return nil
}

// snapshot captures the link's state.
func (l *link) snapshot() *Snapshot {
	s := &Snapshot{Version: 1, Link: l.cfg.Name, Time: time.Now().UnixMilli(), Mirrored: l.mirrored.Load(), IntervalMs: l.cfg.CheckpointInterval.Milliseconds()}
	if p := l.sourceCluster.Load(); p != nil {
		s.SourceCluster = *p
	}
	if p := l.targetCluster.Load(); p != nil {
		s.TargetCluster = *p
	}
	l.mu.Lock()
	for _, q := range l.queues {
		q.mu.Lock()
		if q.known {
			s.Queues = append(s.Queues, QueueCkpt{Topic: q.src.Topic, Broker: q.src.BrokerName, Queue: q.src.QueueID, Next: q.next,
				MaxOffset: q.maxOff, DstBroker: q.dst.BrokerName, DstQueue: q.dst.QueueID, Pairs: append([]pair(nil), q.pairs...),
				Gaps: slices.Clone(q.gaps)})
		}
		q.mu.Unlock()
	}
	for gq, off := range l.groups {
		s.Groups = append(s.Groups, GroupCkpt{Group: gq.group, Topic: gq.mq.Topic, Broker: gq.mq.BrokerName, Queue: gq.mq.QueueID, Offset: off})
	}
	l.mu.Unlock()
	sort.Slice(s.Queues, func(i, j int) bool {
		a, b := s.Queues[i], s.Queues[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Broker != b.Broker {
			return a.Broker < b.Broker
		}
		return a.Queue < b.Queue
	})
	st := l.status()
	st.Queues = nil
	s.Status = &st
	return s
}

// ReadCheckpoint returns the newest snapshot of link name in the cluster
// c reaches, nil when there is none.
func ReadCheckpoint(ctx context.Context, c *client.Client, name string) (*Snapshot, error) {
	topic := CheckpointTopic(name)
	r, err := c.FetchRoute(ctx, topic)
	if errors.Is(err, client.ErrNoRoute) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: checkpoint route: %w", err)
	}
	p, err := consumer.NewPull(c, Group(name))
	if err != nil {
		return nil, err
	}
	var best *Snapshot
	for _, mq := range r.Subscribe {
		if mq.QueueID != 0 {
			continue
		}
		maxOff, err := p.MaxOffset(ctx, mq)
		if err != nil {
			return nil, fmt.Errorf("mirror: checkpoint offset: %w", err)
		}
		if maxOff == 0 {
			continue
		}
		res, err := p.Pull(ctx, mq, consumer.All(), maxOff-1, 1)
		if err != nil {
			return nil, fmt.Errorf("mirror: read checkpoint: %w", err)
		}
		for _, m := range res.Messages {
			var s Snapshot
			if err := json.Unmarshal(m.Body, &s); err != nil {
				return nil, fmt.Errorf("mirror: checkpoint at %s:%d: %w", mq, m.QueueOffset, err)
			}
			if best == nil || s.Time > best.Time {
				best = &s
			}
		}
	}
	return best, nil
}

// loadCheckpoint reads the link's newest snapshot (creating the
// checkpoint topic when it is missing) and sets the queues' positions.
func (l *link) loadCheckpoint(ctx context.Context) error {
	s, err := ReadCheckpoint(ctx, l.dst, l.cfg.Name)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s != nil {
		for _, qc := range s.Queues {
			src := client.MessageQueue{Topic: qc.Topic, BrokerName: qc.Broker, QueueID: qc.Queue}
			q := &queueState{src: src, next: qc.Next, known: true, maxOff: qc.MaxOffset, pairs: qc.Pairs, gaps: qc.Gaps,
				dst: client.MessageQueue{Topic: qc.Topic, BrokerName: qc.DstBroker, QueueID: qc.DstQueue}, hasDst: qc.DstBroker != ""}
			l.queues[src] = q
		}
		for _, g := range s.Groups {
			l.groups[groupQueue{g.Group, client.MessageQueue{Topic: g.Topic, BrokerName: g.Broker, QueueID: g.Queue}}] = g.Offset
		}
		if s.Status != nil {
			l.mirrored.Store(s.Status.Mirrored)
			l.reconnects.Store(s.Status.Reconnects)
			l.loopSkipped.Store(s.Status.LoopSkipped)
		}
		l.log.Info("mirror: resuming from the checkpoint", "queues", len(s.Queues), "written", time.UnixMilli(s.Time).UTC())
	}
	l.loaded = true
	return nil
}

// writeCheckpoint sends the snapshot to the checkpoint topic.
func (l *link) writeCheckpoint(ctx context.Context) error {
	s := l.snapshot()
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	topic := CheckpointTopic(l.cfg.Name)
	r, err := l.dst.FetchRoute(ctx, topic)
	if errors.Is(err, client.ErrNoRoute) || err == nil && len(r.Publish) == 0 {
		if err := admin.New(l.dst).CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1}); err != nil {
			return err
		}
		r, err = l.waitRoute(ctx, topic)
	}
	if err != nil {
		return err
	}
	var mq client.MessageQueue
	found := false
	for _, q := range r.Publish {
		if q.QueueID == 0 {
			mq, found = q, true
			break
		}
	}
	if !found {
		return fmt.Errorf("no queue 0 of %s in the target", topic)
	}
	addr, ok := l.dst.BrokerAddr(mq.BrokerName)
	if !ok {
		return fmt.Errorf("target broker %s: %w", mq.BrokerName, client.ErrBrokerNotFound)
	}
	req := client.NewRequest(remoting.SendMessageV2, map[string]string{
		"a": Group(l.cfg.Name), "b": topic, "c": "TBW102", "d": "1", "e": "0", "f": "0",
		"g": strconv.FormatInt(s.Time, 10), "h": "0", "i": "KEYS\x01" + l.cfg.Name + "\x02", "j": "0", "k": "false", "l": "0", "m": "false", "n": mq.BrokerName,
	}, body)
	resp, err := l.dst.Invoke(ctx, addr, req)
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success && resp.Code != remoting.FlushSlaveTimeout && resp.Code != remoting.SlaveNotAvailable {
		return client.NewBrokerError(addr, resp)
	}
	l.mu.Lock()
	l.ckptAt = time.Now()
	l.mu.Unlock()
	return nil
}

// finalCheckpoint writes the positions a stopping link reached.
func (l *link) finalCheckpoint(ctx context.Context) error {
	if !l.isLoaded() {
		return nil
	}
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	if err := l.writeCheckpoint(ctx); err != nil {
		return wrap("link "+l.cfg.Name+": last checkpoint", err)
	}
	return nil
}

// translateGroups writes, for each configured group, the target offsets
// its committed source offsets translate to (at most one batch before
// the true position: duplicates, never a skip). An offset is only ever
// moved forward, so a group already consuming in the target is not
// sent back.
func (l *link) translateGroups(ctx context.Context) {
	l.mu.Lock()
	qs := make([]*queueState, 0, len(l.queues))
	for _, q := range l.queues {
		qs = append(qs, q)
	}
	l.mu.Unlock()
	for _, g := range l.cfg.Groups {
		srcC, err := consumer.NewPull(l.src, g)
		if err != nil {
			continue
		}
		dstC, err := consumer.NewPull(l.dst, g)
		if err != nil {
			continue
		}
		want := map[client.MessageQueue]int64{}
		blocked := map[client.MessageQueue]bool{}
		for _, q := range qs {
			q.mu.Lock()
			src, dst, hasDst, pairs := q.src, q.dst, q.hasDst, append([]pair(nil), q.pairs...)
			q.mu.Unlock()
			if !hasDst {
				continue
			}
			c, err := srcC.CommittedOffset(ctx, src)
			if err != nil || c < 0 {
				// Unknown: a target queue fed by several source queues
				// must wait for all of them (the smallest wins).
				blocked[dst] = true
				continue
			}
			t, ok := translate(pairs, c)
			if !ok {
				blocked[dst] = true
				continue
			}
			if old, seen := want[dst]; !seen || t < old {
				want[dst] = t
			}
		}
		for dst, t := range want {
			if blocked[dst] || ctx.Err() != nil {
				continue
			}
			key := groupQueue{g, dst}
			l.mu.Lock()
			prev, had := l.groups[key]
			l.mu.Unlock()
			if had && t <= prev {
				continue
			}
			cur, err := dstC.CommittedOffset(ctx, dst)
			if err != nil {
				continue
			}
			if cur >= t {
				continue
			}
			if err := dstC.CommitOffset(ctx, dst, t); err != nil {
				l.log.Warn("mirror: write a translated offset", "group", g, "queue", dst.String(), "err", err)
				continue
			}
			l.mu.Lock()
			l.groups[key] = t
			l.mu.Unlock()
		}
	}
}
