package pop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedFile wraps the journal's file: a Sync can be held until released,
// and Syncs can be made to fail.
type gatedFile struct {
	syncFile
	mu      sync.Mutex
	hold    chan struct{} // the next Sync waits until it is closed
	entered chan struct{} // gets a value when a held Sync starts waiting
	fail    error         // Syncs fail with it (after the hold)
}

func (f *gatedFile) Sync() error {
	f.mu.Lock()
	hold := f.hold
	f.hold = nil
	f.mu.Unlock()
	if hold != nil {
		f.entered <- struct{}{}
		<-hold
	}
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		return fail
	}
	return f.syncFile.Sync()
}

// holdNext makes the next Sync wait; it returns the release.
func (f *gatedFile) holdNext() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.hold = ch
	return func() { close(ch) }
}

func (f *gatedFile) failWith(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

// gatedNode is a node whose pop service appends through a gatedFile, with
// msgs messages received and their handles returned.
func gatedNode(t *testing.T, msgs int) (*node, *gatedFile, []Received) {
	n := newNode(t, engines[0])
	require.NoError(t, n.s.Close())
	var gf *gatedFile
	s, err := open(n.cfg, n.b, filepath.Join(n.dir, "pop"), func(f syncFile) syncFile {
		gf = &gatedFile{syncFile: f, entered: make(chan struct{}, 1)}
		return gf
	})
	require.NoError(t, err)
	s.now = n.clock.now
	n.s = s
	n.topic("T", 4)
	for i := 0; i < msgs; i++ {
		n.put("T", int32(i%4), "", fmt.Sprint("m", i))
	}
	var got []Received
	for len(got) < msgs {
		r := n.receive("G", "T", nil, 32, time.Hour)
		require.NotEmpty(t, r)
		got = append(got, r...)
	}
	return n, gf, got
}

// appended waits until the journal has numbered seq records.
func appended(t *testing.T, s *Service, seq uint64) {
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.j.seq >= seq
	}, 10*time.Second, time.Millisecond)
}

func (s *Service) lastSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.seq
}

// TestGroupCommit: acks that arrive while an fsync runs share the next
// one; none answers before the fsync covering it, and all are there after
// a restart.
func TestGroupCommit(t *testing.T) {
	const acks = 32
	n, gf, got := gatedNode(t, acks)
	ctx := context.Background()
	seq0 := n.s.lastSeq()
	syncs0 := n.s.j.syncs.Load()

	release := gf.holdNext()
	first := make(chan error, 1)
	go func() { first <- n.s.Ack(ctx, "G", "T", got[0].Handle) }()
	<-gf.entered // the first ack's fsync is running (held)

	var answered sync.WaitGroup
	errs := make(chan error, 2*acks)
	for _, r := range got[1:] {
		answered.Add(1)
		go func() {
			defer answered.Done()
			errs <- n.s.Ack(ctx, "G", "T", r.Handle)
		}()
	}
	// The same handle again: its entry is gone from the state, but the
	// ack that removed it is not durable, so this one waits too.
	answered.Add(1)
	go func() {
		defer answered.Done()
		errs <- n.s.Ack(ctx, "G", "T", got[0].Handle)
	}()
	appended(t, n.s, seq0+acks)
	select {
	case err := <-first:
		t.Fatalf("an ack answered (%v) before its fsync returned", err)
	case err := <-errs:
		t.Fatalf("an ack answered (%v) before its fsync ran", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	require.NoError(t, <-first)
	answered.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, uint64(2), n.s.j.syncs.Load()-syncs0, "the first ack's fsync, then one for the other %d", acks-1)
	assert.Equal(t, 0, n.s.InFlight("G", "T"))

	n = n.restart()
	assert.Equal(t, 0, n.s.InFlight("G", "T"), "every answered ack is durable")
	n.clock.add(2 * time.Hour)
	assert.Empty(t, n.receive("G", "T", nil, 32, time.Hour))
}

// TestConcurrentAcksDurable: many goroutines acking at once on a real
// journal (no gate): every ack answered is there after a reopen, with
// fewer fsyncs than acks.
func TestConcurrentAcksDurable(t *testing.T) {
	const msgs, workers = 400, 32
	n, _, got := gatedNode(t, msgs)
	ctx := context.Background()
	syncs0 := n.s.j.syncs.Load()
	work := make(chan Received, len(got))
	for _, r := range got {
		work <- r
	}
	close(work)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []string
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if assert.NoError(t, n.s.Ack(ctx, "G", "T", r.Handle)) {
					mu.Lock()
					acked = append(acked, string(r.Message.Body))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, acked, msgs)
	syncs := n.s.j.syncs.Load() - syncs0
	t.Logf("%d acks from %d goroutines: %d fsyncs", msgs, workers, syncs)
	assert.LessOrEqual(t, syncs, uint64(msgs))

	// A reopen without Close (a killed process) sees every ack.
	s2, err := open(n.cfg, n.b, filepath.Join(n.dir, "pop"), nil)
	require.NoError(t, err)
	assert.Equal(t, 0, s2.InFlight("G", "T"))
	require.NoError(t, s2.Close())
}

// TestSyncFailureFailsBatch: when an fsync fails, every call waiting on
// it gets the error, so do the calls already queued behind it and every
// call after it, including answers from the state that would rest on the
// failed records; after a restart nothing that was refused is acked.
func TestSyncFailureFailsBatch(t *testing.T) {
	const msgs = 12
	n, gf, got := gatedNode(t, msgs)
	ctx := context.Background()
	seq0 := n.s.lastSeq()

	release := gf.holdNext()
	gf.failWith(errors.New("injected: EIO"))
	first := make(chan error, 1)
	go func() { first <- n.s.Ack(ctx, "G", "T", got[0].Handle) }()
	<-gf.entered
	errs := make(chan error, msgs)
	var wg sync.WaitGroup
	for _, r := range got[1 : msgs-1] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- n.s.Ack(ctx, "G", "T", r.Handle)
		}()
	}
	appended(t, n.s, seq0+msgs-1)
	release()
	err := <-first
	require.Error(t, err)
	assert.ErrorContains(t, err, "injected: EIO")
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.ErrorContains(t, err, "injected: EIO", "a call queued behind the failed fsync")
	}
	gf.failWith(nil) // the disk "recovers": the journal must still refuse
	assert.Error(t, n.s.Ack(ctx, "G", "T", got[msgs-1].Handle), "an ack after the failure")
	assert.Error(t, n.s.Ack(ctx, "G", "T", got[0].Handle), "re-ack of the failed ack: its removal is not durable")
	_, err = n.s.ChangeInvisible(ctx, "G", "T", got[1].Handle, time.Minute)
	assert.Error(t, err)
	n.put("T", 0, "", "late")
	_, err = n.s.Receive(ctx, "G", "T", nil, 32, time.Hour)
	assert.Error(t, err, "a receive after the failure")

	// The first ack's line was written before its fsync failed (it may
	// be on disk, as here); nothing after it was written.
	n = n.restart()
	assert.Equal(t, msgs-1, n.s.InFlight("G", "T"), "only acks that were refused are still in flight")
}

