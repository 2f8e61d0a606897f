package commitlog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// corruptN is how many messages the corruption table writes (one queue).
const corruptN = 2000

// corruptSeg is the segment size of the corruption table: three segments.
const corruptSeg = 256 << 10

var corruptQ = store.Queue{Topic: "Corrupt", ID: 0}

func corruptBody(i int) string { return fmt.Sprintf("m-%04d-%s", i, strings.Repeat("x", 150)) }

// corruptDamage is one kind of damage written into a closed store's files.
type corruptDamage struct {
	name string
	// damage writes into dir's files and returns the queue offsets whose
	// messages it destroys.
	damage func(t *testing.T, dir string, pos []store.Position) []int64
	// logDamage says the damage is in the commit log (copied aside, listed
	// in the manifest); else it is in a consume queue (rebuilt).
	logDamage bool
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func segPath(dir string, phys int64) string {
	return filepath.Join(dir, "commitlog", segmentName(phys-phys%corruptSeg))
}

// overlapping returns the queue offsets of the records overlapping [from, to).
func overlapping(pos []store.Position, from, to int64) []int64 {
	var out []int64
	for i, p := range pos {
		if p.CommitLogOffset < to && p.CommitLogOffset+int64(p.Size) > from {
			out = append(out, int64(i))
		}
	}
	return out
}

func corruptDamages() []corruptDamage {
	const victim = 1000
	return []corruptDamage{
		{name: "body bytes", logDamage: true, damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			p := pos[victim]
			rec := readRec(t, dir, p)
			v, ok := parseRecord(rec)
			require.True(t, ok)
			at := p.CommitLogOffset + int64(len(rec)-len(v.props)-2-len(v.topic)-1-len(v.body)) + 20
			b := make([]byte, 8)
			for i := range b {
				b[i] = rec[at-p.CommitLogOffset+int64(i)] ^ 0x5a
			}
			writeAt(t, segPath(dir, at), at%corruptSeg, b)
			return []int64{victim}
		}},
		{name: "properties", logDamage: true, damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			p := pos[victim]
			rec := readRec(t, dir, p)
			i := strings.Index(string(rec), "KEYS\x01k1000")
			require.Positive(t, i)
			at := p.CommitLogOffset + int64(i) + 6 // "k1000" -> "k2000": body CRC still right
			writeAt(t, segPath(dir, at), at%corruptSeg, []byte("2"))
			return []int64{victim}
		}},
		{name: "TOTALSIZE", logDamage: true, damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			p := pos[victim]
			writeAt(t, segPath(dir, p.CommitLogOffset), p.CommitLogOffset%corruptSeg, []byte{0x00, 0x01, 0x37, 0x42})
			return []int64{victim}
		}},
		{name: "garbage block", logDamage: true, damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			from := pos[victim].CommitLogOffset + 17
			g := make([]byte, 4096)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range g {
				g[i] = byte(rng.Uint32())
			}
			writeAt(t, segPath(dir, from), from%corruptSeg, g)
			return overlapping(pos, from, from+4096)
		}},
		{name: "zeroed page", logDamage: true, damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			from := pos[victim].CommitLogOffset &^ 4095
			writeAt(t, segPath(dir, from), from%corruptSeg, make([]byte, 4096))
			return overlapping(pos, from, from+4096)
		}},
		{name: "truncated segment", logDamage: true, damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			// The first segment (not the last) loses its second half.
			at := pos[500].CommitLogOffset + 10
			require.Less(t, at, int64(corruptSeg))
			require.NoError(t, os.Truncate(segPath(dir, 0), at))
			return overlapping(pos, pos[500].CommitLogOffset, corruptSeg)
		}},
		{name: "consume-queue entry wrong", damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			// Entry 1000 points at record 999: a duplicate and a missing message.
			var e [cqEntrySize]byte
			putEntry(e[:], pos[victim-1].CommitLogOffset, pos[victim-1].Size, 0)
			writeCQ(t, dir, victim, e[:])
			return nil
		}},
		{name: "consume-queue garbage", damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			g := make([]byte, 150*cqEntrySize)
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range g {
				g[i] = byte(rng.Uint32())
			}
			writeCQ(t, dir, 0, g)
			return nil
		}},
		{name: "consume-queue truncated", damage: func(t *testing.T, dir string, pos []store.Position) []int64 {
			// The last consume-queue file cut in half, and one in the
			// middle too.
			files := cqFiles(t, dir)
			last := files[len(files)-1]
			fi, err := os.Stat(last)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(last, fi.Size()/2/cqEntrySize*cqEntrySize))
			require.Greater(t, len(files), 4)
			require.NoError(t, os.Truncate(files[len(files)/2], corruptPerFile*cqEntrySize/2))
			return nil
		}},
	}
}

