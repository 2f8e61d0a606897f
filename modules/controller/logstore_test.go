package controller

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBoltStore: logs and stable keys survive a reopen; ranges delete;
// missing entries answer as raft expects (ErrLogNotFound, "not found").
func TestBoltStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openBoltStore(path)
	require.NoError(t, err)
	idx, err := s.FirstIndex()
	require.NoError(t, err)
	assert.Zero(t, idx)
	at := time.Now().UTC().Truncate(time.Millisecond)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i)}, AppendedAt: at})
	}
	require.NoError(t, s.StoreLogs(logs[:9]))
	require.NoError(t, s.StoreLog(logs[9]))
	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 2))
	require.NoError(t, s.Set([]byte("LastVoteCand"), []byte("n1")))
	_, err = s.Get([]byte("absent"))
	assert.EqualError(t, err, "not found", "raft tells a missing key by this text")
	require.NoError(t, s.Close())

	s, err = openBoltStore(path)
	require.NoError(t, err)
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	assert.Equal(t, [2]uint64{1, 10}, [2]uint64{first, last})
	var got raft.Log
	require.NoError(t, s.GetLog(7, &got))
	assert.Equal(t, uint64(7), got.Index)
	assert.Equal(t, []byte{7}, got.Data)
	assert.True(t, got.AppendedAt.Equal(at), "%v vs %v", got.AppendedAt, at)
	term, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), term)
	require.NoError(t, s.DeleteRange(1, 4))
	first, _ = s.FirstIndex()
	assert.Equal(t, uint64(5), first)
	assert.ErrorIs(t, s.GetLog(3, &got), raft.ErrLogNotFound)
}
