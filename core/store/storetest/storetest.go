// Package storetest is the conformance suite of the storage seam: every
// store.Store implementation runs it from its own tests,
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, dir string, s store.Settings) store.Store {
//			st, err := mystore.Open(dir, s)
//			require.NoError(t, err)
//			return st
//		})
//	}
//
// Each subtest runs on a fresh t.TempDir(). The open function is called
// again on the same directory to check persistence, so it must not wipe
// it. Optional interfaces (Metadata, KeyIndexer, QueueLister,
// TopicDeleter, Flusher) are checked when the store implements them.
// BorrowedInputs (CheckBorrowedInputs) checks the ownership rules of the
// store package doc: it overwrites every buffer, map and struct handed to
// Append and SaveMeta once the call returned, as the broker and the
// transport do, and requires the stored messages unchanged.
//
// Read follows RocketMQ's DefaultMessageStore.getMessage: the status table
// of PULL_MESSAGE, and the batch-full check (MaxMessages, MaxBytes) comes
// before filtering, so a full batch stops at the next entry even when
// Filter or Match would have skipped it; NextOffset is the first entry not
// scanned.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// OpenFunc opens a store in dir with the given settings (s.Dir == dir).
type OpenFunc func(t *testing.T, dir string, s store.Settings) store.Store

// Options describe what the store under test supports beyond the seam.
type Options struct {
	// SegmentSize, when positive, says the stores open returns roll their
	// stored units (segments) at about this many bytes, so the suite can
	// fill several of them and check that DeleteBefore drops the old ones.
	// Zero runs only the DeleteBefore checks that must hold for any unit
	// size (nothing live is deleted).
	SegmentSize int64
}

// Run runs the suite with default options.
func Run(t *testing.T, open OpenFunc) { RunWithOptions(t, open, Options{}) }

// RunWithOptions runs every conformance subtest.
func RunWithOptions(t *testing.T, open OpenFunc, o Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"BatchOffsets", testBatchOffsets},
		{"LargeBatch", testLargeBatch},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ReadWhileWriting", testReadWhileWriting},
		{"Offsets", testOffsets},
		{"ReadStatus", testReadStatus},
		{"ReadLimits", testReadLimits},
		{"FilterAndMatch", testFilterAndMatch},
		{"MaxScan", testMaxScan},
		{"ReadResultReuse", testReadResultReuse},
		{"OffsetByTime", testOffsetByTime},
		{"Lookup", testLookup},
		{"Reopen", testReopen},
		{"BadArguments", testBadArguments},
		{"TooLarge", testTooLarge},
		{"Closed", testClosed},
		{"DeleteBefore", testDeleteBefore},
		{"Metadata", testMetadata},
		{"KeyIndexer", testKeyIndexer},
		{"QueueLister", testQueueLister},
		{"TopicDeleter", testTopicDeleter},
		{"Flusher", testFlusher},
		{"Verifier", testVerifier},
		{"Model", testModel},
		{"BorrowedInputs", func(t *testing.T, h *Harness) { CheckBorrowedInputs(t, h.S) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHarness(t, open, o)
			tt.fn(t, h)
		})
	}
}

// Harness holds the store under test and reopens it on the same directory.
type Harness struct {
	T        *testing.T
	Dir      string
	Settings store.Settings
	Opts     Options
	S        store.Store
	open     OpenFunc
}

// DefaultSettings are the settings the suite opens stores with.
func DefaultSettings(dir string) store.Settings {
	return store.Settings{Dir: dir, Flush: store.FlushAsync, FlushInterval: 20 * time.Millisecond,
		Retention: 72 * time.Hour, MaxMessageSize: message.DefaultMaxMessageSize}
}

// NewHarness opens a store on a fresh directory; it is closed at cleanup.
func NewHarness(t *testing.T, open OpenFunc, o Options) *Harness {
	dir := t.TempDir()
	h := &Harness{T: t, Dir: dir, Settings: DefaultSettings(dir), Opts: o, open: open}
	h.S = open(t, dir, h.Settings)
	require.NotNil(t, h.S)
	t.Cleanup(func() {
		if h.S != nil {
			_ = h.S.Close()
		}
	})
	return h
}

// Reopen closes the store and opens the same directory again.
func (h *Harness) Reopen() {
	h.T.Helper()
	require.NoError(h.T, h.S.Close())
	h.S = nil
	h.S = h.open(h.T, h.Dir, h.Settings)
	require.NotNil(h.T, h.S)
}

// Msg builds a message with recognisable fields.
func Msg(topic string, qid int32, body string, props map[string]string) store.Message {
	p := message.Properties{}
	for k, v := range props {
		p[k] = v
	}
	ext := &message.Ext{
		Message:                   message.Message{Topic: topic, Flag: 7, Properties: p, Body: []byte(body)},
		QueueID:                   qid,
		SysFlag:                   0,
		BornTimestamp:             1700000000000,
		BornHost:                  netip.MustParseAddrPort("10.1.2.3:50001"),
		StoreHost:                 netip.MustParseAddrPort("10.9.8.7:10911"),
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 0,
	}
	return store.Message{Ext: ext, TagsCode: message.TagsHashCode(p[message.PropertyTags])}
}

var bg = context.Background()

// Append appends msgs and fails the test on error.
func (h *Harness) Append(msgs ...store.Message) []store.Position {
	h.T.Helper()
	pos, err := h.S.Append(bg, msgs)
	require.NoError(h.T, err)
	require.Len(h.T, pos, len(msgs))
	return pos
}

// Read reads q from offset.
func (h *Harness) Read(q store.Queue, offset int64, opts store.ReadOptions) *store.ReadResult {
	h.T.Helper()
	var r store.ReadResult
	require.NoError(h.T, h.S.Read(bg, q, offset, opts, &r))
	require.Len(h.T, r.QueueOffsets, len(r.Records))
	checkRuns(h.T, &r)
	return &r
}

// checkRuns: when an engine fills Runs, they hold exactly the bytes of
// Records, in order.
func checkRuns(t testing.TB, r *store.ReadResult) {
	t.Helper()
	if len(r.Runs) == 0 {
		return
	}
	var recs, runs []byte
	for _, rec := range r.Records {
		recs = append(recs, rec...)
	}
	for _, run := range r.Runs {
		runs = append(runs, run...)
	}
	require.Equal(t, recs, runs, "Runs are Records' bytes")
	require.LessOrEqual(t, len(r.Runs), len(r.Records))
}

