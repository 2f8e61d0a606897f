package grpc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/pop"
)

// Lite topics (RocketMQ 5.5, RIP-83), over gRPC. Apache RocketMQ's Java
// sources this endpoint was checked against predate 5.5: what is here
// follows the rocketmq-apis proto (MessageType.LITE, SystemProperties.
// lite_topic, SyncLiteSubscription, OffsetOption, NotifyUnsubscribeLite
// Command) and RIP-83's public description, not the Java proxy.
//
//   - A parent topic has message.type LITE (`mq admin updateTopic -t T
//     -a +message.type=LITE`). A message sent to it names its lite topic
//     in lite_topic; the lite topic is made on its first send or
//     subscription (ILLEGAL_LITE_TOPIC for a bad name or a lite_topic on
//     another topic, LITE_TOPIC_QUOTA_EXCEEDED past grpc.lite.topic_quota).
//   - A lite topic is one ordered stream: its messages get lite offsets
//     0, 1, 2, ... and a group reads them in that order, one run of
//     messages in flight at a time; a run not acked within its invisible
//     time goes out again from its first unacked message.
//   - A consumer subscribes with SyncLiteSubscription, from the position
//     its OffsetOption names (LAST: the group's committed offset, else the
//     first retained message; MIN; MAX; an offset; tail_n; a timestamp);
//     each lite topic has one reader per group: a new subscriber takes it
//     over and the previous one gets NotifyUnsubscribeLiteCommand.
//   - ReceiveMessage on the parent hands out messages of the client's lite
//     topics (queue_offset is the lite offset); AckMessage and
//     ChangeInvisibleDuration name the lite topic; the group's committed
//     offset is journalled (fsynced) before the ack answers.
//   - A lite topic nothing was sent to for grpc.lite.ttl is deleted, a
//     bounded number per sweep tick, and its readers are notified.

func init() {
	for _, p := range []string{propLiteTopic, propLiteOffset} {
		reserved[p] = true
		systemProps[p] = true
	}
}

// liteSweepEvery is the TTL sweep's tick.
const liteSweepEvery = time.Second

// startLite builds the lite index from its snapshot, the LITE parent
// topics' queues and the journal, and starts the TTL sweep. Called by
// Start.
func (s *Server) startLite(ctx context.Context) error {
	if s.lite != nil {
		return nil
	}
	x := newLiteIndex(s.cfg.Lite)
	start := time.Now()
	live, jr, err := s.rebuildLite(ctx, x)
	if err != nil {
		return err
	}
	if dir := s.b.DataDir(); dir != "" {
		// Rewritten with what is live, unless all of it is: a million
		// lite topics acked once each are a million live records, and
		// copying them would double the start's work on the journal.
		if jr.reuse {
			x.j, err = reopenLiteJournal(filepath.Join(dir, "lite"), jr.good)
		} else {
			x.j, err = openLiteJournal(filepath.Join(dir, "lite"), live)
		}
		if err != nil {
			return err
		}
	} else {
		s.log.Warn("grpc: no data directory: lite topic consumer offsets are not kept across restarts")
	}
	x.snapAt = time.Now()
	s.lite = x
	s.log.Info("grpc: lite topics loaded", "topics", len(x.all), "took", time.Since(start))
	s.wg.Add(1)
	go s.sweepLite()
	return nil
}

// liteParentQueues lists the queues of the LITE parent topics.
func liteParentQueues(topics map[string]*protocol.TopicConfig) []store.Queue {
	var queues []store.Queue
	for _, tc := range topics {
		if tc.Attributes[protocol.AttrMessageType] == protocol.MessageTypeLite {
			for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
				queues = append(queues, store.Queue{Topic: tc.TopicName, ID: q})
			}
		}
	}
	return queues
}

// liteJournalRead is what a start read of the journal: its whole records
// and where they end.
type liteJournalRead struct {
	records int
	good    int64
	reuse   bool // every record is live: the journal is kept as it is
}

