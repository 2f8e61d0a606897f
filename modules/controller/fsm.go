package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// maxEpochHistory bounds the epoch start offsets kept per group.
const maxEpochHistory = 32

// EpochStart is where an epoch's master began writing: its commit-log end
// when it stopped following (-1 until it reported it).
type EpochStart struct {
	Epoch int64 `json:"epoch"`
	Start int64 `json:"start"`
}

// Group is the committed state of one broker name.
type Group struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	// Epoch grows by one at each election; MasterID (member id) and
	// MasterAddr are its master.
	Epoch      int64  `json:"epoch"`
	MasterID   int64  `json:"masterId"`
	MasterAddr string `json:"masterAddr"`
	// InSync are the member ids the master last reported in sync: the
	// candidates of the next election.
	InSync []int64 `json:"inSync"`
	// Sync: the group's masters are SYNC_MASTERs.
	Sync bool `json:"sync"`
	// FailoverTimeout: the master's heartbeats lapsing this long elect
	// another.
	FailoverTimeout time.Duration `json:"failoverTimeout"`
	// Epochs are the start offsets of the last epochs, oldest first.
	Epochs []EpochStart `json:"epochs"`
}

// Start returns the start offset of epoch e (-1 when unknown or not kept).
func (g *Group) Start(e int64) int64 {
	for _, es := range g.Epochs {
		if es.Epoch == e {
			return es.Start
		}
	}
	return -1
}

// Ready reports whether the current master reported its start offset:
// only then may it accept writes and register as id 0.
func (g *Group) Ready() bool { return g.Start(g.Epoch) >= 0 }

// CutAfter is the offset a broker that last served or followed epoch e
// must truncate its commit log to before following the current epoch: the
// start of the first later epoch whose master began writing. ok is false
// when no later epoch started (nothing to cut) or e is unknown history.
func (g *Group) CutAfter(e int64) (off int64, ok bool) {
	for _, es := range g.Epochs {
		if es.Epoch > e && es.Start >= 0 {
			return es.Start, true
		}
	}
	return 0, false
}

func (g *Group) clone() *Group {
	c := *g
	c.InSync = slices.Clone(g.InSync)
	c.Epochs = slices.Clone(g.Epochs)
	return &c
}

// Command ops.
const (
	opElect  = "elect"
	opStart  = "start"
	opInSync = "insync"
)

// Command is one raft log entry.
type Command struct {
	Op      string `json:"op"`
	Cluster string `json:"cluster,omitempty"`
	Name    string `json:"name"`
	// Epoch: elect: the epoch the election replaces (compare-and-set: the
	// entry is void unless it is still the current one); start, insync:
	// the epoch they are about (void unless current).
	Epoch      int64  `json:"epoch"`
	MasterID   int64  `json:"masterId,omitempty"`
	MasterAddr string `json:"masterAddr,omitempty"`
	Start      int64  `json:"start,omitempty"`
	// Ready (elect): Start is known already (a founder: its end).
	Ready  bool    `json:"ready,omitempty"`
	InSync []int64 `json:"inSync,omitempty"`
	Sync   bool    `json:"sync,omitempty"`
	// FailoverTimeout, when positive, replaces the group's.
	FailoverTimeout time.Duration `json:"failoverTimeout,omitempty"`
}

// ErrStale is what Apply returns for a command about an epoch that is no
// longer current: it changes nothing.
var ErrStale = errors.New("controller: stale epoch")

// FSM is the replicated state: broker name → Group. Every controller
// applies the same entries in the same order, so each holds the same
// groups; an election is a compare-and-set on the epoch, so two masters
// are never committed for one epoch and epochs only grow.
type FSM struct {
	mu     sync.RWMutex
	groups map[string]*Group
	// onChange, when set, sees each group after an entry changed it
	// (outside mu).
	onChange func(*Group)
	// changed is closed and replaced whenever an entry or a snapshot
	// changed the state (under mu).
	changed chan struct{}
	// index is the raft index of the last command entry Apply consumed
	// (under mu). Raft hands barriers, no-ops and configuration entries
	// to no FSM method, so it may stay below raft's applied index.
	index uint64
	// beforeApply (tests) runs at the start of each Apply: an FSM that
	// has not applied an entry raft already handed it.
	beforeApply func(*raft.Log)
}

// NewFSM returns an empty state; onChange may be nil.
func NewFSM(onChange func(*Group)) *FSM {
	return &FSM{groups: map[string]*Group{}, onChange: onChange, changed: make(chan struct{})}
}