// ReadAll reads q from offset to its max, copying the records.
func (h *Harness) ReadAll(q store.Queue, offset int64) ([][]byte, []int64) {
	h.T.Helper()
	var recs [][]byte
	var offs []int64
	var r store.ReadResult
	for i := 0; i < 100000; i++ {
		require.NoError(h.T, h.S.Read(bg, q, offset, store.ReadOptions{}, &r))
		checkRuns(h.T, &r)
		if r.Status != store.Found {
			require.Contains(h.T, []store.ReadStatus{store.OffsetOverflowOne, store.NoMessageInQueue}, r.Status, "reading %s at %d", q, offset)
			return recs, offs
		}
		for i, rec := range r.Records {
			recs = append(recs, append([]byte(nil), rec...))
			offs = append(offs, r.QueueOffsets[i])
		}
		require.Greater(h.T, r.NextOffset, offset)
		offset = r.NextOffset
	}
	h.T.Fatal("ReadAll did not finish")
	return nil, nil
}

// Decode decodes one whole record.
func Decode(t *testing.T, rec []byte) *message.Ext {
	t.Helper()
	m, n, err := message.DecodeStored(rec)
	require.NoError(t, err)
	require.Equal(t, len(rec), n, "record has trailing bytes")
	return m
}

// StripRecordCRC returns props without the record checksum property an
// engine may add (store.PropertyRecordCRC), checking its form when present.
func StripRecordCRC(props message.Properties) message.Properties {
	v, ok := props[store.PropertyRecordCRC]
	if !ok {
		return props
	}
	out := make(message.Properties, len(props))
	for k, x := range props {
		if k != store.PropertyRecordCRC {
			out[k] = x
		}
	}
	if len(v) != 10 {
		out[store.PropertyRecordCRC] = v // a bad one shows in the diff
	}
	return out
}

func testRoundTrip(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "RoundTrip", ID: 3}
	in := []store.Message{
		Msg(q.Topic, q.ID, "hello", map[string]string{"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "U1", "custom": "v"}),
		Msg(q.Topic, q.ID, "", nil),
		Msg(q.Topic, q.ID, string(make([]byte, 10000)), map[string]string{"TAGS": "b"}),
	}
	v6 := Msg(q.Topic, q.ID, "six", map[string]string{"x": "y"})
	v6.BornHost = netip.MustParseAddrPort("[2001:db8::1]:40000")
	v6.StoreHost = netip.MustParseAddrPort("[2001:db8::2]:10911")
	v6.SysFlag = message.FlagCompressed | message.TransactionCommit
	in = append(in, v6)
	before := time.Now().UnixMilli()
	pos := h.Append(in...)
	after := time.Now().UnixMilli()

	seen := map[int64]bool{}
	for i, p := range pos {
		assert.Equal(t, int64(i), p.QueueOffset)
		assert.False(t, seen[p.CommitLogOffset], "duplicate commit-log offset")
		seen[p.CommitLogOffset] = true
		enc, err := message.EncodeStored(in[i].Ext)
		require.NoError(t, err)
		if n := int32(len(enc)); p.Size != n {
			// An engine may end the properties with the record checksum
			// (store.PropertyRecordCRC).
			extra := int32(store.RecordCRCLen)
			if len(in[i].Properties) > 0 {
				extra++
			}
			assert.Equal(t, n+extra, p.Size, "stored size: the encoded message, with or without the record checksum property")
		}
		assert.GreaterOrEqual(t, p.StoreTimestamp, before)
		assert.LessOrEqual(t, p.StoreTimestamp, after+1)
	}
	r := h.Read(q, 0, store.ReadOptions{})
	require.Equal(t, store.Found, r.Status)
	require.Len(t, r.Records, len(in))
	assert.Equal(t, int64(len(in)), r.NextOffset)
	assert.Equal(t, int64(0), r.MinOffset)
	assert.Equal(t, int64(len(in)), r.MaxOffset)
	total := 0
	for i, rec := range r.Records {
		total += len(rec)
		want := in[i]
		m := Decode(t, rec)
		assert.Equal(t, int64(i), r.QueueOffsets[i])
		assert.Equal(t, want.Topic, m.Topic)
		assert.Equal(t, string(want.Body), string(m.Body))
		assert.Equal(t, want.Flag, m.Flag)
		assert.Equal(t, map[string]string(want.Properties), map[string]string(StripRecordCRC(m.Properties)))
		assert.Equal(t, q.ID, m.QueueID)
		assert.Equal(t, pos[i].QueueOffset, m.QueueOffset)
		assert.Equal(t, pos[i].CommitLogOffset, m.CommitLogOffset)
		assert.Equal(t, pos[i].StoreTimestamp, m.StoreTimestamp)
		assert.Equal(t, pos[i].Size, m.StoreSize)
		assert.Equal(t, want.BornTimestamp, m.BornTimestamp)
		assert.Equal(t, want.BornHost, m.BornHost)
		assert.Equal(t, want.StoreHost, m.StoreHost)
		assert.Equal(t, want.SysFlag&^(message.FlagBornHostV6|message.FlagStoreHostV6), m.SysFlag&^(message.FlagBornHostV6|message.FlagStoreHostV6))
		assert.Equal(t, want.ReconsumeTimes, m.ReconsumeTimes)
		assert.Equal(t, want.PreparedTransactionOffset, m.PreparedTransactionOffset)
		assert.True(t, m.VerifyCRC(), "body CRC")
		got, err := h.S.Lookup(bg, pos[i].CommitLogOffset)
		require.NoError(t, err)
		assert.Equal(t, rec, got, "Lookup and Read return the same bytes")
	}
	assert.Equal(t, total, r.Bytes)
	// The records concatenate into a pull body.
	var body []byte
	for _, rec := range r.Records {
		body = append(body, rec...)
	}
	all, err := message.DecodeAll(body)
	require.NoError(t, err)
	assert.Len(t, all, len(in))
	// The caller's messages are not changed.
	assert.Equal(t, int64(0), in[0].QueueOffset)
	assert.Equal(t, int64(0), in[0].CommitLogOffset)
}

func testBatchOffsets(t *testing.T, h *Harness) {
	a, b := store.Queue{Topic: "Batch", ID: 0}, store.Queue{Topic: "Batch", ID: 1}
	h.Append(Msg(a.Topic, a.ID, "a0", nil))
	pos := h.Append(
		Msg(a.Topic, a.ID, "a1", nil), Msg(b.Topic, b.ID, "b0", nil), Msg(a.Topic, a.ID, "a2", nil),
		Msg(b.Topic, b.ID, "b1", nil), Msg("Other", 0, "o0", nil), Msg(a.Topic, a.ID, "a3", nil),
	)
	want := []int64{1, 0, 2, 1, 0, 3}
	for i, p := range pos {
		assert.Equal(t, want[i], p.QueueOffset, "message %d", i)
		if i > 0 {
			assert.Greater(t, p.CommitLogOffset, pos[i-1].CommitLogOffset, "a batch is stored in order")
		}
	}
	for _, tt := range []struct {
		q    store.Queue
		want []string
	}{
		{a, []string{"a0", "a1", "a2", "a3"}},
		{b, []string{"b0", "b1"}},
		{store.Queue{Topic: "Other"}, []string{"o0"}},
	} {
		recs, offs := h.ReadAll(tt.q, 0)
		require.Len(t, recs, len(tt.want))
		for i, rec := range recs {
			assert.Equal(t, tt.want[i], string(Decode(t, rec).Body))
			assert.Equal(t, int64(i), offs[i])
		}
	}
}

func testLargeBatch(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "LargeBatch", ID: 0}
	var msgs []store.Message
	for i := 0; i < 1000; i++ {
		msgs = append(msgs, Msg(q.Topic, q.ID, fmt.Sprintf("m%04d-%s", i, make([]byte, i%300)), nil))
	}
	pos := h.Append(msgs...)
	for i, p := range pos {
		require.Equal(t, int64(i), p.QueueOffset)
	}
	recs, _ := h.ReadAll(q, 0)
	require.Len(t, recs, len(msgs))
	for i, rec := range recs {
		m := Decode(t, rec)
		require.Equal(t, string(msgs[i].Body), string(m.Body))
		require.Equal(t, pos[i].CommitLogOffset, m.CommitLogOffset)
	}
}