// rebuildLite fills x: deletions and consumer offsets from the journal,
// lite topics from the snapshot (lite_snapshot.go) and the records of the
// LITE parent topics after it — all their records when there is no
// snapshot to use. It answers the journal's live records.
func (s *Server) rebuildLite(ctx context.Context, x *liteIndex) ([]liteRecord, liteJournalRead, error) {
	start := time.Now()
	var jr liteJournalRead
	// First the deletions alone (the snapshot and the records are read
	// through them); the groups' offsets are applied to the index once it
	// is built, by a second pass over the journal.
	deleted := map[liteKey]int64{}
	nD := 0
	dir := s.b.DataDir()
	jpath := ""
	if dir != "" {
		jpath = filepath.Join(dir, "lite", "lite.journal")
		var err error
		if jr.good, err = scanLiteJournal(jpath, func(kind byte, parent string, name []byte, _ string, value int64) {
			jr.records++
			if kind == liteRecDelete {
				nD++
				k := liteKey{parent, string(name)}
				deleted[k] = max(deleted[k], value)
			}
		}); err != nil {
			return nil, jr, err
		}
	}
	tJournal := time.Now()
	used := map[liteKey]bool{}
	now := time.Now().UnixMilli()
	st := s.b.Store()
	queues := s.liteQueues()
	spans := make(map[store.Queue]liteSpan, len(queues))
	for _, q := range queues {
		lo, hi, err := st.Offsets(q)
		if err != nil {
			return nil, jr, fmt.Errorf("lite: offsets of %s: %w", q, err)
		}
		spans[q] = liteSpan{lo, hi}
	}
	// The snapshot, if there is one to use: only the records after it are
	// read.
	var from map[store.Queue]int64
	snapshot := false
	if dir != "" {
		path := filepath.Join(dir, "lite", liteSnapshotFile)
		var n int
		var err error
		from, n, err = s.loadLiteSnapshot(ctx, path, x, spans, deleted, used)
		switch {
		case err == nil:
			snapshot = true
			s.log.Info("grpc: lite snapshot loaded", "topics", n, "took", time.Since(tJournal))
		case errors.Is(err, os.ErrNotExist):
			s.log.Info("grpc: no lite snapshot: the lite index is rebuilt from the parent topics")
		default:
			s.log.Warn("grpc: lite snapshot not used: the lite index is rebuilt from the parent topics", "path", path, "reason", err)
		}
		x.loaded.snapshot = snapshot
		if !snapshot {
			x.loaded.reason = err.Error()
			x.reset()
			from = nil
			clear(used)
			x.snapChanges = ^uint64(0) // written at the first sweep
		}
	}
	// The parent queues are read and decoded by a few workers, a queue
	// each at a time; the index is filled here, each queue's records in
	// order (a lite topic lives in one queue).
	type found struct {
		name         string
		lite, cl, at int64
	}
	type batch struct {
		parent string
		recs   []found
		dead   []liteKey // records of deleted lite topics met
	}
	type span struct {
		q      store.Queue
		lo, hi int64
	}
	var work []span
	var records int64
	for q, sp := range spans {
		lo := sp.lo
		if p, ok := from[q]; ok {
			lo = max(lo, p)
		}
		if lo < sp.hi {
			work = append(work, span{q, lo, sp.hi})
			records += sp.hi - lo
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workc := make(chan span)
	out := make(chan batch, 4)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(work), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rr store.ReadResult
			m, props := &message.Ext{}, message.Properties{} // reused: a million records decode without garbage
			for sq := range workc {
				for off := sq.lo; off < sq.hi; {
					rr.Reset()
					if err := st.Read(ctx, sq.q, off, store.ReadOptions{MaxMessages: 1024, MaxBytes: 8 << 20}, &rr); err != nil {
						select {
						case errc <- fmt.Errorf("lite: read %s at %d: %w", sq.q, off, err):
						default:
						}
						cancel()
						return
					}
					b := batch{parent: sq.q.Topic, recs: make([]found, 0, len(rr.Records))}
					for _, rec := range rr.Records {
						if _, err := message.DecodeStoredInto(rec, m, sq.q.Topic, props); err != nil {
							continue
						}
						name := m.Properties[propLiteTopic]
						lo, err := strconv.ParseInt(m.Properties[propLiteOffset], 10, 64)
						if name == "" || err != nil {
							continue
						}
						k := liteKey{sq.q.Topic, name}
						if d, ok := deleted[k]; ok && m.CommitLogOffset <= d {
							b.dead = append(b.dead, liteKey{sq.q.Topic, strings.Clone(name)})
							continue
						}
						b.recs = append(b.recs, found{name: strings.Clone(name), lite: lo, cl: m.CommitLogOffset, at: m.StoreTimestamp})
					}
					select {
					case out <- b:
					case <-ctx.Done():
						return
					}
					if rr.NextOffset <= off {
						break
					}
					off = rr.NextOffset
				}
			}
		}()
	}
	go func() {
		defer close(workc)
		for _, q := range work {
			select {
			case workc <- q:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(out) }()
	var ierr error
	for b := range out {
		if ierr != nil {
			continue // drain
		}
		for _, k := range b.dead {
			used[k] = true
		}
		for _, f := range b.recs {
			t, err := x.ensure(b.parent, f.name, f.at)
			if err != nil {
				ierr = fmt.Errorf("lite: rebuild %s: %w", b.parent, err)
				cancel()
				break
			}
			x.add(t, f.lite, f.cl, f.at) // a message the snapshot has is not added again
		}
	}
	select {
	case err := <-errc:
		return nil, jr, err
	default:
	}
	if ierr != nil {
		return nil, jr, ierr
	}
	// A deletion stays in the journal while records of the deleted topic
	// may remain: the ones met, and after a snapshot (which spared reading
	// what is before it) any at or after the oldest record of its parent.
	var oldest map[string]int64
	if snapshot {
		oldest = map[string]int64{}
		var rr store.ReadResult
		for q, sp := range spans {
			if sp.lo >= sp.hi {
				continue
			}
			cl, err := recordAt(ctx, st, q, sp.lo, &rr)
			if err != nil {
				return nil, jr, fmt.Errorf("lite: %w", err)
			}
			if o, ok := oldest[q.Topic]; !ok || cl < o {
				oldest[q.Topic] = cl
			}
		}
	}
	var keepD []liteKey
	for k, b := range deleted {
		keep := used[k]
		if o, ok := oldest[k.parent]; ok && b >= o {
			keep = true
		}
		if keep {
			keepD = append(keepD, k)
		}
	}
	tRecords := time.Now()
	// The groups' offsets, in journal order: an offset after a deletion of
	// its lite topic belongs to the one made again, those before it to the
	// deleted one. A lite topic only offsets name (retention emptied it)
	// is made, and goes on from its readers' offsets.
	superseded := 0 // offset records a later one replaced
	var made map[*liteTopic]bool
	if jpath != "" && jr.records > nD {
		if _, err := scanLiteJournal(jpath, func(kind byte, parent string, name []byte, group string, value int64) {
			var t *liteTopic
			if p := x.parents[parent]; p != nil {
				t = p.topics[string(name)]
			}
			switch kind {
			case liteRecDelete:
				if t == nil {
					return
				}
				for _, g := range t.groups {
					if g.committed >= 0 {
						superseded++
					}
				}
				if made[t] {
					delete(made, t)
					x.remove(t)
				} else {
					t.groups = nil
				}
			case liteRecOffset:
				if t == nil {
					t, _ = x.ensure(parent, string(name), now)
					if t == nil {
						superseded++ // over the quota: dropped
						return
					}
					if made == nil {
						made = map[*liteTopic]bool{}
					}
					made[t] = true
				}
				g := x.groupOf(t, group)
				if g.committed >= 0 {
					superseded++
				}
				g.committed = value
			}
		}); err != nil {
			return nil, jr, err
		}
	}
	for t := range made {
		for _, g := range t.groups {
			t.base = max(t.base, g.committed)
		}
	}
	// The live records, unless every record of the journal is live (it is
	// then kept as it is).
	var live []liteRecord
	jr.reuse = jr.records > 0 && superseded == 0 && len(keepD) == nD
	if !jr.reuse {
		live = make([]liteRecord, 0, len(keepD)+jr.records-nD-superseded)
		for _, k := range keepD {
			live = append(live, liteRecord{kind: liteRecDelete, parent: k.parent, name: k.name, value: deleted[k]})
		}
		for _, t := range x.all {
			for _, g := range t.groups {
				if g.committed >= 0 {
					live = append(live, liteRecord{kind: liteRecOffset, parent: t.parent.name, name: t.name, group: g.group, value: g.committed})
				}
			}
		}
	}
	s.log.Info("grpc: lite index built", "journal_records", jr.records, "journal_kept", jr.reuse,
		"journal", tJournal.Sub(start), "snapshot_and_records", tRecords.Sub(tJournal), "offsets", time.Since(tRecords))
	x.loaded.records = records
	s.log.Info("grpc: lite parent records read", "records", records, "after_snapshot", snapshot)
	return live, jr, nil
}

// sweepLite deletes expired lite topics each tick, a bounded number at a
// time, and tells their readers; it compacts the journal and writes the
// snapshot when they are due.
func (s *Server) sweepLite() {
	defer s.wg.Done()
	tick := time.NewTimer(liteSweepEvery)
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	buf := make([]liteExpired, 0, s.cfg.Lite.SweepBatch)
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			var more bool
			_, more, buf = s.sweepLiteOnce(buf)
			if s.lite.j.needsCompaction() {
				s.compactLite()
			}
			if s.liteSnapshotDue() {
				if err := s.snapshotLite(ctx, s.done); err != nil && !errors.Is(err, errLiteSnapshotStop) {
					s.log.Warn("grpc: lite snapshot not written", "err", err)
					s.lite.mu.Lock()
					s.lite.snapAt = time.Now() // tried again later
					s.lite.mu.Unlock()
				}
			}
			// A backlog of expired lite topics is swept in short holds
			// close together rather than in one long one.
			if more {
				tick.Reset(liteSweepAgain)
			} else {
				tick.Reset(liteSweepEvery)
			}
		}
	}
}

