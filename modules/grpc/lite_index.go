package grpc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/grpcapi"
)

// The lite topic index (RocketMQ 5.5's lite topics, RIP-83; lite.go serves
// them). A lite topic's messages are ordinary records of its parent
// topic's queue hash(name) % queues, carrying the lite topic's name and
// the message's lite offset (its position in the lite topic, from 0) as
// properties. Nothing exists per lite topic on disk: the index below is
// memory only, rebuilt at start by reading the parent queues (lite_journal.go
// adds what the records cannot say: deletions and consumer offsets). Nothing
// reaches the name server: routes are the parent's.
//
// An idle lite topic costs its entry in its parent's map, one liteTopic and
// 8 bytes per retained message (the commit-log offsets): about 200 bytes
// with one message (TestLiteIndexMemory).

// Stored properties of a lite message.
const (
	propLiteTopic  = "__LITE_TOPIC"
	propLiteOffset = "__LITE_OFFSET"
)

type liteParent struct {
	name   string
	topics map[string]*liteTopic
}

type liteTopic struct {
	name   string
	parent *liteParent
	// offs are the commit-log offsets of the retained messages; offs[i] has
	// lite offset base+i. -1 marks a lite offset whose put failed.
	offs []int64
	base int64
	last int64 // unix ms of the last send (creation for none): the TTL counts from it
	pos  int32 // index in liteIndex.all
	// groups are the consumer groups reading it (nil when none ever did).
	groups []*liteGroup
}

// next is the lite offset the next message gets.
func (t *liteTopic) next() int64 { return t.base + int64(len(t.offs)) }

// liteGroup is one consumer group's position in one lite topic.
type liteGroup struct {
	group     string // interned
	committed int64  // the next lite offset to deliver (all before are acked)
	owner     *liteClient
	run       *liteRun // the delivery in flight, nil for none
}

// liteRun is one delivery of lite offsets [start, end): a lite topic is
// read in order, so a group has at most one run in flight per lite topic;
// once every message of it is acked the next run goes out, and if its
// invisible time passes first it goes out again from the first unacked.
type liteRun struct {
	token    uint64
	start    int64
	end      int64
	acked    uint64 // bit i: start+i acked (runs are at most 64 long)
	deadline int64  // unix ms
	attempt  int32
}

// liteSubKey names the subscriptions of one client in one group of one
// parent topic.
type liteSubKey struct{ client, group, parent string }

// liteClient is what one client subscribes to in one group of one parent.
type liteClient struct {
	key    liteSubKey
	topics map[*liteTopic]struct{}
	// ready are the subscribed lite topics that may have a message to
	// deliver; busy those with a run in flight (looked at for expiry).
	ready map[*liteTopic]struct{}
	busy  map[*liteTopic]struct{}
	// wake is closed when a topic gets ready (woken: it is); a receive
	// that finds nothing waits on a fresh one.
	wake  chan struct{}
	woken bool
}

func (c *liteClient) signal(t *liteTopic) {
	c.ready[t] = struct{}{}
	if !c.woken {
		close(c.wake)
		c.woken = true
	}
}

// waiter is the channel a receive that found nothing waits on.
func (c *liteClient) waiter() chan struct{} {
	if c.woken {
		c.wake, c.woken = make(chan struct{}), false
	}
	return c.wake
}

// liteDelivery is one message a receive hands out.
type liteDelivery struct {
	t       *liteTopic
	offset  int64 // lite offset
	cl      int64 // commit-log offset
	token   uint64
	attempt int32
}

var (
	errLiteQuota   = errors.New("lite topic quota exceeded")
	errLiteSubQuot = errors.New("lite subscription quota exceeded")
	errLiteHandle  = errors.New("the receipt handle is stale or not of this lite topic")
)

