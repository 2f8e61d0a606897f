package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
)

// offsetStore keeps a group's consume offsets: the next offset to
// consume per queue.
type offsetStore interface {
	// read returns the offset, -1 for none. fromStore skips memory.
	read(ctx context.Context, mq client.MessageQueue, fromStore bool) (int64, error)
	// update sets the in-memory offset.
	update(mq client.MessageQueue, off int64, increaseOnly bool)
	// get returns the in-memory offset.
	get(mq client.MessageQueue) (int64, bool)
	// persist writes the offsets of mqs to their store.
	persist(ctx context.Context, mqs []client.MessageQueue, wait bool)
	// remove forgets a queue.
	remove(mq client.MessageQueue)
	snapshot(topic string) map[client.MessageQueue]int64
}

type memOffsets struct {
	mu sync.Mutex
	m  map[client.MessageQueue]int64
}

func (s *memOffsets) update(mq client.MessageQueue, off int64, increaseOnly bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[mq]; ok && increaseOnly && old >= off {
		return
	}
	s.m[mq] = off
}

func (s *memOffsets) get(mq client.MessageQueue) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[mq]
	return v, ok
}

func (s *memOffsets) remove(mq client.MessageQueue) {
	s.mu.Lock()
	delete(s.m, mq)
	s.mu.Unlock()
}

func (s *memOffsets) snapshot(topic string) map[client.MessageQueue]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[client.MessageQueue]int64{}
	for k, v := range s.m {
		if topic == "" || k.Topic == topic {
			out[k] = v
		}
	}
	return out
}

// remoteOffsets keeps clustering offsets on the broker.
type remoteOffsets struct {
	memOffsets
	c     *client.Client
	group string
}

func newRemoteOffsets(c *client.Client, group string) *remoteOffsets {
	return &remoteOffsets{memOffsets: memOffsets{m: map[client.MessageQueue]int64{}}, c: c, group: group}
}

func (s *remoteOffsets) read(ctx context.Context, mq client.MessageQueue, fromStore bool) (int64, error) {
	if !fromStore {
		if v, ok := s.get(mq); ok {
			return v, nil
		}
	}
	off, err := queryOffset(ctx, s.c, s.group, mq)
	if err != nil {
		return 0, err
	}
	if off >= 0 {
		s.update(mq, off, false)
	}
	return off, nil
}

func (s *remoteOffsets) persist(ctx context.Context, mqs []client.MessageQueue, wait bool) {
	for _, mq := range mqs {
		off, ok := s.get(mq)
		if !ok || off < 0 {
			continue
		}
		if err := updateOffset(ctx, s.c, s.group, mq, off, wait); err != nil {
			s.c.Logger().Debug("commit offset", "group", s.group, "queue", mq.String(), "err", err)
		}
	}
}

// localOffsets keeps broadcasting offsets in a JSON file.
type localOffsets struct {
	memOffsets
	path string
	log  *slog.Logger
	fmu  sync.Mutex
}

type offsetFile struct {
	OffsetTable map[string]int64 `json:"offsetTable"`
}

func newLocalOffsets(path string, log *slog.Logger) (*localOffsets, error) {
	s := &localOffsets{memOffsets: memOffsets{m: map[client.MessageQueue]int64{}}, path: path, log: log}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: read offsets: %w", err)
	}
	// Our own file (queue JSON as string keys) or Java's
	// LocalFileOffsetStore's (fastjson, queue objects as keys).
	var f struct {
		OffsetTable protocol.MQTable[int64] `json:"offsetTable"`
	}
	if err := protocol.UnmarshalFastjson(b, &f); err != nil {
		return nil, fmt.Errorf("consumer: decode offsets %s: %w", path, err)
	}
	for mq, v := range f.OffsetTable {
		s.m[client.MessageQueue{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: int(mq.QueueID)}] = v
	}
	return s, nil
}

func (s *localOffsets) read(_ context.Context, mq client.MessageQueue, _ bool) (int64, error) {
	if v, ok := s.get(mq); ok {
		return v, nil
	}
	return -1, nil
}

func (s *localOffsets) persist(context.Context, []client.MessageQueue, bool) {
	if err := s.save(); err != nil {
		s.log.Warn("save broadcasting offsets", "path", s.path, "err", err)
	}
}

func (s *localOffsets) save() error {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := offsetFile{OffsetTable: map[string]int64{}}
	for mq, off := range s.snapshot("") {
		k, _ := json.Marshal(mq)
		f.OffsetTable[string(k)] = off
	}
	b, _ := json.MarshalIndent(&f, "", "  ")
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("consumer: save offsets: %w", err)
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("consumer: save offsets: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("consumer: save offsets: %w", err)
	}
	return nil
}