// liteSweepAgain is how soon a sweep cut short is followed by the next.
const liteSweepAgain = 10 * time.Millisecond

// liteSnapshotDue says whether the index changed enough, or long enough
// ago, for a snapshot. Called by the sweep.
func (s *Server) liteSnapshotDue() bool {
	x := s.lite
	if s.b.DataDir() == "" {
		return false
	}
	x.mu.Lock()
	changed := x.changes - x.snapChanges
	if x.snapChanges == ^uint64(0) {
		changed = ^uint64(0) // never written since the full rebuild
	}
	since := time.Since(x.snapAt)
	x.mu.Unlock()
	if changed == 0 {
		return false
	}
	return changed >= uint64(s.cfg.Lite.SnapshotChanges) && since >= liteSnapshotRetry ||
		s.cfg.Lite.SnapshotInterval > 0 && since >= s.cfg.Lite.SnapshotInterval
}

// liteSnapshotRetry is the least time between two snapshots due to
// changes (one that failed included).
var liteSnapshotRetry = 10 * time.Second

// sweepLiteOnce is one tick of the sweep, the expired lite topics
// collected into buf (kept by the caller, emptied again): it answers how
// long the index was held and whether expired lite topics may be left.
func (s *Server) sweepLiteOnce(buf []liteExpired) (time.Duration, bool, []liteExpired) {
	x := s.lite
	x.mu.Lock()
	start := time.Now()
	gone, more := x.sweep(start.UnixMilli(), buf[:0])
	held := time.Since(start)
	x.mu.Unlock()
	if len(gone) == 0 {
		return held, more, gone
	}
	var recs []liteRecord
	for _, e := range gone {
		if e.boundary >= 0 {
			recs = append(recs, liteRecord{kind: liteRecDelete, parent: e.parent, name: e.name, value: e.boundary})
		}
	}
	if err := x.j.append(recs); err != nil {
		// The deletions come back at the next start and expire again.
		s.log.Warn("grpc: lite topic deletions not journalled", "err", err)
	}
	for _, e := range gone {
		for _, c := range e.owners {
			s.notifyUnsubscribeLite(c.key.client, e.name)
		}
	}
	s.log.Debug("grpc: lite topics expired", "count", len(gone))
	clear(gone) // the names and readers go with their topics
	return held, more, gone
}