// liteIndex is every lite topic of the endpoint.
type liteIndex struct {
	cfg LiteConfig
	mu  sync.Mutex
	// parents by parent topic name.
	parents map[string]*liteParent
	// all lists every lite topic for the TTL sweep, which walks it from
	// cursor a bounded number at a time.
	all    []*liteTopic
	cursor int
	groups map[string]string // interned group names
	subs   map[liteSubKey]*liteClient
	counts map[string]int // lite topics subscribed per client id
	tokens uint64
	// stripes serialise sends to one lite topic, so that lite offsets
	// follow the store's order.
	stripes [256]sync.Mutex
	j       *liteJournal // nil: offsets are not kept across restarts
	// changes counts the lite topics made and deleted and the messages
	// added (the snapshot is written again after so many, lite_snapshot.go);
	// removals the deletions alone: a snapshot written a chunk at a time
	// gives up if x.all was reordered under it. Both change with mu held.
	changes  uint64
	removals uint64
	// clock is time.Now; the sweep's budget is measured with it.
	clock func() time.Time
	// snapMu serialises snapshot writers; snapChanges is changes as the
	// last snapshot saw it (^0: none since a full rebuild) and snapAt when
	// it was written or last tried (both with mu held).
	snapMu      sync.Mutex
	snapChanges uint64
	snapAt      time.Time
	// loaded is how the start built the index.
	loaded liteLoaded
}

// liteLoaded is how a start built the lite index.
type liteLoaded struct {
	snapshot bool   // from the snapshot, else by a full rebuild
	reason   string // why not from the snapshot
	records  int64  // parent queue records read
}

func newLiteIndex(cfg LiteConfig) *liteIndex {
	return &liteIndex{cfg: cfg, parents: map[string]*liteParent{}, groups: map[string]string{},
		subs: map[liteSubKey]*liteClient{}, counts: map[string]int{}, clock: time.Now}
}

// reset empties the lite topics (a snapshot found damaged half way
// through its load is dropped for the full rebuild).
func (x *liteIndex) reset() {
	x.parents, x.all, x.cursor = map[string]*liteParent{}, nil, 0
}

func (x *liteIndex) stripe(parent, name string) *sync.Mutex {
	h := uint32(2166136261)
	for i := 0; i < len(parent); i++ {
		h = (h ^ uint32(parent[i])) * 16777619
	}
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return &x.stripes[h%uint32(len(x.stripes))]
}

// validLiteName checks a lite topic name: letters, digits and _-.:@, at
// most max bytes.
func validLiteName(name string, max int) error {
	if name == "" {
		return errors.New("lite topic is empty")
	}
	if len(name) > max {
		return fmt.Errorf("lite topic %q is longer than %d", name, max)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-.:@", c) >= 0) {
			return fmt.Errorf("lite topic %q has the illegal character %q (letters, digits and _-.:@ only)", name, c)
		}
	}
	return nil
}

// get returns a lite topic, nil if it does not exist. Called with mu held.
func (x *liteIndex) get(parent, name string) *liteTopic {
	if p := x.parents[parent]; p != nil {
		return p.topics[name]
	}
	return nil
}

// ensure returns a lite topic, made if new (within the parent's quota).
// Called with mu held.
func (x *liteIndex) ensure(parent, name string, now int64) (*liteTopic, error) {
	p := x.parents[parent]
	if p == nil {
		p = &liteParent{name: parent, topics: map[string]*liteTopic{}}
		x.parents[parent] = p
	}
	if t := p.topics[name]; t != nil {
		return t, nil
	}
	if len(p.topics) >= x.cfg.TopicQuota {
		return nil, fmt.Errorf("parent topic %s has %d lite topics, grpc.lite.topic_quota: %w", parent, len(p.topics), errLiteQuota)
	}
	name = strings.Clone(name) // not the request's buffer
	t := &liteTopic{name: name, parent: p, last: now, pos: int32(len(x.all))}
	p.topics[name] = t
	x.all = append(x.all, t)
	x.changes++
	return t, nil
}