// Changed returns a channel closed at the next change of the state.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

func (f *FSM) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

var _ raft.FSM = (*FSM)(nil)

// Group returns a copy of the group called name, or nil.
func (f *FSM) Group(name string) *Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g := f.groups[name]; g != nil {
		return g.clone()
	}
	return nil
}

// Groups returns copies of every group, sorted by name.
func (f *FSM) Groups() []*Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Group, 0, len(f.groups))
	for _, name := range slices.Sorted(maps.Keys(f.groups)) {
		out = append(out, f.groups[name].clone())
	}
	return out
}

// Index is the raft index of the last command entry the FSM applied
// (whatever its outcome); 0 before the first since the start.
func (f *FSM) Index() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

// Apply implements raft.FSM: it returns the changed *Group, or an error.
func (f *FSM) Apply(l *raft.Log) any {
	if f.beforeApply != nil {
		f.beforeApply(l)
	}
	var c Command
	err := json.Unmarshal(l.Data, &c)
	var g *Group
	if err == nil {
		g, err = f.apply(c)
	} else {
		err = fmt.Errorf("controller: decode entry %d: %w", l.Index, err)
	}
	f.mu.Lock()
	f.index = l.Index // after the state it changed
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if f.onChange != nil {
		f.onChange(g)
	}
	return g
}

// apply changes the state by c and returns a copy of the changed group.
func (f *FSM) apply(c Command) (*Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[c.Name]
	cur := int64(0)
	if g != nil {
		cur = g.Epoch
	}
	if c.Epoch != cur {
		return nil, fmt.Errorf("%w: %s is at epoch %d, the entry is about %d", ErrStale, c.Name, cur, c.Epoch)
	}
	switch c.Op {
	case opElect:
		if g == nil {
			g = &Group{Cluster: c.Cluster, Name: c.Name}
			f.groups[c.Name] = g
		}
		if c.MasterAddr == "" {
			return nil, errors.New("controller: elect without an address")
		}
		g.Epoch++
		g.MasterID, g.MasterAddr = c.MasterID, c.MasterAddr
		// The former in-sync slaves stay candidates until the new master
		// reports its own set (it accepts no write before its start).
		g.InSync = slices.DeleteFunc(slices.Clone(g.InSync), func(id int64) bool { return id == c.MasterID })
		if g.Epoch == 1 {
			g.Sync = c.Sync
		}
		if c.FailoverTimeout > 0 {
			g.FailoverTimeout = c.FailoverTimeout
		}
		start := int64(-1)
		if c.Ready {
			start = c.Start
		}
		g.Epochs = append(g.Epochs, EpochStart{Epoch: g.Epoch, Start: start})
		if len(g.Epochs) > maxEpochHistory {
			g.Epochs = slices.Delete(g.Epochs, 0, len(g.Epochs)-maxEpochHistory)
		}
	case opStart:
		if g == nil {
			return nil, fmt.Errorf("controller: start of unknown group %s", c.Name)
		}
		if g.Ready() {
			return nil, fmt.Errorf("%w: epoch %d of %s already started", ErrStale, cur, c.Name)
		}
		g.Epochs[len(g.Epochs)-1].Start = c.Start
		g.Sync = g.Sync || c.Sync
	case opInSync:
		if g == nil {
			return nil, fmt.Errorf("controller: in-sync set of unknown group %s", c.Name)
		}
		g.InSync = slices.Clone(c.InSync)
		slices.Sort(g.InSync)
		g.Sync = c.Sync
		if c.FailoverTimeout > 0 {
			g.FailoverTimeout = c.FailoverTimeout
		}
	default:
		return nil, fmt.Errorf("controller: unknown op %q", c.Op)
	}
	f.notifyLocked()
	return g.clone(), nil
}

// Snapshot implements raft.FSM.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	data, err := json.Marshal(f.groups)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	return snapshot(data), nil
}

// Restore implements raft.FSM.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	groups := map[string]*Group{}
	if err := json.NewDecoder(rc).Decode(&groups); err != nil {
		return fmt.Errorf("controller: restore: %w", err)
	}
	f.mu.Lock()
	f.groups = groups
	f.notifyLocked()
	f.mu.Unlock()
	if f.onChange != nil {
		for _, g := range f.Groups() {
			f.onChange(g)
		}
	}
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel() //nolint:errcheck // the snapshot already failed; that error is returned
		return fmt.Errorf("controller: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshot) Release() {}
