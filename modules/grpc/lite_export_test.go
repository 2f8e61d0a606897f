package grpc

import (
	"context"
	"slices"
	"strings"
	"time"
)

// SweepLiteOnce runs one TTL sweep tick and answers how long it held the
// lite index.
func (s *Server) SweepLiteOnce() time.Duration {
	held, _, _ := s.sweepLiteOnce(make([]liteExpired, 0, s.cfg.Lite.SweepBatch))
	return held
}

// LiteLockWait takes the lite index and answers how long that took: what
// any RPC touching it waits.
func (s *Server) LiteLockWait() time.Duration {
	start := time.Now()
	s.lite.mu.Lock()
	wait := time.Since(start)
	s.lite.mu.Unlock()
	return wait
}

// LiteTopics is how many lite topics the endpoint knows.
func (s *Server) LiteTopics() int {
	s.lite.mu.Lock()
	defer s.lite.mu.Unlock()
	return len(s.lite.all)
}

// CompactLite compacts the lite journal now, as the sweep does once it
// has grown.
func (s *Server) CompactLite() { s.compactLite() }

// SnapshotLite writes the lite index snapshot now, as the sweep does when
// it is due.
func (s *Server) SnapshotLite() error { return s.snapshotLite(context.Background(), nil) }

// LiteLoaded answers how the start built the lite index: from the
// snapshot (else why not) and how many parent records it read.
func (s *Server) LiteLoaded() (snapshot bool, reason string, records int64) {
	l := s.lite.loaded
	return l.snapshot, l.reason, l.records
}

// LiteEntry is one lite topic as the index holds it.
type LiteEntry struct {
	Parent, Name string
	Base, Last   int64
	Offs         []int64
	Groups       map[string]int64 // committed offsets set
}

// LiteDump answers the lite index, sorted by parent and name.
func (s *Server) LiteDump() []LiteEntry {
	x := s.lite
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]LiteEntry, 0, len(x.all))
	for _, t := range x.all {
		e := LiteEntry{Parent: t.parent.name, Name: t.name, Base: t.base, Last: t.last, Offs: slices.Clone(t.offs), Groups: map[string]int64{}}
		for _, g := range t.groups {
			if g.committed >= 0 {
				e.Groups[g.group] = g.committed
			}
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b LiteEntry) int {
		if c := strings.Compare(a.Parent, b.Parent); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// SetLiteSnapshotBeforeRename sets the hook run between the snapshot's
// sync and its rename (nil: none).
func SetLiteSnapshotBeforeRename(f func(tmp string) error) { liteSnapshotBeforeRename = f }

// SetLiteSnapshotRetry sets the least time between snapshots due to
// changes.
func SetLiteSnapshotRetry(d time.Duration) { liteSnapshotRetry = d }

// LiteSnapshotPending is how many changes the last snapshot does not have
// (^0 when none was written since a full rebuild).
func (s *Server) LiteSnapshotPending() uint64 {
	x := s.lite
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.snapChanges == ^uint64(0) {
		return ^uint64(0)
	}
	return x.changes - x.snapChanges
}

// AgeLite moves a lite topic's TTL stamp d into the past.
func (s *Server) AgeLite(parent, name string, d time.Duration) {
	x := s.lite
	x.mu.Lock()
	defer x.mu.Unlock()
	if t := x.get(parent, name); t != nil {
		t.last -= d.Milliseconds()
	}
}