// add records a stored message of t at lite offset off. Called with mu held.
func (x *liteIndex) add(t *liteTopic, off, cl, now int64) {
	if len(t.offs) == 0 && t.base < off {
		t.base = off
	}
	for t.next() < off { // a put that failed between
		t.offs = append(t.offs, -1)
	}
	if t.next() == off {
		t.offs = append(t.offs, cl)
		x.changes++
	}
	t.last = max(t.last, now)
	for _, g := range t.groups {
		if g.owner != nil && g.run == nil {
			g.owner.signal(t)
		}
	}
}

// remove deletes t (TTL): it answers the clients that subscribed to it.
// Called with mu held.
func (x *liteIndex) remove(t *liteTopic) []*liteClient {
	var owners []*liteClient
	for _, g := range t.groups {
		if g.owner != nil {
			owners = append(owners, g.owner)
			x.unsubscribe(g.owner, t)
		}
	}
	delete(t.parent.topics, t.name)
	last := len(x.all) - 1
	if int(t.pos) != last {
		x.all[t.pos] = x.all[last]
		x.all[t.pos].pos = t.pos
	}
	x.all[last] = nil
	x.all = x.all[:last]
	x.changes++
	x.removals++
	return owners
}

func (x *liteIndex) intern(group string) string {
	if g, ok := x.groups[group]; ok {
		return g
	}
	group = strings.Clone(group)
	x.groups[group] = group
	return group
}

// groupOf returns the group's position in t, made if new. Called with mu held.
func (x *liteIndex) groupOf(t *liteTopic, group string) *liteGroup {
	for _, g := range t.groups {
		if g.group == group {
			return g
		}
	}
	g := &liteGroup{group: x.intern(group), committed: -1}
	t.groups = append(t.groups, g)
	return g
}

// client returns the subscriptions of key, made if new. Called with mu held.
func (x *liteIndex) client(key liteSubKey) *liteClient {
	c := x.subs[key]
	if c == nil {
		c = &liteClient{key: key, topics: map[*liteTopic]struct{}{}, ready: map[*liteTopic]struct{}{},
			busy: map[*liteTopic]struct{}{}, wake: make(chan struct{})}
		x.subs[key] = c
	}
	return c
}

// subscribe makes c the exclusive reader of t in its group, starting where
// opt says. It answers the client that read it before, if another.
// Called with mu held.
func (x *liteIndex) subscribe(c *liteClient, t *liteTopic, opt *grpcapi.OffsetOption, at func(t *liteTopic, ts int64) int64) (*liteClient, error) {
	g := x.groupOf(t, c.key.group)
	var prev *liteClient
	if g.owner != c {
		if _, has := c.topics[t]; !has && x.counts[c.key.client] >= x.cfg.SubscriptionQuota {
			return nil, fmt.Errorf("client %s subscribes %d lite topics, grpc.lite.subscription_quota: %w", c.key.client, x.counts[c.key.client], errLiteSubQuot)
		}
		if g.owner != nil {
			prev = g.owner
			x.unsubscribe(prev, t)
		}
		g.owner = c
		g.run = nil // the previous reader's delivery goes out again to c
		c.topics[t] = struct{}{}
		x.counts[c.key.client]++
	}
	first := t.base
	was := g.committed
	switch v := opt.GetOffsetType().(type) {
	case nil:
		if g.committed < 0 {
			g.committed = first
		}
	case *grpcapi.OffsetOption_Policy_:
		switch v.Policy {
		case grpcapi.OffsetOption_MIN:
			g.committed = first
		case grpcapi.OffsetOption_MAX:
			g.committed = t.next()
		default: // LAST: the group's committed offset, else the first
			if g.committed < 0 {
				g.committed = first
			}
		}
	case *grpcapi.OffsetOption_Offset:
		g.committed = min(max(v.Offset, first), t.next())
	case *grpcapi.OffsetOption_TailN:
		g.committed = max(t.next()-max(v.TailN, 0), first)
	case *grpcapi.OffsetOption_Timestamp:
		g.committed = at(t, v.Timestamp)
	}
	if g.committed != was {
		g.run = nil // a new position: what was in flight goes out from there
	}
	c.signal(t)
	return prev, nil
}