func readRec(t *testing.T, dir string, p store.Position) []byte {
	t.Helper()
	b, err := os.ReadFile(segPath(dir, p.CommitLogOffset))
	require.NoError(t, err)
	off := p.CommitLogOffset % corruptSeg
	return b[off : off+int64(p.Size)]
}

func cqFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "consumequeue", corruptQ.Topic, "0", "*"))
	require.NoError(t, err)
	slices.Sort(files)
	require.NotEmpty(t, files)
	return files
}

// corruptPerFile is the number of entries in a consume-queue file of the
// corruption table.
const corruptPerFile = 250

// writeCQ writes b at queue offset off of the corruption queue's files.
func writeCQ(t *testing.T, dir string, off int64, b []byte) {
	t.Helper()
	for len(b) > 0 {
		base := off - off%corruptPerFile
		n := min(int64(len(b)), (base+corruptPerFile-off)*cqEntrySize)
		writeAt(t, filepath.Join(dir, "consumequeue", corruptQ.Topic, "0", cqFileName(base)), (off-base)*cqEntrySize, b[:n])
		b = b[n:]
		off += n / cqEntrySize
	}
}

func corruptConfig() *Config {
	c := smallConfig(corruptSeg)
	c.CQEntriesPerFile = corruptPerFile
	return c
}

// TestCorruptionTable damages a closed store's real files in one way each
// (commit-log bytes, consume-queue entries) and reopens it: only the
// damaged messages are lost, the damage is logged, counted, copied aside
// and listed, every other message is served in order, and appends go on.
func TestCorruptionTable(t *testing.T) {
	base := settings(t, store.FlushAsync)
	s := openStore(t, corruptConfig(), base)
	var pos []store.Position
	for i := 0; i < corruptN; i++ {
		p, err := s.Append(bg, []store.Message{storetest.Msg(corruptQ.Topic, corruptQ.ID, corruptBody(i),
			map[string]string{"TAGS": "t", "KEYS": fmt.Sprint("k", i)})})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Close())
	require.Greater(t, pos[corruptN-1].CommitLogOffset, int64(2*corruptSeg), "three segments")

	for _, tt := range corruptDamages() {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			copyDir(t, base.Dir, dir)
			lost := tt.damage(t, dir, pos)
			set := base
			set.Dir = dir
			s := openStore(t, corruptConfig(), set)
			defer func() { require.NoError(t, s.Close()) }()

			mn, mx, err := s.Offsets(corruptQ)
			require.NoError(t, err)
			assert.Equal(t, int64(0), mn)
			assert.Equal(t, int64(corruptN), mx, "no queue offset is lost or added")
			got := readQueue(t, s, corruptQ)
			var want []int64
			for i := int64(0); i < corruptN; i++ {
				if !slices.Contains(lost, i) {
					want = append(want, i)
				}
			}
			require.Equal(t, len(want), len(got), "lost exactly %d message(s): %v", len(lost), lost)
			for i, o := range want {
				assert.Equal(t, corruptBody(int(o)), got[i], "message %d", o)
			}
			dmg := s.Damage()
			require.NotEmpty(t, dmg, "the damage is reported")
			assert.Positive(t, s.Skipped(), "and counted")
			t.Logf("lost %d, damage %+v, skipped %d", len(lost), dmg, s.Skipped())
			if tt.logDamage {
				assert.True(t, strings.HasPrefix(dmg[0].File, "commitlog"), dmg[0].File)
				ents, err := ReadManifest(dir)
				require.NoError(t, err)
				require.NotEmpty(t, ents, "listed in the manifest")
				if tt.name != "zeroed page" {
					require.NotEmpty(t, dmg[0].Copy)
					cp, err := os.ReadFile(filepath.Join(dir, dmg[0].Copy))
					require.NoError(t, err, "the damaged bytes are copied aside")
					assert.NotEmpty(t, cp)
				}
			}
			p, err := s.Append(bg, []store.Message{msg(corruptQ.Topic, corruptQ.ID, "after")})
			require.NoError(t, err)
			assert.Equal(t, int64(corruptN), p[0].QueueOffset)
			assert.Equal(t, pos[corruptN-1].CommitLogOffset+int64(pos[corruptN-1].Size), p[0].CommitLogOffset, "nothing after the damage was cut")

			// Reopened once more: the same messages, the manifest does not grow.
			n0, _ := ReadManifest(dir)
			require.NoError(t, s.Close())
			s = openStore(t, corruptConfig(), set)
			again := readQueue(t, s, corruptQ)
			assert.Equal(t, len(want)+1, len(again))
			n1, _ := ReadManifest(dir)
			assert.Equal(t, len(n0), len(n1), "damage already listed is not listed again")
		})
	}
}

