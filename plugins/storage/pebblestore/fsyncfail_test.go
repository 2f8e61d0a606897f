package pebblestore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
)

// TestFailedFsyncIsSticky: a failed fsync disables writes until reopen,
// even once fsyncs work again (after a failed fsync the kernel may have
// dropped the pages it could not write, so a later fsync that succeeds
// proves nothing about them), and WriteState says so; the reopened store
// has every acknowledged message and accepts writes.
func TestFailedFsyncIsSticky(t *testing.T) {
	fs := newCountingFS()
	cfg := NewConfig()
	cfg.FS = fs
	set := settings(t, store.FlushSync)
	s := openStore(t, cfg, set)
	defer s.Close()
	q := store.Queue{Topic: "Sticky", ID: 0}
	_, err := s.Append(bg, []store.Message{msg(q.Topic, q.ID, "before")})
	require.NoError(t, err)
	require.NoError(t, s.WriteState())

	fs.fail.Store(true)
	_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "fsync fails")})
	require.ErrorIs(t, err, store.ErrNotDurable)
	fs.fail.Store(false)

	_, err = s.Append(bg, []store.Message{msg(q.Topic, q.ID, "after")})
	require.ErrorIs(t, err, store.ErrNotDurable, "still refused once fsyncs work again")
	assert.Equal(t, store.RefusedStoreFailed, store.WriteRefusal(err))
	assert.Equal(t, store.RefusedStoreFailed, store.WriteRefusal(s.WriteState()), "WriteState: %v", s.WriteState())
	_ = s.Close() // may report the failure

	s2 := openStore(t, cfg, set)
	defer s2.Close()
	require.NoError(t, s2.WriteState())
	_, mx, err := s2.Offsets(q)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, mx, int64(1), "the acknowledged message is kept")
	_, err = s2.Append(bg, []store.Message{msg(q.Topic, q.ID, "reopened")})
	require.NoError(t, err)
}
