//go:build linux

package commitlog

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// TestWriteMapDropsBehind writes 8 MiB through the mapped 16 MiB segment
// and checks that the map keeps only the pages near the writer resident
// (dropBehind): before, every page the writer passed stayed in the
// process's resident set until the window moved. The records written
// through the dropped pages read back, before and after a reopen.
func TestWriteMapDropsBehind(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := smallConfig(16 << 20)
	cfg.CQEntriesPerFile = 100000
	s := openStore(t, cfg, set)
	body := strings.Repeat("x", 1000)
	var pos []store.Position
	for i := 0; i < 8<<10; i++ {
		p, err := s.Append(bg, []store.Message{msg("Drop", int32(i%4), fmt.Sprintf("%05d%s", i, body))})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.Equal(t, pos[0].CommitLogOffset/(16<<20), pos[len(pos)-1].CommitLogOffset/(16<<20), "the writes stay in one segment")
	seg := s.wmap.seg
	require.NotNil(t, seg, "async writes go through the map")
	rss, ok := mappingRss(t, seg.path)
	require.True(t, ok, "no mapping of %s in /proc/self/smaps", seg.path)
	written := pos[len(pos)-1].CommitLogOffset + int64(pos[len(pos)-1].Size) - seg.base
	t.Logf("segment %s: %d KiB written through the map, %d KiB of it resident", seg.name(), written>>10, rss>>10)
	require.Greater(t, written, int64(8<<20))
	// What is left: up to 2 × dropBehind (1 MiB) behind the writer and
	// what the populator faulted in ahead of it (1 MiB).
	assert.LessOrEqual(t, rss, int64(4<<20), "resident pages of the write map")

	check := func(s *Store) {
		for i, p := range pos {
			rec, err := s.Lookup(bg, p.CommitLogOffset)
			require.NoError(t, err, "record %d", i)
			m, _, err := message.DecodeStored(rec)
			require.NoError(t, err, "record %d", i)
			require.Equal(t, fmt.Sprintf("%05d%s", i, body), string(m.Body), "record %d", i)
		}
	}
	check(s)
	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	check(s)
}

// mappingRss sums the Rss of the mappings of path in /proc/self/smaps.
func mappingRss(t *testing.T, path string) (int64, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	var rss int64
	found, in := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[len(fields)-1] == path
			found = found || in
			continue
		}
		if in && fields[0] == "Rss:" && len(fields) >= 2 {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			require.NoError(t, err)
			rss += kb << 10
		}
	}
	require.NoError(t, sc.Err())
	return rss, found
}

// TestMixedRecordSizes: records of pwriteMin bytes or more are pwritten
// into the mapped segment, smaller ones copied into the map, in any order
// within one group write and across segment rolls; every record reads
// back where its position says, in queue order, before and after a
// reopen.
func TestMixedRecordSizes(t *testing.T) {
	set := settings(t, store.FlushAsync)
	set.MaxMessageSize = 1 << 20
	cfg := smallConfig(512 << 10)
	s := openStore(t, cfg, set)
	sizes := []int{900, pwriteMin + 100, 1000, 70 << 10, 300, pwriteMin - 400, 200 << 10, 50}
	q := store.Queue{Topic: "Mixed", ID: 0}
	var want []string
	var pos []store.Position
	for round := range 12 {
		var batch []store.Message
		for i, n := range sizes {
			if (round+i)%3 == 0 {
				continue // vary the mix from round to round
			}
			body := fmt.Sprintf("%02d-%d-", round, i) + strings.Repeat(string(rune('a'+i)), n)
			want = append(want, body)
			batch = append(batch, msg(q.Topic, q.ID, body))
		}
		if round%2 == 0 {
			p, err := s.Append(bg, batch) // one group write
			require.NoError(t, err)
			pos = append(pos, p...)
			continue
		}
		for _, m := range batch { // one group write each
			p, err := s.Append(bg, []store.Message{m})
			require.NoError(t, err)
			pos = append(pos, p...)
		}
	}
	assert.Positive(t, s.pwrites.Load(), "big records are pwritten")
	assert.NotNil(t, s.wmap.b, "small records go through the map")
	check := func(s *Store) {
		t.Helper()
		for i, p := range pos {
			rec, err := s.Lookup(bg, p.CommitLogOffset)
			require.NoError(t, err, "record %d", i)
			m, _, err := message.DecodeStored(rec)
			require.NoError(t, err, "record %d", i)
			require.Equal(t, want[i], string(m.Body), "record %d", i)
			require.Equal(t, int64(i), p.QueueOffset)
		}
		var r store.ReadResult
		got := 0
		for off := int64(0); got < len(want); off = r.NextOffset {
			require.NoError(t, s.Read(bg, q, off, store.ReadOptions{MaxMessages: 4, MaxBytes: 4 << 20}, &r))
			require.NotEmpty(t, r.Records)
			for _, rec := range r.Records {
				m, _, err := message.DecodeStored(rec)
				require.NoError(t, err)
				require.Equal(t, want[got], string(m.Body), "queue offset %d", got)
				got++
			}
		}
	}
	check(s)
	require.NoError(t, s.Close())
	s = openStore(t, cfg, set)
	defer s.Close()
	check(s)
}