// readQueue reads every message of q from offset 0 and returns the bodies.
func readQueue(t *testing.T, s *Store, q store.Queue) []string {
	t.Helper()
	var out []string
	var r store.ReadResult
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	for off := int64(0); off < mx; {
		require.NoError(t, s.Read(bg, q, off, store.ReadOptions{MaxMessages: 64}, &r))
		require.Contains(t, []store.ReadStatus{store.Found, store.NoMatchedMessage}, r.Status, "read at %d", off)
		for i, rec := range r.Records {
			m, _, err := message.DecodeStored(rec)
			require.NoError(t, err)
			assert.Equal(t, r.QueueOffsets[i], m.QueueOffset)
			out = append(out, string(m.Body))
		}
		require.Greater(t, r.NextOffset, off)
		off = r.NextOffset
	}
	return out
}

// TestVerifyOnline damages an open store's files under it (a record's body,
// a written consume-queue entry): Verify, the scrubber's pass, reports both,
// rewrites the entry, and reads skip the damaged record and serve the rest.
func TestVerifyOnline(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := corruptConfig()
	s := openStore(t, cfg, set)
	defer s.Close()
	const n = 600
	var pos []store.Position
	for i := 0; i < n; i++ {
		p, err := s.Append(bg, []store.Message{storetest.Msg(corruptQ.Topic, corruptQ.ID, corruptBody(i), map[string]string{"TAGS": "t"})})
		require.NoError(t, err)
		pos = append(pos, p...)
	}
	require.NoError(t, s.Flush(bg))
	rep, err := s.Verify(bg, store.VerifyOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(n), rep.Records)
	assert.Equal(t, int64(n), rep.Entries)
	assert.Empty(t, rep.Damage)

	p := pos[100]
	at := p.CommitLogOffset + 110 // in the body
	writeAt(t, segPath(set.Dir, at), at%corruptSeg, []byte("XXXXXXXX"))
	var e [cqEntrySize]byte
	putEntry(e[:], pos[199].CommitLogOffset, pos[199].Size, 0)
	writeCQ(t, set.Dir, 200, e[:])

	rep, err = s.Verify(bg, store.VerifyOptions{BytesPerSecond: 64 << 20})
	require.NoError(t, err)
	require.Len(t, rep.Damage, 2, "%+v", rep.Damage)
	assert.Equal(t, p.CommitLogOffset, rep.Damage[0].Offset)
	assert.Contains(t, rep.Damage[0].Reason, "CRC")
	assert.Equal(t, corruptQ.String(), rep.Damage[1].File)
	assert.Equal(t, int64(200), rep.Damage[1].Offset)
	assert.Contains(t, rep.Damage[1].Reason, "rewritten")
	assert.Equal(t, int64(n-1), rep.Records)

	got := readQueue(t, s, corruptQ)
	require.Len(t, got, n-1, "only the damaged record is skipped")
	assert.Equal(t, corruptBody(99), got[99])
	assert.Equal(t, corruptBody(101), got[100])
	assert.Equal(t, corruptBody(200), got[199], "the entry points at its record again")
	assert.Positive(t, s.Skipped())
	ents, err := ReadManifest(set.Dir)
	require.NoError(t, err)
	require.Len(t, ents, 2)
	cp, err := os.ReadFile(filepath.Join(set.Dir, ents[0].Copy))
	require.NoError(t, err, "the damaged record is copied aside")
	assert.Contains(t, string(cp), "XXXXXXXX")

	rep, err = s.Verify(bg, store.VerifyOptions{})
	require.NoError(t, err)
	assert.Len(t, rep.Damage, 1, "the record stays damaged; the entry is fixed")
	ents, err = ReadManifest(set.Dir)
	require.NoError(t, err)
	assert.Len(t, ents, 2, "found again, not listed again")
}