func testConcurrentWriters(t *testing.T, h *Harness) {
	const writers, perWriter, queues = 8, 200, 4
	type sent struct {
		writer, seq int
		pos         store.Position
	}
	results := make([][]sent, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for seq := 0; seq < perWriter; {
				n := 1 + (seq+w)%4
				var batch []store.Message
				for k := 0; k < n && seq+k < perWriter; k++ {
					s := seq + k
					batch = append(batch, Msg("Concurrent", int32(s%queues), fmt.Sprintf("%d/%d", w, s), nil))
				}
				pos, err := h.S.Append(bg, batch)
				if err != nil {
					errs <- err
					return
				}
				for k, p := range pos {
					results[w] = append(results[w], sent{writer: w, seq: seq + k, pos: p})
				}
				seq += len(batch)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	phys := map[int64]bool{}
	byQueue := map[int32]map[int64]string{}
	for w := range results {
		last := map[int32]int64{}
		for _, s := range results[w] {
			qid := int32(s.seq % queues)
			if prev, ok := last[qid]; ok {
				assert.Greater(t, s.pos.QueueOffset, prev, "a writer's messages keep their order in a queue")
			}
			last[qid] = s.pos.QueueOffset
			assert.False(t, phys[s.pos.CommitLogOffset], "commit-log offsets are unique")
			phys[s.pos.CommitLogOffset] = true
			if byQueue[qid] == nil {
				byQueue[qid] = map[int64]string{}
			}
			_, dup := byQueue[qid][s.pos.QueueOffset]
			assert.False(t, dup, "queue offsets are unique")
			byQueue[qid][s.pos.QueueOffset] = fmt.Sprintf("%d/%d", s.writer, s.seq)
		}
	}
	total := 0
	for qid := int32(0); qid < queues; qid++ {
		q := store.Queue{Topic: "Concurrent", ID: qid}
		mn, mx, err := h.S.Offsets(q)
		require.NoError(t, err)
		assert.Equal(t, int64(0), mn)
		assert.Equal(t, int64(len(byQueue[qid])), mx, "queue offsets are dense")
		recs, offs := h.ReadAll(q, 0)
		require.Len(t, recs, len(byQueue[qid]))
		for i, rec := range recs {
			assert.Equal(t, int64(i), offs[i])
			m := Decode(t, rec)
			assert.Equal(t, byQueue[qid][int64(i)], string(m.Body))
			assert.Equal(t, int64(i), m.QueueOffset)
		}
		total += len(recs)
	}
	assert.Equal(t, writers*perWriter, total)
}

// testReadWhileWriting tails queues while they are written: a reader must
// only ever see whole records, in dense offset order.
func testReadWhileWriting(t *testing.T, h *Harness) {
	const writers, perWriter, queues = 4, 300, 2
	var wg sync.WaitGroup
	errs := make(chan error, writers+2*queues)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				m := Msg("Tail", int32(i%queues), fmt.Sprintf("%d/%d/%s", w, i, make([]byte, i%200)), map[string]string{"TAGS": "t"})
				if _, err := h.S.Append(bg, []store.Message{m}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	want := int64(writers * perWriter / queues)
	for qid := int32(0); qid < queues; qid++ {
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func(q store.Queue) {
				defer wg.Done()
				var res store.ReadResult
				deadline := time.Now().Add(30 * time.Second)
				for off := int64(0); off < want; {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("%s: reader stuck at %d", q, off)
						return
					}
					if err := h.S.Read(bg, q, off, store.ReadOptions{MaxMessages: 7}, &res); err != nil {
						errs <- err
						return
					}
					switch res.Status {
					case store.Found:
					case store.OffsetOverflowOne, store.NoMessageInQueue:
						time.Sleep(100 * time.Microsecond)
						continue
					default:
						errs <- fmt.Errorf("%s at %d: status %s", q, off, res.Status)
						return
					}
					for i, rec := range res.Records {
						m, n, err := message.DecodeStored(rec)
						if err != nil || n != len(rec) || !m.VerifyCRC() {
							errs <- fmt.Errorf("%s at %d: torn record: %v", q, res.QueueOffsets[i], err)
							return
						}
						if res.QueueOffsets[i] != off || m.QueueOffset != off {
							errs <- fmt.Errorf("%s: got offset %d (record says %d), want %d", q, res.QueueOffsets[i], m.QueueOffset, off)
							return
						}
						off++
					}
					if res.NextOffset != off {
						errs <- fmt.Errorf("%s: next offset %d, want %d", q, res.NextOffset, off)
						return
					}
				}
			}(store.Queue{Topic: "Tail", ID: qid})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func testOffsets(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Offsets", ID: 1}
	mn, mx, err := h.S.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 0}, [2]int64{mn, mx}, "a queue never written")
	for i := 1; i <= 5; i++ {
		h.Append(Msg(q.Topic, q.ID, strconv.Itoa(i), nil))
		mn, mx, err = h.S.Offsets(q)
		require.NoError(t, err)
		assert.Equal(t, [2]int64{0, int64(i)}, [2]int64{mn, mx})
	}
	mn, mx, err = h.S.Offsets(store.Queue{Topic: "Offsets", ID: 2})
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 0}, [2]int64{mn, mx}, "another queue of the topic")
}