// TestRecordEncoding: appendRecord writes the bytes encoding/json would,
// and parseLine reads them back.
func TestRecordEncoding(t *testing.T) {
	tests := []record{
		{Seq: 1, Kind: kindPop, Group: "G", Topic: "T", Queue: 3, Offset: 17, Attempt: 2, Until: 1_700_000_000_123, Nonce: 1<<64 - 1, Next: 18},
		{Seq: 2, Kind: kindAck, Group: "group-a%b", Topic: "rmq_sys_x", Queue: 0},
		{Seq: 3, Kind: kindRst, Group: "G", Topic: "T", Queue: -1, Offset: -5, Next: -1},
		{Seq: 4, Kind: kindInv, Group: `q"uo\te`, Topic: "tab\there", Until: 5, Nonce: 9},
		{Seq: 5, Kind: kindAdv, Group: "ünïcode", Topic: "<&>", Next: 1},
	}
	for _, give := range tests {
		t.Run(give.Group, func(t *testing.T) {
			line := appendRecord(nil, &give)
			require.Equal(t, byte('\n'), line[len(line)-1])
			got, ok := parseLine(line[:len(line)-1])
			require.True(t, ok, "%s", line)
			assert.Equal(t, give, got)
			var fromJSON, fromUs map[string]any
			want, err := json.Marshal(&give)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(want, &fromJSON))
			require.NoError(t, json.Unmarshal(line[9:], &fromUs))
			assert.Equal(t, fromJSON, fromUs)
		})
	}
}

// FuzzRecordLine: whatever the names, a line appendRecord writes reads
// back as encoding/json would read the record (invalid UTF-8 becomes
// U+FFFD in both).
func FuzzRecordLine(f *testing.F) {
	f.Add(uint64(1), "G", "T", int32(0), int64(1), int64(2), uint64(3))
	f.Add(uint64(9), "a\x00\"\\\xff", "ü", int32(-1), int64(-1), int64(0), uint64(0))
	f.Fuzz(func(t *testing.T, seq uint64, group, topic string, q int32, off, until int64, nonce uint64) {
		r := record{Seq: seq, Kind: kindPop, Group: group, Topic: topic, Queue: q, Offset: off, Until: until, Nonce: nonce, Next: off + 1}
		line := appendRecord(nil, &r)
		got, ok := parseLine(line[:len(line)-1])
		require.True(t, ok, "%q", line)
		b, err := json.Marshal(&r)
		require.NoError(t, err)
		var want record
		require.NoError(t, json.Unmarshal(b, &want))
		assert.Equal(t, want, got)
	})
}

// TestAckManyOneFsync: the handles of one AckMessage request share one
// fsync; each gets its own answer (a made-up handle is refused, the
// others acked), and the acks survive a reopen without Close.
func TestAckManyOneFsync(t *testing.T) {
	const msgs = 16
	n, _, got := gatedNode(t, msgs)
	ctx := context.Background()
	syncs0 := n.s.j.syncs.Load()
	hs := make([]string, 0, msgs+1)
	for _, r := range got {
		hs = append(hs, r.Handle)
	}
	hs = append(hs, "not-a-handle")
	errs := n.s.AckMany(ctx, "G", "T", hs)
	require.Len(t, errs, msgs+1)
	for i := range msgs {
		assert.NoError(t, errs[i], "handle %d", i)
	}
	assert.Error(t, errs[msgs], "a made-up handle")
	assert.Equal(t, uint64(1), n.s.j.syncs.Load()-syncs0, "one fsync for the request's %d acks", msgs)

	s2, err := open(n.cfg, n.b, filepath.Join(n.dir, "pop"), nil)
	require.NoError(t, err)
	assert.Equal(t, 0, s2.InFlight("G", "T"))
	require.NoError(t, s2.Close())
}
