package commitlog

import (
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/store"
)

// syncTimer accumulates how long commit-log fsync rounds take.
type syncTimer struct {
	n, total, max atomic.Int64
}

func (t *syncTimer) observe(d time.Duration) {
	t.n.Add(1)
	t.total.Add(int64(d))
	for {
		m := t.max.Load()
		if int64(d) <= m || t.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// SyncStats implements store.SyncObserver: the commit log's fsync rounds
// (segment fdatasyncs; checkpoint and consume-queue syncs are not counted).
func (s *Store) SyncStats() store.SyncStats {
	return store.SyncStats{Syncs: s.syncStats.n.Load(), Total: time.Duration(s.syncStats.total.Load()), Max: time.Duration(s.syncStats.max.Load())}
}

var _ store.SyncObserver = (*Store)(nil)
