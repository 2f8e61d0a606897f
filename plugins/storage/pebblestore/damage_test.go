package pebblestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// Damage tests on real files: a store is written, closed, bytes of one of
// its files flipped, and the store opened again. Each message i goes to
// queue i%2 at offset i/2 with a unique body, so what a read returns can
// be checked message by message.

const dmgN = 2000

const dmgTopic = "PDamage"

// dmgBody is message i's body: 200 bytes that do not compress, unique.
func dmgBody(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 37))
	b := make([]byte, 200)
	for j := range b {
		b[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.IntN(36)]
	}
	return fmt.Sprintf("m-%04d-%s", i, b)
}

// dmgKey is message i's key: 40 messages a key.
func dmgKey(i int) string { return fmt.Sprintf("k%02d", i%50) }

// dmgPos is where message i is: its queue and offset.
func dmgPos(i int) (store.Queue, int64) {
	return store.Queue{Topic: dmgTopic, ID: int32(i % 2)}, int64(i / 2)
}

var (
	topicsV1 = []byte(`{"topicConfigTable":{"PDamage":{"readQueueNums":2}},"dataVersion":{"counter":1}}`)
	topicsV2 = []byte(`{"topicConfigTable":{"PDamage":{"readQueueNums":2},"Later":{"readQueueNums":4}},"dataVersion":{"counter":2}}`)
	groupsV1 = []byte(`{"subscriptionGroupTable":{"G":{"groupName":"G"}}}`)
)

// writeDamageStore writes the metadata a broker writes (the topic table
// before the messages, both tables again at its stop, after them) and the
// messages, and closes the store. flush moves everything into sstables.
func writeDamageStore(t *testing.T, cfg *Config, set store.Settings, flush bool) {
	t.Helper()
	s := openStore(t, cfg, set)
	require.NoError(t, s.SaveMeta("topics", topicsV1))
	for i := 0; i < dmgN; i++ {
		q, _ := dmgPos(i)
		_, err := s.Append(bg, []store.Message{storetest.Msg(q.Topic, q.ID, dmgBody(i), map[string]string{"TAGS": "t", "KEYS": dmgKey(i)})})
		require.NoError(t, err)
	}
	require.NoError(t, s.SaveMeta("topics", topicsV2))
	require.NoError(t, s.SaveMeta("subscriptionGroup", groupsV1))
	if flush {
		require.NoError(t, s.db.Flush())
	}
	require.NoError(t, s.Close())
}

// flipIn flips n bytes of the file among paths holding needle, starting
// at skip bytes into it, and returns the file and the undamaged bytes.
func flipIn(t *testing.T, paths []string, needle string, skip, n int) (string, []byte) {
	t.Helper()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		at := bytes.Index(b, []byte(needle))
		if at < 0 {
			continue
		}
		orig := slices.Clone(b)
		for i := 0; i < n; i++ {
			b[at+skip+i] ^= 0xa5
		}
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p, orig
	}
	t.Fatalf("no file holds %q", needle)
	return "", nil
}

// consume reads q from 0 to its end as a consumer does (each read starts
// at the last read's next offset) and returns the bodies by offset. A read
// error fails the test: the consumer would stop there.
func consume(t *testing.T, s *Store, q store.Queue) map[int64]string {
	t.Helper()
	_, mx, err := s.Offsets(q)
	require.NoError(t, err)
	got := map[int64]string{}
	var r store.ReadResult
	for off, reads := int64(0), 0; off < mx; reads++ {
		require.Less(t, reads, 10000, "the reads go on")
		require.NoError(t, s.Read(bg, q, off, store.ReadOptions{MaxMessages: 32}, &r), "read %s at %d", q, off)
		for i, rec := range r.Records {
			m, _, err := message.DecodeStored(rec)
			require.NoError(t, err)
			got[r.QueueOffsets[i]] = string(m.Body)
		}
		require.Greater(t, r.NextOffset, off, "read %s at %d: status %v, next %d", q, off, r.Status, r.NextOffset)
		off = r.NextOffset
	}
	return got
}

