package commitlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quivermq/quiver/core/store"
)

// DeleteBefore implements store.Store. It deletes, oldest first, whole
// segments (never the active one, never unsynced ones) whose last message
// was stored before t, then the consume-queue files that only point into
// them (never a queue's last file, which keeps its max offset). Queue
// minimum offsets move to the first entry still backed by the log.
func (s *Store) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("commitlog: delete before: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("commitlog: delete before: %w", err)
	}
	s.retMu.Lock()
	defer s.retMu.Unlock()
	if s.closed.Load() {
		return 0, fmt.Errorf("commitlog: delete before: %w", store.ErrClosed)
	}
	cutoff := t.UnixMilli()
	s.flushMu.Lock()
	flushed := s.flushed
	s.flushMu.Unlock()

	s.segMu.RLock()
	var victims []*segment
	for _, seg := range s.segs[:len(s.segs)-1] {
		if seg.base+s.segSize > flushed || seg.lastTS.Load() >= cutoff {
			break
		}
		victims = append(victims, seg)
	}
	s.segMu.RUnlock()
	if len(victims) == 0 {
		return 0, nil
	}
	newMin := victims[len(victims)-1].base + s.segSize
	s.minPhys.Store(newMin)

	var freed int64
	for _, cq := range s.queues.Snapshot() {
		n, err := s.trimQueueFront(cq, newMin)
		freed += n
		if err != nil {
			return freed, err
		}
	}

	s.segMu.Lock()
	s.segs = s.segs[len(victims):]
	s.segMu.Unlock()
	for _, seg := range victims {
		seg.f.Close()
		if err := os.Remove(seg.path); err != nil {
			return freed, fmt.Errorf("commitlog: delete segment %s: %w", seg.name(), err)
		}
		freed += s.segSize
		s.log.Info("commitlog: deleted segment", "segment", seg.name(), "last_store_time", time.UnixMilli(seg.lastTS.Load()).UTC())
	}
	if err := syncDir(s.clDir); err != nil {
		return freed, fmt.Errorf("commitlog: %w", err)
	}
	if s.keys != nil {
		s.keys.prune(newMin)
	}
	return freed, nil
}

// trimQueueFront moves cq's min to its first entry at or above minPhys and
// deletes the files entirely below it.
func (s *Store) trimQueueFront(cq *consumeQueue, minPhys int64) (int64, error) {
	mn, mx := cq.offsets()
	newMin, err := cq.firstAtOrAbove(mn, mx, minPhys)
	if err != nil {
		return 0, err
	}
	if newMin > mn {
		cq.min.Store(newMin)
	}
	cq.mu.Lock()
	var drop []*cqFile
	// Keep the last file (it holds max) and any file the tail still goes to.
	for len(cq.files) > 1 && cq.files[0].base+cq.perFile <= min(newMin, cq.tailFrom) {
		drop = append(drop, cq.files[0])
		cq.files = cq.files[1:]
	}
	cq.mu.Unlock()
	var freed int64
	for _, f := range drop {
		if fi, err := f.f.Stat(); err == nil {
			freed += fi.Size()
		}
		f.f.Close()
		if err := os.Remove(f.path); err != nil {
			return freed, fmt.Errorf("commitlog: delete consume queue %s file %s: %w", cq.q, filepath.Base(f.path), err)
		}
	}
	if len(drop) > 0 {
		s.markDirty(nil, cq.dir)
	}
	return freed, nil
}

// DeleteTopic implements store.TopicDeleter: it drops the topic's consume
// queues (its records stay in the commit log until retention removes
// them) and checkpoints so recovery does not bring them back.
func (s *Store) DeleteTopic(ctx context.Context, topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("commitlog: delete topic %s: %w", topic, store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commitlog: delete topic %s: %w", topic, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retMu.Lock()
	defer s.retMu.Unlock()
	if s.closed.Load() {
		return fmt.Errorf("commitlog: delete topic %s: %w", topic, store.ErrClosed)
	}
	s.lastQ = nil // the writer's cached queue may be dropped
	for _, cq := range s.queues.DeleteTopic(topic) {
		cq.flushMu.Lock()
		cq.mu.Lock()
		for _, f := range cq.files {
			f.f.Close()
		}
		cq.files, cq.tail, cq.dropped = nil, nil, true
		cq.mu.Unlock()
		cq.flushMu.Unlock()
		s.dirtyMu.Lock()
		delete(s.dirtyQ, cq)
		s.dirtyMu.Unlock()
	}
	if err := os.RemoveAll(filepath.Join(s.cqDir, topic)); err != nil {
		return fmt.Errorf("commitlog: delete topic %s: %w", topic, err)
	}
	s.markDirty(nil, s.cqDir)
	// The topic's records stay in the log: a recovery scan of it must not
	// index them again (nor take them for the records of a new queue).
	if err := s.writeFloor(topic, s.wrote.Load()); err != nil {
		return fmt.Errorf("commitlog: delete topic %s: %w", topic, err)
	}
	if s.keys != nil {
		s.keys.dropTopic(topic, s.wrote.Load())
	}
	if err := s.checkpoint(); err != nil {
		return fmt.Errorf("commitlog: delete topic %s: %w", topic, err)
	}
	return nil
}
