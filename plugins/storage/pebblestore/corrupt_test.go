package pebblestore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

const pcorruptN = 2000

func pcorruptBody(i int) string { return fmt.Sprintf("m-%04d-%s", i, strings.Repeat("x", 150)) }

// fillStore writes pcorruptN messages to two queues (A and B alternating).
func fillStore(t *testing.T, s *Store) {
	for i := 0; i < pcorruptN; i++ {
		_, err := s.Append(bg, []store.Message{storetest.Msg("PCorrupt", int32(i%2), pcorruptBody(i), map[string]string{"TAGS": "t"})})
		require.NoError(t, err)
	}
}

func readAllBodies(t *testing.T, s *Store, q store.Queue) ([]string, error) {
	var out []string
	var r store.ReadResult
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	for off := int64(0); off < mx; {
		if err := s.Read(bg, q, off, store.ReadOptions{MaxMessages: 64}, &r); err != nil {
			return out, err
		}
		for _, rec := range r.Records {
			m, _, err := message.DecodeStored(rec)
			require.NoError(t, err)
			out = append(out, string(m.Body))
		}
		if r.NextOffset <= off {
			break
		}
		off = r.NextOffset
	}
	return out, nil
}

// TestCorruptWAL flips 64 bytes in the middle of the WAL of a closed store
// (the messages are in no sstable yet): the damage is found before Pebble
// replays the WAL, logged, listed and the WAL copied aside; the batches
// after it are applied again, so only the messages of the damaged records
// are lost and reads skip their offsets.
func TestCorruptWAL(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	fillStore(t, s)
	require.NoError(t, s.Close())
	wals, err := filepath.Glob(filepath.Join(set.Dir, "pebble", "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, wals)
	// The largest WAL holds most messages.
	w, size := "", int64(0)
	for _, p := range wals {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		if fi.Size() > size {
			w, size = p, fi.Size()
		}
	}
	b, err := os.ReadFile(w)
	require.NoError(t, err)
	mid := len(b) / 2
	for i := 0; i < 64; i++ {
		b[mid+i] ^= 0xa5
	}
	require.NoError(t, os.WriteFile(w, b, 0o644))

	s = openStore(t, NewConfig(), set)
	defer s.Close()
	dmg := s.Damage()
	require.NotEmpty(t, dmg, "WAL damage is reported")
	assert.Contains(t, dmg[0].Reason, "WAL damaged")
	require.NotEmpty(t, dmg[0].Copy)
	_, err = os.Stat(dmg[0].Copy)
	require.NoError(t, err, "the damaged WAL is copied aside")
	total := 0
	for q := int32(0); q < 2; q++ {
		got, err := readAllBodies(t, s, store.Queue{Topic: "PCorrupt", ID: q})
		require.NoError(t, err)
		total += len(got)
	}
	lost := pcorruptN - total
	t.Logf("lost %d of %d messages to 64 damaged WAL bytes; damage %+v", lost, pcorruptN, dmg)
	// A bad chunk costs its record; the reading goes on at the next valid
	// chunk (64 bytes span at most two records of about 300 bytes). It
	// cost the rest of its 32 KiB block before, 73 messages.
	assert.LessOrEqual(t, lost, 2, "only the messages of the damaged WAL records are lost")
	assert.Positive(t, s.Skipped(), "reads skip the lost offsets and count them")
	_, mx, err := s.Offsets(store.Queue{Topic: "PCorrupt", ID: 0})
	require.NoError(t, err)
	assert.Equal(t, int64(pcorruptN/2), mx, "the queue's end survives")
}

// TestCorruptSSTable damages a block in the middle of an sstable of a
// closed store: opening and compacting it do not crash the process; the
// damaged key range is reported and the rest is served.
func TestCorruptSSTable(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	fillStore(t, s)
	_, err := s.db.AsyncFlush()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ssts, err := filepath.Glob(filepath.Join(set.Dir, "pebble", "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, ssts)
	w, size := "", int64(0)
	for _, p := range ssts {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		if fi.Size() > size {
			w, size = p, fi.Size()
		}
	}
	b, err := os.ReadFile(w)
	require.NoError(t, err)
	mid := len(b) / 3
	for i := 0; i < 64; i++ {
		b[mid+i] ^= 0xa5
	}
	require.NoError(t, os.WriteFile(w, b, 0o644))

	s = openStore(t, NewConfig(), set)
	defer s.Close()
	total, failed := 0, 0
	for q := int32(0); q < 2; q++ {
		got, err := readAllBodies(t, s, store.Queue{Topic: "PCorrupt", ID: q})
		if err != nil {
			failed++
			t.Logf("queue %d: %v", q, err)
		}
		total += len(got)
	}
	rep, err := s.Verify(bg, store.VerifyOptions{})
	require.NoError(t, err)
	dmg := s.Damage()
	t.Logf("served %d of %d messages; %d queue reads failed; damage %+v; verify %+v", total, pcorruptN, failed, dmg, rep.Damage)
	require.NotEmpty(t, dmg, "the corruption is reported with its key range")
	assert.NotEmpty(t, rep.Damage, "and found by Verify")
	assert.Greater(t, total, pcorruptN/4, "the undamaged data is served")
	_, err = s.Append(bg, []store.Message{msg("Other", 0, "after")})
	require.NoError(t, err, "the store keeps serving")
}