// consumeAll consumes both queues and returns the message numbers read;
// each body is checked against the message at its offset.
func consumeAll(t *testing.T, s *Store) map[int]bool {
	t.Helper()
	read := map[int]bool{}
	for qid := int32(0); qid < 2; qid++ {
		for off, body := range consume(t, s, store.Queue{Topic: dmgTopic, ID: qid}) {
			i := int(off)*2 + int(qid)
			require.Equal(t, dmgBody(i), body, "queue %d offset %d", qid, off)
			read[i] = true
		}
	}
	return read
}

func requireMeta(t *testing.T, s *Store) {
	t.Helper()
	got, err := s.LoadMeta("topics")
	require.NoError(t, err, "the topic table survives")
	assert.JSONEq(t, string(topicsV2), string(got), "the topic table is the last one saved")
	got, err = s.LoadMeta("subscriptionGroup")
	require.NoError(t, err, "the group table survives")
	assert.JSONEq(t, string(groupsV1), string(got))
}

// readManifest returns the damage manifest lines of the data directory.
func readManifest(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "damaged", "MANIFEST.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e map[string]any
		require.NoError(t, json.Unmarshal(line, &e), "%s", line)
		out = append(out, e)
	}
	return out
}

// TestWALDamageCostsOnlyItsRecord flips 64 bytes inside one message of the
// WAL of a closed store (nothing is in an sstable yet), between the first
// topic table and the tables saved at the broker's stop: the store opens,
// both tables are the last ones saved (issue 37: the topic table was
// lost), and a consumer reading both queues from 0 gets every message but
// the damaged one; the loss is counted, listed and in the manifest.
func TestWALDamageCostsOnlyItsRecord(t *testing.T) {
	tests := []struct {
		name   string
		victim int
	}{
		// Pebble's first memtables are small: 2,000 messages fill three
		// WALs, and the middle one is followed by the last, which Pebble
		// replays after the cut.
		{"middle WAL", dmgN / 2},
		// The WAL holding the tables saved at the stop.
		{"last WAL", dmgN - 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testWALDamage(t, tt.victim, false) })
	}
	// The chunk header of the victim's record: its length is lost, the
	// next chunk is found by its checksum.
	t.Run("chunk header", func(t *testing.T) { testWALDamage(t, dmgN/2, true) })
}

// chunkStart is the start of the WAL chunk holding offset at of b (an
// undamaged WAL).
func chunkStart(t *testing.T, b []byte, at int) int {
	t.Helper()
	for blk := 0; blk < len(b); blk += walBlockSize {
		end := min(blk+walBlockSize, len(b))
		for off := blk; off+walSyncHdr <= end; {
			n := int(b[off+4]) | int(b[off+5])<<8
			hdr := map[bool]int{true: walSyncHdr, false: walRecycHdr}[b[off+6] >= 9]
			if b[off+6] == 0 {
				break
			}
			if at < off+hdr+n {
				return off
			}
			off += hdr + n
		}
	}
	t.Fatalf("offset %d is in no chunk", at)
	return 0
}