// compactLite rewrites the lite journal while serving, the index held for
// one chunk of lite topics at a time. It runs on the sweep's goroutine, so
// no lite topic is removed (x.all reordered) meanwhile.
func (s *Server) compactLite() {
	x := s.lite
	start := time.Now()
	next := 0
	err := x.j.compact(func() []liteRecord {
		x.mu.Lock()
		defer x.mu.Unlock()
		if next >= len(x.all) {
			return nil
		}
		recs := []liteRecord{}
		end := min(next+x.cfg.SweepBatch, len(x.all))
		for _, t := range x.all[next:end] {
			for _, g := range t.groups {
				if g.committed >= 0 {
					recs = append(recs, liteRecord{kind: liteRecOffset, parent: t.parent.name, name: t.name, group: g.group, value: g.committed})
				}
			}
		}
		next = end
		return recs
	})
	if err != nil {
		s.log.Warn("grpc: lite journal not compacted", "err", err)
		return
	}
	s.log.Info("grpc: lite journal compacted", "topics", next, "took", time.Since(start))
}

// notifyUnsubscribeLite tells a client on its Telemetry streams that it
// no longer reads lite topic name.
func (s *Server) notifyUnsubscribeLite(clientID, name string) {
	cmd := &grpcapi.TelemetryCommand{Status: ok(), Command: &grpcapi.TelemetryCommand_NotifyUnsubscribeLiteCommand{
		NotifyUnsubscribeLiteCommand: &grpcapi.NotifyUnsubscribeLiteCommand{LiteTopic: name}}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ts := range s.streams {
		if ts.client != clientID {
			continue
		}
		select {
		case ts.out <- cmd:
		default:
			s.log.Debug("grpc: lite unsubscribe notice dropped: the client's stream queue is full", "client", clientID, "lite_topic", name)
		}
	}
}

// liteBuild checks a message's lite topic (called by build): it answers
// whether the message is a lite one, its name put in props.
func (s *Server) liteBuild(tc *protocol.TopicConfig, sp *grpcapi.SystemProperties, props message.Properties) *sendError {
	isLite := tc.Attributes[protocol.AttrMessageType] == protocol.MessageTypeLite
	if sp.LiteTopic == nil && sp.GetMessageType() != grpcapi.MessageType_LITE {
		return nil // a LITE parent refuses it as another type (msgtype.go)
	}
	if !isLite {
		return refuse(grpcapi.Code_ILLEGAL_LITE_TOPIC, "topic %s is not a LITE topic (message.type=LITE): it takes no lite topic", tc.TopicName)
	}
	if err := validLiteName(sp.GetLiteTopic(), s.cfg.Lite.MaxNameLength); err != nil {
		return refuse(grpcapi.Code_ILLEGAL_LITE_TOPIC, "%v", err)
	}
	if sp.MessageGroup != nil || sp.DeliveryTimestamp != nil {
		return refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a lite message has no message group or delivery timestamp")
	}
	switch sp.GetMessageType() {
	case grpcapi.MessageType_LITE:
	case grpcapi.MessageType_NORMAL, grpcapi.MessageType_MESSAGE_TYPE_UNSPECIFIED:
		sp.MessageType = grpcapi.MessageType_LITE
	default:
		return refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a %v message has no lite topic", sp.GetMessageType())
	}
	props[propLiteTopic] = sp.GetLiteTopic()
	return nil
}

// liteQueue is the parent queue of a lite topic.
func liteQueue(name string, queues int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32() % uint32(queues))
}