// unsubscribe ends c's reading of t. Called with mu held.
func (x *liteIndex) unsubscribe(c *liteClient, t *liteTopic) {
	if _, has := c.topics[t]; !has {
		return
	}
	delete(c.topics, t)
	delete(c.ready, t)
	delete(c.busy, t)
	if x.counts[c.key.client]--; x.counts[c.key.client] <= 0 {
		delete(x.counts, c.key.client)
	}
	for _, g := range t.groups {
		if g.owner == c {
			g.owner, g.run = nil, nil
		}
	}
	if len(c.topics) == 0 {
		delete(x.subs, c.key)
	}
}

// take hands out up to batch messages of c's lite topics: from each ready
// topic a run from its group's committed offset, in lite offset order.
// Called with mu held.
func (x *liteIndex) take(c *liteClient, batch int, invisible time.Duration, now int64) []liteDelivery {
	for t := range c.busy { // runs whose invisible time passed go out again
		g := x.groupOf(t, c.key.group)
		if g.run == nil {
			delete(c.busy, t)
			c.ready[t] = struct{}{}
		} else if g.run.deadline <= now {
			c.ready[t] = struct{}{}
		}
	}
	var out []liteDelivery
	for t := range c.ready {
		if len(out) >= batch {
			break
		}
		g := x.groupOf(t, c.key.group)
		if g.owner != c {
			delete(c.ready, t)
			continue
		}
		attempt := int32(1)
		if g.run != nil {
			if g.run.deadline > now {
				delete(c.ready, t)
				continue
			}
			attempt = g.run.attempt + 1
			// From the first unacked message of the expired run.
			for g.committed < g.run.end && g.run.acked&(1<<uint(g.committed-g.run.start)) != 0 {
				g.committed++
			}
			g.run = nil
		}
		g.committed = max(g.committed, t.base)
		n := min(t.next()-g.committed, int64(batch-len(out)), 64)
		if n <= 0 {
			delete(c.ready, t)
			delete(c.busy, t)
			continue
		}
		x.tokens++
		g.run = &liteRun{token: x.tokens, start: g.committed, end: g.committed + n, deadline: now + invisible.Milliseconds(), attempt: attempt}
		for o := g.committed; o < g.run.end; o++ {
			out = append(out, liteDelivery{t: t, offset: o, cl: t.offs[o-t.base], token: g.run.token, attempt: attempt})
		}
		delete(c.ready, t)
		c.busy[t] = struct{}{}
	}
	return out
}

// liteHandle is a lite delivery's receipt handle.
func liteHandle(d liteDelivery) string {
	return "L1:" + strconv.FormatInt(d.offset, 10) + ":" + strconv.FormatUint(d.token, 10)
}

func parseLiteHandle(h string) (off int64, token uint64, err error) {
	rest, ok := strings.CutPrefix(h, "L1:")
	a, b, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("receipt handle %q: %w", h, errLiteHandle)
	}
	if off, err = strconv.ParseInt(a, 10, 64); err == nil {
		token, err = strconv.ParseUint(b, 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("receipt handle %q: %w", h, errLiteHandle)
	}
	return off, token, nil
}

// run finds the run a handle belongs to. Called with mu held.
func (x *liteIndex) run(parent, name, group, handle string) (*liteTopic, *liteGroup, int64, error) {
	off, token, err := parseLiteHandle(handle)
	if err != nil {
		return nil, nil, 0, err
	}
	t := x.get(parent, name)
	if t == nil {
		return nil, nil, 0, fmt.Errorf("lite topic %s of %s: %w", name, parent, errLiteHandle)
	}
	g := x.groupOf(t, group)
	if g.run == nil || g.run.token != token || off < g.run.start || off >= g.run.end {
		return nil, nil, 0, fmt.Errorf("lite topic %s offset %d: %w", name, off, errLiteHandle)
	}
	return t, g, off, nil
}