func testReadStatus(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Status", ID: 0}
	empty := store.Queue{Topic: "Status", ID: 1}
	for i := 0; i < 5; i++ {
		h.Append(Msg(q.Topic, q.ID, strconv.Itoa(i), map[string]string{"TAGS": "t"}))
	}
	rejectAll := store.ReadOptions{Filter: func(int64) bool { return false }}
	noMatch := store.ReadOptions{Match: func([]byte) bool { return false }}
	tests := []struct {
		name     string
		q        store.Queue
		give     int64
		opts     store.ReadOptions
		want     store.ReadStatus
		wantNext int64
		wantRecs int
	}{
		{"unknown topic", store.Queue{Topic: "NoSuchTopic"}, 0, store.ReadOptions{}, store.NoMessageInQueue, 0, 0},
		{"unknown topic at offset", store.Queue{Topic: "NoSuchTopic"}, 7, store.ReadOptions{}, store.NoMessageInQueue, 0, 0},
		{"empty queue", empty, 0, store.ReadOptions{}, store.NoMessageInQueue, 0, 0},
		{"negative offset", q, -1, store.ReadOptions{}, store.OffsetTooSmall, 0, 0},
		{"from start", q, 0, store.ReadOptions{}, store.Found, 5, 5},
		{"from middle", q, 3, store.ReadOptions{}, store.Found, 5, 2},
		{"last", q, 4, store.ReadOptions{}, store.Found, 5, 1},
		{"at max", q, 5, store.ReadOptions{}, store.OffsetOverflowOne, 5, 0},
		{"past max", q, 9, store.ReadOptions{}, store.OffsetOverflowBadly, 5, 0},
		{"all filtered by tag code", q, 1, rejectAll, store.NoMatchedMessage, 5, 0},
		{"all rejected by match", q, 0, noMatch, store.NoMatchedMessage, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.Read(tt.q, tt.give, tt.opts)
			assert.Equal(t, tt.want, r.Status)
			assert.Equal(t, tt.wantNext, r.NextOffset)
			assert.Len(t, r.Records, tt.wantRecs)
			if tt.q == q {
				assert.Equal(t, int64(0), r.MinOffset)
				assert.Equal(t, int64(5), r.MaxOffset)
			}
			for i, off := range r.QueueOffsets {
				assert.Equal(t, tt.give+int64(i), off)
				assert.Equal(t, strconv.FormatInt(off, 10), string(Decode(t, r.Records[i]).Body))
			}
		})
	}
}

func testReadLimits(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Limits", ID: 0}
	var msgs []store.Message
	for i := 0; i < 50; i++ {
		msgs = append(msgs, Msg(q.Topic, q.ID, fmt.Sprintf("%03d%s", i, make([]byte, 997)), nil))
	}
	pos := h.Append(msgs...)
	size := int(pos[0].Size)
	tests := []struct {
		name     string
		give     int64
		opts     store.ReadOptions
		wantRecs int
	}{
		{"default max messages", 0, store.ReadOptions{}, 32},
		{"max messages", 10, store.ReadOptions{MaxMessages: 2}, 2},
		{"max messages past the end", 45, store.ReadOptions{MaxMessages: 10}, 5},
		{"max bytes", 0, store.ReadOptions{MaxBytes: size*2 + size/2}, 2},
		{"max bytes exact", 0, store.ReadOptions{MaxBytes: size * 3}, 3},
		{"max bytes below one message", 7, store.ReadOptions{MaxBytes: 10}, 1},
		{"both", 0, store.ReadOptions{MaxMessages: 4, MaxBytes: size * 10}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.Read(q, tt.give, tt.opts)
			require.Equal(t, store.Found, r.Status)
			assert.Len(t, r.Records, tt.wantRecs)
			assert.Equal(t, tt.give+int64(tt.wantRecs), r.NextOffset)
			assert.Equal(t, tt.wantRecs*size, r.Bytes)
			for i, rec := range r.Records {
				assert.Equal(t, fmt.Sprintf("%03d", tt.give+int64(i)), string(Decode(t, rec).Body[:3]))
			}
		})
	}
}

func testFilterAndMatch(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Filter", ID: 0}
	tags := []string{"A", "B", "C", "A", "B", "A", "C", "C", "A", "B"}
	for i, tag := range tags {
		h.Append(Msg(q.Topic, q.ID, strconv.Itoa(i), map[string]string{"TAGS": tag, "n": strconv.Itoa(i % 2)}))
	}
	codeA := message.TagsHashCode("A")
	onlyA := func(code int64) bool { return code == codeA }
	even := func(rec []byte) bool {
		m, _, err := message.DecodeStored(rec)
		return err == nil && m.Properties["n"] == "0"
	}
	tests := []struct {
		name     string
		give     int64
		opts     store.ReadOptions
		want     []int64
		wantNext int64
	}{
		{"filter", 0, store.ReadOptions{Filter: onlyA}, []int64{0, 3, 5, 8}, 10},
		{"filter from middle", 4, store.ReadOptions{Filter: onlyA}, []int64{5, 8}, 10},
		{"filter with max messages", 0, store.ReadOptions{Filter: onlyA, MaxMessages: 2}, []int64{0, 3}, 4},
		{"match", 0, store.ReadOptions{Match: even}, []int64{0, 2, 4, 6, 8}, 10},
		{"match with max messages", 0, store.ReadOptions{Match: even, MaxMessages: 3}, []int64{0, 2, 4}, 5},
		{"filter and match", 0, store.ReadOptions{Filter: onlyA, Match: even}, []int64{0, 8}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.Read(q, tt.give, tt.opts)
			require.Equal(t, store.Found, r.Status)
			assert.Equal(t, tt.want, r.QueueOffsets)
			assert.Equal(t, tt.wantNext, r.NextOffset)
			for i, rec := range r.Records {
				m := Decode(t, rec)
				assert.Equal(t, strconv.FormatInt(tt.want[i], 10), string(m.Body))
			}
		})
	}
	t.Run("filter sees each entry's tag code", func(t *testing.T) {
		var codes []int64
		r := h.Read(q, 0, store.ReadOptions{Filter: func(c int64) bool { codes = append(codes, c); return true }})
		require.Equal(t, store.Found, r.Status)
		require.Len(t, codes, len(tags))
		for i, tag := range tags {
			assert.Equal(t, message.TagsHashCode(tag), codes[i])
		}
	})
}

