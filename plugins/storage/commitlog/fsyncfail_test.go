package commitlog

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// TestFailedFsyncIsSticky: a failed fdatasync of a segment (sync mode) or
// of a consume queue (the checkpoint) disables writes until reopen, even
// once fdatasyncs work again (after a failed fsync the kernel may have
// dropped the pages it could not write, so a later fsync that succeeds
// proves nothing about them); WriteState says store_failed, not
// disk_full, even when the fsync said ENOSPC. The reopened store has
// every acknowledged message and accepts writes.
func TestFailedFsyncIsSticky(t *testing.T) {
	tests := []struct {
		name  string
		mode  store.FlushMode
		cause error
	}{
		{name: "segment", mode: store.FlushSync, cause: syscall.EIO},
		{name: "segment-enospc", mode: store.FlushSync, cause: syscall.ENOSPC},
		{name: "consume-queue", mode: store.FlushAsync, cause: syscall.EIO}, // segments sync, consume queues fail
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := settings(t, tt.mode)
			cfg := smallConfig(1 << 20)
			s := openStore(t, cfg, set)
			defer s.Close()
			var fail atomic.Bool
			s.syncFault = func(path string) error {
				if fail.Load() && (tt.mode == store.FlushSync || strings.HasPrefix(path, s.cqDir)) {
					return tt.cause
				}
				return nil
			}
			q := store.Queue{Topic: "Sticky", ID: 0}
			_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "before")})
			require.NoError(t, err)
			require.NoError(t, s.Flush(bg))

			fail.Store(true)
			_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "unsynced")})
			if tt.mode == store.FlushAsync {
				require.NoError(t, err) // not synced by the append
				require.ErrorIs(t, s.Flush(bg), store.ErrNotDurable)
			} else {
				require.ErrorIs(t, err, store.ErrNotDurable)
			}
			fail.Store(false)

			_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
			require.ErrorIs(t, err, store.ErrNotDurable, "still refused once fsyncs work again")
			assert.Equal(t, store.RefusedStoreFailed, store.WriteRefusal(err), "%v", err)
			assert.Equal(t, store.RefusedStoreFailed, store.WriteRefusal(s.WriteState()), "WriteState: %v", s.WriteState())
			_ = s.Close() // reports the failure

			s2 := openStore(t, cfg, set)
			defer s2.Close()
			require.NoError(t, s2.WriteState())
			_, mx, err := s2.Offsets(q)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, mx, int64(1), "the acknowledged message is kept")
			_, err = s2.Append(bg, []store.Message{msg(q.Topic, q.ID, "reopened")})
			require.NoError(t, err)
		})
	}
}