// ack acknowledges one delivery. It answers the group's committed offset
// when the ack moved it (to be journalled), else -1. Called with mu held.
func (x *liteIndex) ack(parent, name, group, handle string) (*liteTopic, int64, error) {
	t, g, off, err := x.run(parent, name, group, handle)
	if err != nil {
		return nil, -1, err
	}
	r := g.run
	r.acked |= 1 << uint(off-r.start)
	moved := int64(-1)
	for g.committed < r.end && r.acked&(1<<uint(g.committed-r.start)) != 0 {
		g.committed++
		moved = g.committed
	}
	if g.committed == r.end {
		g.run = nil
		if g.owner != nil {
			delete(g.owner.busy, t)
			if g.committed < t.next() {
				g.owner.signal(t)
			}
		}
	}
	return t, moved, nil
}

// extend moves a run's invisible time (ChangeInvisibleDuration); the
// handle stays valid. Called with mu held.
func (x *liteIndex) extend(parent, name, group, handle string, d time.Duration, now int64) error {
	_, g, _, err := x.run(parent, name, group, handle)
	if err != nil {
		return err
	}
	g.run.deadline = now + d.Milliseconds()
	if d == 0 && g.owner != nil {
		t := x.get(parent, name)
		g.owner.signal(t)
	}
	return nil
}

// liteExpired is one lite topic the sweep deleted.
type liteExpired struct {
	parent, name string
	boundary     int64 // the commit-log offset of its last message, -1 for none
	owners       []*liteClient
}

// liteSweepBudget bounds how long one sweep holds the index, whatever
// sweep_batch says (checked every liteSweepCheck lite topics). It stays
// well under the 10ms after which the Go scheduler preempts a goroutine
// that runs on (sysmon): a sweep holding the index that long was put
// back on the run queue with the lock held, and every reader of the
// index waited for its next turn on a core — 50 to 330ms at a million
// lite topics on a loaded machine.
const (
	liteSweepBudget = 2 * time.Millisecond
	liteSweepCheck  = 16
)

// sweep looks at up to cfg.SweepBatch lite topics, for at most
// liteSweepBudget, from where the last sweep stopped, and deletes the
// expired ones, appending them to out. It answers out and whether it
// stopped short (more to look at). It allocates nothing when out has
// room for a batch and the expired topics have no readers (allocating
// with the index held made the goroutine pay the collector's mark assists
// under the lock): the caller keeps out across sweeps and does the
// journalling and notices after the index is released. Called with mu
// held.
func (x *liteIndex) sweep(now int64, out []liteExpired) ([]liteExpired, bool) {
	if x.cfg.TTL <= 0 || len(x.all) == 0 {
		return out, false
	}
	cut := now - x.cfg.TTL.Milliseconds()
	start := x.clock()
	gone := 0
	for n := 0; n < x.cfg.SweepBatch && len(x.all) > 0; n++ {
		if n%liteSweepCheck == liteSweepCheck-1 && x.clock().Sub(start) > liteSweepBudget {
			return out, true
		}
		if x.cursor >= len(x.all) {
			x.cursor = 0
		}
		t := x.all[x.cursor]
		if t.last >= cut || busy(t) {
			x.cursor++
			continue
		}
		b := int64(-1)
		for i := len(t.offs) - 1; i >= 0; i-- {
			if t.offs[i] >= 0 {
				b = t.offs[i]
				break
			}
		}
		out = append(out, liteExpired{parent: t.parent.name, name: t.name, boundary: b, owners: x.remove(t)})
		gone++
		// x.all[cursor] is now the last topic, not yet looked at.
	}
	return out, gone > 0
}

// busy says whether a delivery of t is in flight.
func busy(t *liteTopic) bool {
	for _, g := range t.groups {
		if g.run != nil {
			return true
		}
	}
	return false
}