func testMaxScan(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "MaxScan", ID: 0}
	var msgs []store.Message
	for i := 0; i < 20; i++ {
		tag := "skip"
		if i == 15 {
			tag = "want"
		}
		msgs = append(msgs, Msg(q.Topic, q.ID, strconv.Itoa(i), map[string]string{"TAGS": tag}))
	}
	h.Append(msgs...)
	want := message.TagsHashCode("want")
	filter := func(c int64) bool { return c == want }
	r := h.Read(q, 0, store.ReadOptions{Filter: filter, MaxScan: 5})
	assert.Equal(t, store.NoMatchedMessage, r.Status)
	assert.Equal(t, int64(5), r.NextOffset, "NextOffset moves past the scanned entries")
	r = h.Read(q, 10, store.ReadOptions{Filter: filter, MaxScan: 10})
	require.Equal(t, store.Found, r.Status)
	assert.Equal(t, []int64{15}, r.QueueOffsets)
	assert.Equal(t, int64(20), r.NextOffset)
}

func testReadResultReuse(t *testing.T, h *Harness) {
	a, b := store.Queue{Topic: "Reuse", ID: 0}, store.Queue{Topic: "Reuse", ID: 1}
	h.Append(Msg(a.Topic, a.ID, "a0", nil), Msg(a.Topic, a.ID, "a1", nil), Msg(b.Topic, b.ID, "b0", nil))
	var r store.ReadResult
	require.NoError(t, h.S.Read(bg, a, 0, store.ReadOptions{}, &r))
	require.Len(t, r.Records, 2)
	require.NoError(t, h.S.Read(bg, b, 0, store.ReadOptions{}, &r))
	require.Equal(t, store.Found, r.Status)
	require.Len(t, r.Records, 1, "a reused result is reset")
	assert.Equal(t, []int64{0}, r.QueueOffsets)
	assert.Equal(t, "b0", string(Decode(t, r.Records[0]).Body))
	require.NoError(t, h.S.Read(bg, b, 5, store.ReadOptions{}, &r))
	assert.Equal(t, store.OffsetOverflowBadly, r.Status)
	assert.Empty(t, r.Records)
	assert.Zero(t, r.Bytes)
}

// waitNextMilli waits until the wall clock has moved past ms.
func waitNextMilli(ms int64) {
	for time.Now().UnixMilli() <= ms {
		time.Sleep(200 * time.Microsecond)
	}
}

func testOffsetByTime(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "ByTime", ID: 0}
	off, err := h.S.OffsetByTime(bg, q, time.Now().UnixMilli())
	require.NoError(t, err)
	assert.Equal(t, int64(0), off, "unknown queue")
	var pos []store.Position
	for i := 0; i < 6; i++ {
		p := h.Append(Msg(q.Topic, q.ID, strconv.Itoa(i), nil), Msg(q.Topic, q.ID, strconv.Itoa(i), nil))
		pos = append(pos, p...)
		waitNextMilli(p[1].StoreTimestamp)
	}
	h.Append(Msg("ByTimeOther", 0, "x", nil))
	firstAtOrAfter := func(ts int64) int64 {
		for _, p := range pos {
			if p.StoreTimestamp >= ts {
				return p.QueueOffset
			}
		}
		return int64(len(pos))
	}
	tests := []struct {
		name string
		give int64
	}{
		{"long before", 0},
		{"before first", pos[0].StoreTimestamp - 1},
		{"first", pos[0].StoreTimestamp},
		{"second batch", pos[2].StoreTimestamp},
		{"between", pos[4].StoreTimestamp + 0},
		{"last", pos[len(pos)-1].StoreTimestamp},
		{"after last", pos[len(pos)-1].StoreTimestamp + 1},
		{"far future", time.Now().Add(time.Hour).UnixMilli()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.S.OffsetByTime(bg, q, tt.give)
			require.NoError(t, err)
			assert.Equal(t, firstAtOrAfter(tt.give), got)
		})
	}
}

func testLookup(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Lookup", ID: 0}
	pos := h.Append(Msg(q.Topic, q.ID, "one", nil), Msg(q.Topic, q.ID, "two", nil))
	for i, p := range pos {
		rec, err := h.S.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
		m := Decode(t, rec)
		assert.Equal(t, []string{"one", "two"}[i], string(m.Body))
		assert.Equal(t, p.CommitLogOffset, m.CommitLogOffset)
		assert.Equal(t, p.QueueOffset, m.QueueOffset)
	}
	last := pos[len(pos)-1]
	end := last.CommitLogOffset + int64(last.Size)
	tests := []struct {
		name string
		give int64
	}{
		{"negative", -1},
		{"very negative", -1 << 62},
		{"at end", end},
		{"beyond end", end + 1000},
		{"far beyond end", 1 << 62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.S.Lookup(bg, tt.give)
			require.Error(t, err)
			assert.True(t, errors.Is(err, store.ErrOffsetOutOfRange) || errors.Is(err, store.ErrNotFound), "got %v", err)
		})
	}
	t.Run("inside a record", func(t *testing.T) {
		for _, d := range []int64{1, 4, 8, 20, int64(pos[0].Size) - 1} {
			rec, err := h.S.Lookup(bg, pos[0].CommitLogOffset+d)
			if err == nil {
				// A store may only answer with a whole, valid record.
				Decode(t, rec)
			}
		}
	})
}