// put stores one message: a lite one through the lite index.
func (s *Server) put(ctx context.Context, ext *message.Ext) ([]store.Position, error) {
	name := ext.Properties[propLiteTopic]
	if name == "" || s.lite == nil {
		return s.b.Put(ctx, []*message.Ext{ext})
	}
	x := s.lite
	parent := ext.Topic
	mu := x.stripe(parent, name)
	mu.Lock()
	defer mu.Unlock()
	now := time.Now().UnixMilli()
	x.mu.Lock()
	t, err := x.ensure(parent, name, now)
	var off int64
	if err == nil {
		t.last = now
		off = t.next()
	}
	x.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ext.Properties[propLiteOffset] = strconv.FormatInt(off, 10)
	pos, err := s.b.Put(ctx, []*message.Ext{ext})
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	if x.get(parent, name) == t {
		x.add(t, off, pos[0].CommitLogOffset, now)
	}
	x.mu.Unlock()
	return pos, nil
}

// liteSendError maps a lite put refusal to its status; nil for others.
func liteSendError(err error) *sendError {
	if errors.Is(err, errLiteQuota) {
		return refuse(grpcapi.Code_LITE_TOPIC_QUOTA_EXCEEDED, "%v", err)
	}
	return nil
}

// liteSettings completes a lite consumer's settings with its quotas.
func (s *Server) liteSettings(st *grpcapi.Settings) {
	sub := st.GetSubscription()
	if sub == nil {
		return
	}
	switch st.GetClientType() {
	case grpcapi.ClientType_LITE_PUSH_CONSUMER, grpcapi.ClientType_LITE_SIMPLE_CONSUMER:
		sub.LiteSubscriptionQuota = proto.Int32(int32(s.cfg.Lite.SubscriptionQuota))
		sub.MaxLiteTopicSize = proto.Int32(int32(s.cfg.Lite.MaxNameLength))
	}
}

// liteParentTopic looks up a LITE parent topic for a lite RPC.
func (s *Server) liteParentTopic(r *grpcapi.Resource) (*protocol.TopicConfig, *grpcapi.Status) {
	tc, st := s.topic(r)
	if st != nil {
		return nil, st
	}
	if tc.Attributes[protocol.AttrMessageType] != protocol.MessageTypeLite {
		return nil, status(grpcapi.Code_ILLEGAL_LITE_TOPIC, "topic "+tc.TopicName+" is not a LITE topic (message.type=LITE)")
	}
	return tc, nil
}