func testWALDamage(t *testing.T, victim int, header bool) {
	set := settings(t, store.FlushAsync)
	writeDamageStore(t, NewConfig(), set, false)
	wals, err := filepath.Glob(filepath.Join(set.Dir, "pebble", "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(wals), 1, "the messages fill more than one WAL")
	if header {
		var path string
		var b []byte
		for _, p := range wals {
			if b, err = os.ReadFile(p); err == nil && bytes.Contains(b, []byte(dmgBody(victim))) {
				path = p
				break
			}
		}
		require.NotEmpty(t, path)
		at := chunkStart(t, b, bytes.Index(b, []byte(dmgBody(victim))))
		for i := 0; i < 16; i++ {
			b[at+i] ^= 0xa5
		}
		require.NoError(t, os.WriteFile(path, b, 0o644))
	} else {
		flipIn(t, wals, dmgBody(victim), 40, 64)
	}

	s := openStore(t, NewConfig(), set)
	defer s.Close()
	requireMeta(t, s)
	read := consumeAll(t, s)
	var missing []int
	for i := 0; i < dmgN; i++ {
		if !read[i] {
			missing = append(missing, i)
		}
	}
	assert.Equal(t, []int{victim}, missing, "only the damaged record is lost; every other message is read")
	for qid := int32(0); qid < 2; qid++ {
		_, mx, err := s.Offsets(store.Queue{Topic: dmgTopic, ID: qid})
		require.NoError(t, err)
		assert.Equal(t, int64(dmgN/2), mx, "queue %d keeps its end", qid)
	}
	dmg := s.Damage()
	require.NotEmpty(t, dmg)
	assert.Contains(t, dmg[0].Reason, "WAL damaged")
	assert.Positive(t, s.Skipped())
	man := readManifest(t, set.Dir)
	require.NotEmpty(t, man, "the damage is in the manifest")
	assert.Contains(t, man[0]["reason"], "WAL damaged")
}

// TestSSTableDamageCostsOnlyItsBlock flips 64 bytes inside one message of
// an sstable (uncompressed, so the body is found in the file): the store
// opens with its tables, a read at the damaged offsets answers with the
// next offset past the damage instead of an error (issue 37: SYSTEM_ERROR
// with no next offset stopped a push consumer for ever), a consumer
// reading from 0 gets every message outside the damaged block, the loss
// is counted and listed, and Verify reports it by queue offset.
func TestSSTableDamageCostsOnlyItsBlock(t *testing.T) {
	set := settings(t, store.FlushAsync)
	cfg := NewConfig()
	cfg.Compression = "none"
	writeDamageStore(t, cfg, set, true)
	ssts, err := filepath.Glob(filepath.Join(set.Dir, "pebble", "*.sst"))
	require.NoError(t, err)
	const victim = dmgN / 2
	flipIn(t, ssts, dmgBody(victim), 40, 64)

	s := openStore(t, cfg, set)
	defer s.Close()
	requireMeta(t, s)

	// What is damaged, found key by key with point lookups.
	damaged := map[int]bool{}
	for i := 0; i < dmgN; i++ {
		q, off := dmgPos(i)
		_, closer, err := s.db.Get(entryKey(nil, q, off))
		if err != nil {
			require.True(t, pebble.IsCorruptionError(err), "message %d: %v", i, err)
			damaged[i] = true
			continue
		}
		require.NoError(t, closer.Close())
	}
	require.True(t, damaged[victim], "the damaged message's lookup fails")
	// A 4KiB block holds about 12 messages of 330 bytes.
	require.Less(t, len(damaged), 40, "one block's messages are damaged: %v", damaged)

	vq, voff := dmgPos(victim)
	var r store.ReadResult
	require.NoError(t, s.Read(bg, vq, voff, store.ReadOptions{MaxMessages: 32}, &r), "a read at the damage is no error")
	assert.Greater(t, r.NextOffset, voff, "it answers an offset past the damage")
	for _, o := range r.QueueOffsets {
		assert.False(t, damaged[int(o)*2+int(vq.ID)], "offset %d is damaged but returned", o)
	}

	before := s.Skipped()
	read := consumeAll(t, s)
	var wrong []int
	for i := 0; i < dmgN; i++ {
		if read[i] == damaged[i] {
			wrong = append(wrong, i)
		}
	}
	assert.Empty(t, wrong, "messages read though damaged or not read though intact")
	assert.Equal(t, dmgN-len(damaged), len(read), "every intact message is read")
	assert.GreaterOrEqual(t, s.Skipped()-before, int64(len(damaged)), "each skipped message is counted")

	rep, err := s.Verify(bg, store.VerifyOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(dmgN-len(damaged)), rep.Records, "verify reads every intact record")
	require.NotEmpty(t, rep.Damage)
	found := false
	for _, d := range rep.Damage {
		if d.Offset <= voff && voff < d.Offset+d.Length {
			found = true
			assert.Contains(t, d.Reason, fmt.Sprintf("queue %s", vq))
		}
	}
	assert.True(t, found, "verify names the damaged offsets: %+v", rep.Damage)
	assert.NotEmpty(t, readManifest(t, set.Dir), "the damage is in the manifest")

	// Searches by time and by key skip the damaged entries too.
	for i := victim - 30; i <= victim+30; i++ {
		q, off := dmgPos(i)
		if damaged[i] || q != vq {
			continue
		}
		require.NoError(t, s.Read(bg, q, off, store.ReadOptions{MaxMessages: 1}, &r))
		require.Len(t, r.Records, 1)
		m, _, err := message.DecodeStored(r.Records[0])
		require.NoError(t, err)
		got, err := s.OffsetByTime(bg, q, m.StoreTimestamp)
		require.NoError(t, err, "offset by time of message %d", i)
		assert.LessOrEqual(t, got, off, "message %d", i)
	}
	recs, err := s.QueryByKey(bg, dmgTopic, dmgKey(victim), 0, 1<<62, 100)
	require.NoError(t, err, "query by the damaged message's key")
	want := 0
	for i := victim % 50; i < dmgN; i += 50 {
		if !damaged[i] {
			want++
		}
	}
	assert.Len(t, recs, want, "every intact message with the key")

	_, err = s.Append(bg, []store.Message{msg(dmgTopic, 0, "after")})
	require.NoError(t, err, "the store keeps serving")
}

// TestMetadataIndependentOfMessageDamage damages the copies of the
// metadata documents inside the database (the WAL record of the tables
// saved at the stop; the sstable block holding them) and removes a
// document's file: the documents are files of their own, so damage to
// the database does not lose them, and a missing file falls back to the
// copy in the database.
func TestMetadataIndependentOfMessageDamage(t *testing.T) {
	t.Run("WAL record of the tables", func(t *testing.T) {
		set := settings(t, store.FlushAsync)
		writeDamageStore(t, NewConfig(), set, false)
		wals, err := filepath.Glob(filepath.Join(set.Dir, "pebble", "*.log"))
		require.NoError(t, err)
		flipIn(t, wals, `"Later"`, 0, 16)
		s := openStore(t, NewConfig(), set)
		defer s.Close()
		requireMeta(t, s)
		assert.NotEmpty(t, s.Damage(), "the damaged record is reported")
	})
	t.Run("sstable block of the tables", func(t *testing.T) {
		set := settings(t, store.FlushAsync)
		cfg := NewConfig()
		cfg.Compression = "none"
		writeDamageStore(t, cfg, set, true)
		ssts, err := filepath.Glob(filepath.Join(set.Dir, "pebble", "*.sst"))
		require.NoError(t, err)
		flipIn(t, ssts, `"Later"`, 0, 16)
		s := openStore(t, cfg, set)
		defer s.Close()
		_, err = s.get([]byte("Mtopics"))
		require.True(t, pebble.IsCorruptionError(err), "the copy in the database is damaged: %v", err)
		requireMeta(t, s)
		assert.Equal(t, dmgN, len(consumeAll(t, s)), "the messages are intact")
	})
	t.Run("file removed", func(t *testing.T) {
		set := settings(t, store.FlushAsync)
		writeDamageStore(t, NewConfig(), set, true)
		require.NoError(t, os.Remove(filepath.Join(set.Dir, "config", "topics.json")))
		s := openStore(t, NewConfig(), set)
		defer s.Close()
		requireMeta(t, s)
		names, err := s.MetaNames()
		require.NoError(t, err)
		assert.Equal(t, []string{"subscriptionGroup", "topics"}, names)
	})
}

// TestMetadataOfOlderStores: a store written before documents were files
// holds them only as keys; they are read, listed and deleted there.
func TestMetadataOfOlderStores(t *testing.T) {
	set := settings(t, store.FlushAsync)
	s := openStore(t, NewConfig(), set)
	require.NoError(t, s.db.Set([]byte("Mtopics"), topicsV1, pebble.Sync))
	require.NoError(t, s.Close())
	s = openStore(t, NewConfig(), set)
	defer s.Close()
	got, err := s.LoadMeta("topics")
	require.NoError(t, err)
	assert.Equal(t, topicsV1, got)
	names, err := s.MetaNames()
	require.NoError(t, err)
	assert.Equal(t, []string{"topics"}, names)
	require.NoError(t, s.SaveMeta("topics", topicsV2))
	got, err = s.LoadMeta("topics")
	require.NoError(t, err)
	assert.Equal(t, topicsV2, got)
	require.NoError(t, s.DeleteMeta("topics"))
	_, err = s.LoadMeta("topics")
	require.ErrorIs(t, err, store.ErrNotFound)
}