func testReopen(t *testing.T, h *Harness) {
	a, b := store.Queue{Topic: "Reopen", ID: 0}, store.Queue{Topic: "Reopen", ID: 5}
	var pos []store.Position
	for i := 0; i < 10; i++ {
		pos = append(pos, h.Append(Msg(a.Topic, a.ID, "a"+strconv.Itoa(i), map[string]string{"TAGS": "x"}),
			Msg(b.Topic, b.ID, "b"+strconv.Itoa(i), nil))...)
	}
	end := pos[len(pos)-1].CommitLogOffset
	h.Reopen()
	for _, q := range []store.Queue{a, b} {
		mn, mx, err := h.S.Offsets(q)
		require.NoError(t, err)
		assert.Equal(t, [2]int64{0, 10}, [2]int64{mn, mx}, "%s", q)
		recs, _ := h.ReadAll(q, 0)
		require.Len(t, recs, 10)
		for i, rec := range recs {
			m := Decode(t, rec)
			prefix := "a"
			if q == b {
				prefix = "b"
			}
			assert.Equal(t, prefix+strconv.Itoa(i), string(m.Body))
			assert.Equal(t, int64(i), m.QueueOffset)
			assert.True(t, m.VerifyCRC())
		}
	}
	for _, p := range pos {
		rec, err := h.S.Lookup(bg, p.CommitLogOffset)
		require.NoError(t, err)
		assert.Equal(t, p.CommitLogOffset, Decode(t, rec).CommitLogOffset)
	}
	r := h.Read(a, 0, store.ReadOptions{Filter: func(c int64) bool { return c == message.TagsHashCode("x") }})
	assert.Len(t, r.Records, 10, "tag codes survive a reopen")
	next := h.Append(Msg(a.Topic, a.ID, "a10", nil), Msg(b.Topic, b.ID, "b10", nil))
	assert.Equal(t, int64(10), next[0].QueueOffset)
	assert.Equal(t, int64(10), next[1].QueueOffset)
	assert.Greater(t, next[0].CommitLogOffset, end)
	h.Reopen()
	recs, _ := h.ReadAll(a, 9)
	require.Len(t, recs, 2)
	assert.Equal(t, "a10", string(Decode(t, recs[1]).Body))
}

func testBadArguments(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "BadArgs", ID: 0}
	h.Append(Msg(q.Topic, q.ID, "ok", nil))
	tests := []struct {
		name string
		give store.Message
	}{
		{"empty topic", Msg("", 0, "x", nil)},
		{"negative queue id", Msg("BadArgs", -1, "x", nil)},
		{"nil message", store.Message{}},
		{"topic too long", Msg(fmt.Sprintf("%0*d", message.MaxTopicLength+1, 0), 0, "x", nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pos, err := h.S.Append(bg, []store.Message{Msg(q.Topic, q.ID, "first", nil), tt.give})
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrBadArgument)
			assert.Nil(t, pos)
		})
	}
	t.Run("nothing of a rejected call is stored", func(t *testing.T) {
		mn, mx, err := h.S.Offsets(q)
		require.NoError(t, err)
		assert.Equal(t, [2]int64{0, 1}, [2]int64{mn, mx})
		pos := h.Append(Msg(q.Topic, q.ID, "next", nil))
		assert.Equal(t, int64(1), pos[0].QueueOffset)
		recs, _ := h.ReadAll(q, 0)
		require.Len(t, recs, 2)
		assert.Equal(t, "next", string(Decode(t, recs[1]).Body))
	})
	t.Run("empty append", func(t *testing.T) {
		pos, err := h.S.Append(bg, nil)
		require.NoError(t, err)
		assert.Empty(t, pos)
	})
	t.Run("nil read result", func(t *testing.T) {
		assert.Error(t, h.S.Read(bg, q, 0, store.ReadOptions{}, nil))
	})
}

func testTooLarge(t *testing.T, h *Harness) {
	h.Settings.MaxMessageSize = 4096
	h.Reopen()
	q := store.Queue{Topic: "TooLarge", ID: 0}
	_, err := h.S.Append(bg, []store.Message{Msg(q.Topic, q.ID, "ok", nil), Msg(q.Topic, q.ID, string(make([]byte, 8192)), nil)})
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrTooLarge)
	_, mx, err := h.S.Offsets(q)
	require.NoError(t, err)
	assert.Equal(t, int64(0), mx, "nothing of a rejected call is stored")
	pos := h.Append(Msg(q.Topic, q.ID, string(make([]byte, 3000)), nil))
	assert.Equal(t, int64(0), pos[0].QueueOffset)
}

func testClosed(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Closed", ID: 0}
	pos := h.Append(Msg(q.Topic, q.ID, "x", nil))
	require.NoError(t, h.S.Close())
	_, err := h.S.Append(bg, []store.Message{Msg(q.Topic, q.ID, "y", nil)})
	assert.ErrorIs(t, err, store.ErrClosed)
	var r store.ReadResult
	assert.ErrorIs(t, h.S.Read(bg, q, 0, store.ReadOptions{}, &r), store.ErrClosed)
	_, err = h.S.Lookup(bg, pos[0].CommitLogOffset)
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = h.S.OffsetByTime(bg, q, 0)
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = h.S.DeleteBefore(bg, time.Now())
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.NotPanics(t, func() { _ = h.S.Close() }, "a second Close")
}