// SyncLiteSubscription adds or removes lite topics of the calling
// client's subscription in a group of a LITE parent topic.
func (s *Server) SyncLiteSubscription(ctx context.Context, req *grpcapi.SyncLiteSubscriptionRequest) (*grpcapi.SyncLiteSubscriptionResponse, error) {
	answer := func(st *grpcapi.Status) (*grpcapi.SyncLiteSubscriptionResponse, error) {
		return &grpcapi.SyncLiteSubscriptionResponse{Status: st}, nil
	}
	id := clientID(ctx)
	if id == "" || len(id) > maxClientID {
		return answer(status(grpcapi.Code_CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required"))
	}
	if err := s.touch(ctx); err != nil {
		return answer(status(grpcapi.Code_FORBIDDEN, err.Error()))
	}
	group := req.GetGroup().GetName()
	if group == "" {
		return answer(status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, "consumer group is empty"))
	}
	if err := protocol.ValidateGroup(group); err != nil {
		return answer(status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, err.Error()))
	}
	tc, st := s.liteParentTopic(req.GetTopic())
	if st != nil {
		return answer(st)
	}
	names := req.GetLiteTopicSet()
	for _, n := range names {
		if err := validLiteName(n, s.cfg.Lite.MaxNameLength); err != nil {
			return answer(status(grpcapi.Code_ILLEGAL_LITE_TOPIC, err.Error()))
		}
	}
	x := s.lite
	key := liteSubKey{client: id, group: group, parent: tc.TopicName}
	now := time.Now().UnixMilli()
	var taken []*liteClient
	var takenNames []string
	x.mu.Lock()
	c := x.subs[key]
	add := func() error {
		if c == nil {
			c = x.client(key)
		}
		fresh := 0
		for _, n := range names {
			if t := x.get(tc.TopicName, n); t == nil {
				fresh++
			} else if _, has := c.topics[t]; !has {
				fresh++
			}
		}
		if x.counts[id]+fresh > x.cfg.SubscriptionQuota {
			return fmt.Errorf("client %s would subscribe %d lite topics, grpc.lite.subscription_quota %d: %w", id, x.counts[id]+fresh, x.cfg.SubscriptionQuota, errLiteSubQuot)
		}
		for _, n := range names {
			t, err := x.ensure(tc.TopicName, n, now)
			if err != nil {
				return err
			}
			prev, err := x.subscribe(c, t, req.GetOffsetOption(), s.liteAt)
			if err != nil {
				return err
			}
			if prev != nil && prev.key.client != id {
				taken = append(taken, prev)
				takenNames = append(takenNames, t.name)
			}
		}
		return nil
	}
	var err error
	switch req.GetAction() {
	case grpcapi.LiteSubscriptionAction_PARTIAL_ADD:
		err = add()
	case grpcapi.LiteSubscriptionAction_COMPLETE_ADD:
		if c != nil {
			keep := map[string]bool{}
			for _, n := range names {
				keep[n] = true
			}
			for t := range c.topics {
				if !keep[t.name] {
					x.unsubscribe(c, t)
				}
			}
			c = x.subs[key]
		}
		err = add()
	case grpcapi.LiteSubscriptionAction_PARTIAL_REMOVE:
		if c != nil {
			for _, n := range names {
				if t := x.get(tc.TopicName, n); t != nil {
					x.unsubscribe(c, t)
				}
			}
		}
	case grpcapi.LiteSubscriptionAction_COMPLETE_REMOVE:
		if c != nil {
			for t := range c.topics {
				x.unsubscribe(c, t)
			}
		}
	default:
		err = fmt.Errorf("unknown lite subscription action %v", req.GetAction())
	}
	if c != nil && len(c.topics) == 0 && x.subs[key] == c {
		delete(x.subs, key)
	}
	x.mu.Unlock()
	for i, p := range taken {
		s.notifyUnsubscribeLite(p.key.client, takenNames[i])
	}
	switch {
	case err == nil:
		return answer(ok())
	case errors.Is(err, errLiteSubQuot):
		return answer(status(grpcapi.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED, err.Error()))
	case errors.Is(err, errLiteQuota):
		return answer(status(grpcapi.Code_LITE_TOPIC_QUOTA_EXCEEDED, err.Error()))
	}
	return answer(status(grpcapi.Code_BAD_REQUEST, err.Error()))
}

// liteAt is the lite offset of t's first message stored at or after ts
// (epoch ms): a binary search over its records. Called with the index
// held; it reads a few records (log2 of the topic's length).
func (s *Server) liteAt(t *liteTopic, ts int64) int64 {
	st := s.b.Store()
	lo, hi := 0, len(t.offs)
	for lo < hi {
		mid := (lo + hi) / 2
		rec, err := st.Lookup(context.Background(), t.offs[mid])
		var at int64 = -1
		if err == nil {
			if h, err := message.PeekHeader(rec); err == nil {
				at = h.StoreTimestamp
			}
		}
		if at < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return t.base + int64(lo)
}

// liteReceive serves ReceiveMessage on a LITE parent topic: the messages
// of the lite topics the client subscribed to in the group.
func (s *Server) liteReceive(stream grpcapi.MessagingService_ReceiveMessageServer, group string, tc *protocol.TopicConfig, batch int, invisible, wait time.Duration) error {
	ctx := stream.Context()
	send := func(st *grpcapi.Status) error {
		return stream.Send(&grpcapi.ReceiveMessageResponse{Content: &grpcapi.ReceiveMessageResponse_Status{Status: st}})
	}
	id := clientID(ctx)
	if id == "" {
		return send(status(grpcapi.Code_CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required"))
	}
	x := s.lite
	key := liteSubKey{client: id, group: group, parent: tc.TopicName}
	// The limits of every other receive (consume.go): grpc.receive_buffer
	// bounds the messages held for readers that do not read, and
	// grpc.max_receive_waits the receives waiting at once.
	if s.recvHeld.full() {
		return send(status(grpcapi.Code_TOO_MANY_REQUESTS, fmt.Sprintf("the endpoint holds grpc.receive_buffer (%d bytes) of messages for consumers that do not read: try again later", s.recvHeld.limit)))
	}
	polling := wait > 0 && s.recvWaits.take()
	full := wait > 0 && !polling
	if full {
		wait = 0
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var got []liteDelivery
	var taken int64 // epoch ms: when got was handed out, the start of its invisible time
	notFound := func() error {
		if full {
			return send(status(grpcapi.Code_TOO_MANY_REQUESTS, fmt.Sprintf("polling full: grpc.max_receive_waits (%d) receives are waiting for messages; try again later", s.recvWaits.limit)))
		}
		return send(status(grpcapi.Code_MESSAGE_NOT_FOUND, "no new message"))
	}
	for {
		x.mu.Lock()
		c := x.subs[key]
		var wake chan struct{}
		if c != nil {
			taken = time.Now().UnixMilli()
			got = x.take(c, batch, invisible, taken)
			wake = c.waiter()
		}
		x.mu.Unlock()
		if len(got) > 0 {
			break
		}
		var poll <-chan time.Time
		if c == nil { // not subscribed (yet): look again now and then
			poll = time.After(fifoPoll)
		}
		select {
		case <-wake:
		case <-poll:
		case <-timer.C:
			if polling {
				s.recvWaits.give()
			}
			return notFound()
		case <-ctx.Done():
			if polling {
				s.recvWaits.give()
			}
			return nil
		case <-s.done:
			if polling {
				s.recvWaits.give()
			}
			return notFound()
		}
	}
	if polling {
		s.recvWaits.give()
	}
	recs := make([]pop.Received, 0, len(got))
	names := make(map[string]string, len(got)) // receipt handle → lite topic
	for _, d := range got {
		rec, err := s.b.Store().Lookup(ctx, d.cl)
		var m *message.Ext
		if err == nil {
			m, _, err = message.DecodeStored(rec)
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrOffsetOutOfRange) {
				// Retention removed it: it is skipped as if acked.
				x.mu.Lock()
				_, moved, _ := x.ack(tc.TopicName, d.t.name, group, liteHandle(d))
				x.mu.Unlock()
				s.journalLiteOffset(tc.TopicName, d.t.name, group, moved)
				continue
			}
			s.log.Warn("grpc: lite receive: read", "lite_topic", d.t.name, "offset", d.offset, "err", err)
			break // the rest of the run goes out again after its invisible time
		}
		r := pop.Received{Message: m, Handle: liteHandle(d), Queue: m.QueueID, Offset: d.offset, Attempt: d.attempt,
			InvisibleUntil: time.UnixMilli(taken + invisible.Milliseconds())}
		names[r.Handle] = d.t.name
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return send(status(grpcapi.Code_MESSAGE_NOT_FOUND, "no new message"))
	}
	// Held as the other receives' messages are (held.go): counted against
	// grpc.receive_stream_buffer and grpc.receive_buffer while the stream
	// does not read, dropped at the deadline (they go out again after
	// their invisible time).
	return s.sendHeld(ctx, stream, send, recs, invisible, func(r pop.Received, pm *grpcapi.Message) {
		name := names[r.Handle]
		pm.SystemProperties.LiteTopic = &name
		pm.SystemProperties.MessageType = grpcapi.MessageType_LITE
	})
}

// journalLiteOffset makes a moved committed offset durable.
func (s *Server) journalLiteOffset(parent, name, group string, moved int64) {
	if moved < 0 {
		return
	}
	if err := s.lite.j.append([]liteRecord{{kind: liteRecOffset, parent: parent, name: name, group: group, value: moved}}); err != nil {
		s.log.Warn("grpc: lite offset not journalled", "lite_topic", name, "err", err)
	}
}

func liteStatus(err error) *grpcapi.Status {
	if errors.Is(err, errLiteHandle) {
		return status(grpcapi.Code_INVALID_RECEIPT_HANDLE, err.Error())
	}
	return status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error())
}

// isLiteAck says whether an AckMessage names lite topics.
func isLiteAck(req *grpcapi.AckMessageRequest) bool {
	for _, e := range req.GetEntries() {
		if e.LiteTopic != nil {
			return true
		}
	}
	return false
}

// liteAckMessage acknowledges lite deliveries; the moved offsets are
// journalled (one fsync) before it answers.
func (s *Server) liteAckMessage(req *grpcapi.AckMessageRequest) (*grpcapi.AckMessageResponse, error) {
	group, parent := req.GetGroup().GetName(), req.GetTopic().GetName()
	x := s.lite
	entries := make([]*grpcapi.AckMessageResultEntry, 0, len(req.GetEntries()))
	var recs []liteRecord
	failed := 0
	x.mu.Lock()
	for _, e := range req.GetEntries() {
		st := ok()
		_, moved, err := x.ack(parent, e.GetLiteTopic(), group, e.GetReceiptHandle())
		if err != nil {
			st = liteStatus(err)
			failed++
		} else if moved >= 0 {
			recs = append(recs, liteRecord{kind: liteRecOffset, parent: parent, name: e.GetLiteTopic(), group: group, value: moved})
		}
		entries = append(entries, &grpcapi.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
	}
	x.mu.Unlock()
	if err := x.j.append(recs); err != nil {
		s.log.Warn("grpc: lite ack not journalled", "err", err)
		for _, e := range entries {
			if e.Status.GetCode() == grpcapi.Code_OK {
				e.Status = status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error())
				failed++
			}
		}
	}
	st := ok()
	switch {
	case len(entries) == 1:
		st = entries[0].Status
	case failed > 0:
		st = status(grpcapi.Code_MULTIPLE_RESULTS, strconv.Itoa(failed)+" acks refused")
	}
	return &grpcapi.AckMessageResponse{Status: st, Entries: entries}, nil
}

// liteChangeInvisible moves a lite run's invisible time; the handle stays
// the same. suspend is not acted on.
func (s *Server) liteChangeInvisible(req *grpcapi.ChangeInvisibleDurationRequest) (*grpcapi.ChangeInvisibleDurationResponse, error) {
	d := req.GetInvisibleDuration()
	if d == nil || d.CheckValid() != nil || d.AsDuration() < 0 || d.AsDuration() > pop.MaxInvisible {
		return &grpcapi.ChangeInvisibleDurationResponse{Status: status(grpcapi.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration missing or out of range")}, nil //nolint:nilerr // the refusal is the status in the response
	}
	x := s.lite
	x.mu.Lock()
	err := x.extend(req.GetTopic().GetName(), req.GetLiteTopic(), req.GetGroup().GetName(), req.GetReceiptHandle(), d.AsDuration(), time.Now().UnixMilli())
	x.mu.Unlock()
	if err != nil {
		return &grpcapi.ChangeInvisibleDurationResponse{Status: liteStatus(err)}, nil
	}
	return &grpcapi.ChangeInvisibleDurationResponse{Status: ok(), ReceiptHandle: req.GetReceiptHandle()}, nil
}

// liteForwardToDLQ stores a lite delivery in %DLQ%<group> and acks it.
func (s *Server) liteForwardToDLQ(ctx context.Context, req *grpcapi.ForwardMessageToDeadLetterQueueRequest) (*grpcapi.ForwardMessageToDeadLetterQueueResponse, error) {
	group, parent, name := req.GetGroup().GetName(), req.GetTopic().GetName(), req.GetLiteTopic()
	answer := func(st *grpcapi.Status) (*grpcapi.ForwardMessageToDeadLetterQueueResponse, error) {
		return &grpcapi.ForwardMessageToDeadLetterQueueResponse{Status: st}, nil
	}
	x := s.lite
	x.mu.Lock()
	t, _, off, err := x.run(parent, name, group, req.GetReceiptHandle())
	cl := int64(-1)
	if err == nil && off-t.base >= 0 && off-t.base < int64(len(t.offs)) {
		cl = t.offs[off-t.base]
	}
	x.mu.Unlock()
	if err != nil {
		return answer(liteStatus(err))
	}
	if cl >= 0 {
		rec, err := s.b.Store().Lookup(ctx, cl)
		if err == nil {
			var m *message.Ext
			if m, _, err = message.DecodeStored(rec); err == nil {
				err = s.putDLQ(ctx, group, m, req.GetDeliveryAttempt())
			}
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return answer(status(grpcapi.Code_INTERNAL_SERVER_ERROR, err.Error()))
		}
	}
	x.mu.Lock()
	_, moved, err := x.ack(parent, name, group, req.GetReceiptHandle())
	x.mu.Unlock()
	if err != nil {
		return answer(liteStatus(err))
	}
	s.journalLiteOffset(parent, name, group, moved)
	return answer(ok())
}

func (s *Server) putDLQ(ctx context.Context, group string, m *message.Ext, attempts int32) error {
	dlq, err := s.b.EnsureDLQ(group)
	if err != nil {
		return fmt.Errorf("lite: dlq of %s: %w", group, err)
	}
	props := m.Properties.Clone()
	if props[message.PropertyRetryTopic] == "" {
		props[message.PropertyRetryTopic] = m.Topic
	}
	if props[message.PropertyOriginMessageID] == "" {
		props[message.PropertyOriginMessageID] = m.UniqKey()
	}
	dm := &message.Ext{
		Message: message.Message{Topic: dlq, Flag: m.Flag, Properties: props, Body: m.Body},
		SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: attempts,
	}
	if _, err := s.b.Put(ctx, []*message.Ext{dm}); err != nil {
		return fmt.Errorf("lite: forward to %s: %w", dlq, err)
	}
	return nil
}

// stopLite writes the snapshot if the index changed since the last one
// and closes the journal; called by Stop once the RPCs and the sweep are
// done. A snapshot not written is logged: the next start reads more of
// the parent topics.
func (s *Server) stopLite(ctx context.Context) error {
	if s.lite == nil {
		return nil
	}
	x := s.lite
	x.mu.Lock()
	changed := x.changes != x.snapChanges
	x.mu.Unlock()
	if changed {
		if err := s.snapshotLite(context.WithoutCancel(ctx), nil); err != nil {
			s.log.Warn("grpc: lite snapshot not written at stop", "err", err)
		}
	}
	return x.j.close()
}