func testDeleteBefore(t *testing.T, h *Harness) {
	q := store.Queue{Topic: "Retention", ID: 0}
	other := store.Queue{Topic: "Retention", ID: 1}
	t.Run("nothing old", func(t *testing.T) {
		pos := h.Append(Msg(q.Topic, q.ID, "live", nil))
		freed, err := h.S.DeleteBefore(bg, time.Now().Add(-time.Hour))
		require.NoError(t, err)
		assert.Zero(t, freed)
		recs, _ := h.ReadAll(q, 0)
		assert.Len(t, recs, 1)
		_, err = h.S.Lookup(bg, pos[0].CommitLogOffset)
		assert.NoError(t, err)
	})
	if h.Opts.SegmentSize <= 0 {
		return
	}
	t.Run("old segments", func(t *testing.T) {
		body := string(make([]byte, 900))
		var pos []store.Position
		for int64(len(pos))*1000 < 5*h.Opts.SegmentSize {
			pos = append(pos, h.Append(Msg(q.Topic, q.ID, body, nil), Msg(other.Topic, other.ID, "o", nil))...)
		}
		last := pos[len(pos)-1]
		waitNextMilli(last.StoreTimestamp)
		cut := time.Now()
		waitNextMilli(cut.UnixMilli())
		live := h.Append(Msg(q.Topic, q.ID, "after", nil))
		_, maxBefore, err := h.S.Offsets(q)
		require.NoError(t, err)
		if f, ok := h.S.(store.Flusher); ok {
			require.NoError(t, f.Flush(bg))
		}
		freed, err := h.S.DeleteBefore(bg, cut)
		require.NoError(t, err)
		assert.Greater(t, freed, int64(0))
		mn, mx, err := h.S.Offsets(q)
		require.NoError(t, err)
		assert.Greater(t, mn, int64(0), "min moves forward")
		assert.Equal(t, maxBefore, mx, "max stays")
		_, err = h.S.Lookup(bg, pos[0].CommitLogOffset)
		assert.Error(t, err, "deleted records are gone")
		r := h.Read(q, 0, store.ReadOptions{})
		assert.Equal(t, store.OffsetTooSmall, r.Status)
		assert.Equal(t, mn, r.NextOffset)
		assert.Equal(t, mn, r.MinOffset)
		recs, offs := h.ReadAll(q, mn)
		require.NotEmpty(t, recs)
		assert.Equal(t, mn, offs[0])
		assert.Equal(t, "after", string(Decode(t, recs[len(recs)-1]).Body))
		rec, err := h.S.Lookup(bg, live[0].CommitLogOffset)
		require.NoError(t, err)
		assert.Equal(t, "after", string(Decode(t, rec).Body))
		off, err := h.S.OffsetByTime(bg, q, 0)
		require.NoError(t, err)
		assert.Equal(t, mn, off, "OffsetByTime never answers below min")
		omn, omx, err := h.S.Offsets(other)
		require.NoError(t, err)
		assert.Greater(t, omn, int64(0))
		assert.Equal(t, int64(len(pos)/2), omx)
		h.Reopen()
		mn2, mx2, err := h.S.Offsets(q)
		require.NoError(t, err)
		assert.Equal(t, [2]int64{mn, mx}, [2]int64{mn2, mx2}, "offsets survive a reopen")
		next := h.Append(Msg(q.Topic, q.ID, "next", nil))
		assert.Equal(t, mx, next[0].QueueOffset)
	})
}

func testMetadata(t *testing.T, h *Harness) {
	md, ok := h.S.(store.Metadata)
	if !ok {
		t.Skip("store does not implement store.Metadata")
	}
	_, err := md.LoadMeta("topics")
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, md.SaveMeta("topics", []byte(`{"a":1}`)))
	require.NoError(t, md.SaveMeta("offsets", []byte(`{}`)))
	got, err := md.LoadMeta("topics")
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(got))
	require.NoError(t, md.SaveMeta("topics", []byte(`{"a":2}`)))
	h.Reopen()
	md = h.S.(store.Metadata)
	got, err = md.LoadMeta("topics")
	require.NoError(t, err)
	assert.Equal(t, `{"a":2}`, string(got))
	got, err = md.LoadMeta("offsets")
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(got))
	require.NoError(t, md.SaveMeta("empty", nil))
	got, err = md.LoadMeta("empty")
	require.NoError(t, err)
	assert.Empty(t, got)
}

func testKeyIndexer(t *testing.T, h *Harness) {
	if _, ok := h.S.(store.KeyIndexer); !ok {
		t.Skip("store does not implement store.KeyIndexer")
	}
	topic := "Keys"
	p1 := h.Append(
		Msg(topic, 0, "m1", map[string]string{"KEYS": "order-1 user-9", "UNIQ_KEY": "AAAA"}),
		Msg(topic, 1, "m2", map[string]string{"KEYS": "order-2", "UNIQ_KEY": "BBBB"}),
		Msg("KeysOther", 0, "o1", map[string]string{"KEYS": "order-1"}),
	)
	waitNextMilli(p1[0].StoreTimestamp)
	p2 := h.Append(Msg(topic, 2, "m3", map[string]string{"KEYS": "order-1"}))
	bodies := func(recs [][]byte) []string {
		var out []string
		for _, rec := range recs {
			out = append(out, string(Decode(t, rec).Body))
		}
		return out
	}
	check := func(t *testing.T) {
		ki := h.S.(store.KeyIndexer)
		all := time.Now().Add(time.Hour).UnixMilli()
		tests := []struct {
			name       string
			topic, key string
			begin, end int64
			max        int
			want       []string
		}{
			{"key", topic, "order-1", 0, all, 10, []string{"m1", "m3"}},
			{"second key", topic, "user-9", 0, all, 10, []string{"m1"}},
			{"uniq key", topic, "BBBB", 0, all, 10, []string{"m2"}},
			{"other topic", "KeysOther", "order-1", 0, all, 10, []string{"o1"}},
			{"unknown key", topic, "nope", 0, all, 10, nil},
			{"time range", topic, "order-1", p2[0].StoreTimestamp, all, 10, []string{"m3"}},
			{"time range before", topic, "order-1", 0, p1[0].StoreTimestamp, 10, []string{"m1"}},
			{"empty range", topic, "order-1", 0, p1[0].StoreTimestamp - 1, 10, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				recs, err := ki.QueryByKey(bg, tt.topic, tt.key, tt.begin, tt.end, tt.max)
				require.NoError(t, err)
				assert.Equal(t, tt.want, bodies(recs))
			})
		}
		recs, err := ki.QueryByKey(bg, topic, "order-1", 0, all, 1)
		require.NoError(t, err)
		assert.Len(t, recs, 1, "bounded by max")
	}
	check(t)
	h.Reopen()
	t.Run("after reopen", check)
}

func testQueueLister(t *testing.T, h *Harness) {
	if _, ok := h.S.(store.QueueLister); !ok {
		t.Skip("store does not implement store.QueueLister")
	}
	h.Append(Msg("ListB", 1, "x", nil), Msg("ListA", 2, "x", nil), Msg("ListA", 0, "x", nil))
	var r store.ReadResult
	require.NoError(t, h.S.Read(bg, store.Queue{Topic: "ListC"}, 0, store.ReadOptions{}, &r))
	want := []store.Queue{{Topic: "ListA", ID: 0}, {Topic: "ListA", ID: 2}, {Topic: "ListB", ID: 1}}
	assert.Equal(t, want, h.S.(store.QueueLister).Queues())
	h.Reopen()
	assert.Equal(t, want, h.S.(store.QueueLister).Queues())
}

func testTopicDeleter(t *testing.T, h *Harness) {
	if _, ok := h.S.(store.TopicDeleter); !ok {
		t.Skip("store does not implement store.TopicDeleter")
	}
	gone, kept := store.Queue{Topic: "Gone", ID: 0}, store.Queue{Topic: "Kept", ID: 0}
	for i := 0; i < 3; i++ {
		h.Append(Msg(gone.Topic, gone.ID, "g", nil), Msg(gone.Topic, 1, "g", nil), Msg(kept.Topic, kept.ID, "k", nil))
	}
	require.NoError(t, h.S.(store.TopicDeleter).DeleteTopic(bg, gone.Topic))
	check := func() {
		for _, q := range []store.Queue{gone, {Topic: gone.Topic, ID: 1}} {
			mn, mx, err := h.S.Offsets(q)
			require.NoError(t, err)
			assert.Equal(t, [2]int64{0, 0}, [2]int64{mn, mx})
			r := h.Read(q, 0, store.ReadOptions{})
			assert.Equal(t, store.NoMessageInQueue, r.Status)
		}
		recs, _ := h.ReadAll(kept, 0)
		assert.Len(t, recs, 3)
	}
	check()
	h.Reopen()
	check()
	pos := h.Append(Msg(gone.Topic, gone.ID, "again", nil))
	assert.Equal(t, int64(0), pos[0].QueueOffset, "a deleted topic starts again at 0")
}

// testVerifier: a healthy store verifies without damage, before and after
// a reopen, counting every record it holds; a cancelled context stops it.
func testVerifier(t *testing.T, h *Harness) {
	if _, ok := h.S.(store.Verifier); !ok {
		t.Skip("store does not implement store.Verifier")
	}
	for i := 0; i < 40; i++ {
		h.Append(Msg("Verify", int32(i%2), fmt.Sprint("v", i), map[string]string{"TAGS": "t", "KEYS": fmt.Sprint("k", i)}))
	}
	check := func() {
		v := h.S.(store.Verifier)
		rep, err := v.Verify(bg, store.VerifyOptions{BytesPerSecond: 64 << 20})
		require.NoError(t, err)
		assert.Empty(t, rep.Damage)
		assert.Equal(t, int64(40), rep.Records)
		assert.Positive(t, rep.Bytes)
		assert.Empty(t, v.Damage())
		assert.Zero(t, v.Skipped())
	}
	check()
	h.Reopen()
	check()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := h.S.(store.Verifier).Verify(ctx, store.VerifyOptions{})
	assert.ErrorIs(t, err, context.Canceled)
}

func testFlusher(t *testing.T, h *Harness) {
	f, ok := h.S.(store.Flusher)
	if !ok {
		t.Skip("store does not implement store.Flusher")
	}
	h.Append(Msg("Flush", 0, "x", nil))
	require.NoError(t, f.Flush(bg))
	require.NoError(t, f.Flush(bg))
}

// testModel runs random appends, reads and reopens against an in-memory
// model of the queues.
func testModel(t *testing.T, h *Harness) {
	type entry struct {
		body string
		tag  string
	}
	rng := rand.New(rand.NewPCG(1, 2))
	queues := []store.Queue{{Topic: "ModelA", ID: 0}, {Topic: "ModelA", ID: 1}, {Topic: "ModelB", ID: 7}}
	model := map[store.Queue][]entry{}
	tags := []string{"A", "B"}
	codeA := message.TagsHashCode("A")
	steps := 400
	if testing.Short() {
		steps = 100
	}
	for step := 0; step < steps; step++ {
		switch p := rng.IntN(100); {
		case p < 45:
			n := 1 + rng.IntN(5)
			var batch []store.Message
			var qs []store.Queue
			var es []entry
			for i := 0; i < n; i++ {
				q := queues[rng.IntN(len(queues))]
				e := entry{body: fmt.Sprintf("%d.%d:%s", step, i, make([]byte, rng.IntN(2000))), tag: tags[rng.IntN(2)]}
				batch = append(batch, Msg(q.Topic, q.ID, e.body, map[string]string{"TAGS": e.tag}))
				qs, es = append(qs, q), append(es, e)
			}
			pos := h.Append(batch...)
			for i, q := range qs {
				require.Equal(t, int64(len(model[q])), pos[i].QueueOffset, "step %d", step)
				model[q] = append(model[q], es[i])
			}
		case p < 95:
			q := queues[rng.IntN(len(queues))]
			want := model[q]
			mx := int64(len(want))
			off := rng.Int64N(mx+5) - 2
			maxMsgs := 1 + rng.IntN(40)
			onlyA := rng.IntN(3) == 0
			opts := store.ReadOptions{MaxMessages: maxMsgs}
			if onlyA {
				opts.Filter = func(c int64) bool { return c == codeA }
			}
			r := h.Read(q, off, opts)
			var wantStatus store.ReadStatus
			var wantNext int64
			var wantOffs []int64
			switch {
			case mx == 0:
				wantStatus, wantNext = store.NoMessageInQueue, 0
			case off < 0:
				wantStatus, wantNext = store.OffsetTooSmall, 0
			case off == mx:
				wantStatus, wantNext = store.OffsetOverflowOne, off
			case off > mx:
				wantStatus, wantNext = store.OffsetOverflowBadly, mx
			default:
				i := off
				for ; i < mx && len(wantOffs) < maxMsgs; i++ {
					if !onlyA || want[i].tag == "A" {
						wantOffs = append(wantOffs, i)
					}
				}
				wantNext = i
				wantStatus = store.Found
				if len(wantOffs) == 0 {
					wantStatus = store.NoMatchedMessage
				}
			}
			require.Equal(t, wantStatus, r.Status, "step %d: %s at %d of %d", step, q, off, mx)
			require.Equal(t, wantNext, r.NextOffset, "step %d: %s at %d of %d", step, q, off, mx)
			if wantStatus == store.Found {
				require.Equal(t, wantOffs, r.QueueOffsets, "step %d", step)
				for i, rec := range r.Records {
					m := Decode(t, rec)
					require.Equal(t, want[wantOffs[i]].body, string(m.Body))
					require.Equal(t, wantOffs[i], m.QueueOffset)
				}
			}
		default:
			h.Reopen()
			for _, q := range queues {
				mn, mx, err := h.S.Offsets(q)
				require.NoError(t, err)
				require.Equal(t, [2]int64{0, int64(len(model[q]))}, [2]int64{mn, mx})
			}
		}
	}
}
