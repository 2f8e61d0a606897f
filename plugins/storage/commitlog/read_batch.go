package commitlog

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/quivermq/quiver/core/store"
)

// Span reads. Producers spread their messages over several queues, so in
// the commit log a queue's records have other queues' records between
// them, and reading a backlog one pread per record made a 32-message pull
// 32 system calls. Read therefore groups a block's candidates into spans:
// successive candidates in log order whose gaps (the other queues' bytes
// between them) are at most spanGap, within one segment, the whole span at
// most spanMax. A span without gaps is read straight into the result's
// buffer, as before; a span with gaps is read with one pread into a pooled
// scratch buffer and the wanted records are copied out of it. Each record
// is then checked on its own (checkRead), so a damaged byte still costs
// only the record it hits, and a span below the retained log reports
// errRemoved at its first candidate, as a single read would.
const (
	// spanGap is the largest gap a span reads through: copying a gap
	// costs about what a pread's system call saves at ~16 KiB on the
	// machines measured (docs/lab/PERFORMANCE.md, issue 24).
	spanGap = 16 << 10
	// spanMax bounds a span with gaps (the scratch buffer's size).
	spanMax = 256 << 10
)

var spanPool = sync.Pool{New: func() any {
	b := make([]byte, spanMax)
	return &b
}}

// readAhead is the store's span-read state.
type readAhead struct {
	// reads counts the commit-log reads Read made (tests, benchmarks).
	reads atomic.Int64
	// gap overrides spanGap when non-zero; negative reads every
	// non-contiguous record on its own (the A/B switch of the tests and
	// benchmarks).
	gap atomic.Int64
}

func (ra *readAhead) spanGap() int64 {
	if g := ra.gap.Load(); g != 0 {
		return g
	}
	return spanGap
}

// candidate is a consume-queue entry a read will fetch.
type candidate struct {
	off  int64
	phys int64
	size int32
}

// batchReader is the state of one Read.
type batchReader struct {
	s                 *Store
	q                 store.Queue
	opts              store.ReadOptions
	into              *store.ReadResult
	maxMsgs, maxBytes int
	gap               int64
	buf               []byte
	// runEnd is where the last accepted record ended in buf (-1: none, or
	// buf moved since): the next one starting there extends the last run;
	// runStart is where that run starts.
	runEnd, runStart int
	cands            []candidate
	candArr          [64]candidate
}

// scan reads entries of cq from offset up to limit and fetches their
// records until a limit is reached. It returns the offset after the last
// entry scanned and whether the topic was deleted under the read.
func (r *batchReader) scan(cq *consumeQueue, offset, limit int64) (cur int64, dropped bool, err error) {
	ebp := entryPool.Get().(*[]byte)
	defer entryPool.Put(ebp)
	r.cands = r.candArr[:0]
	cur = offset
	for full := false; cur < limit && !full; {
		n := int(min(limit-cur, entryBlock))
		eb, err := cq.readEntries(cur, n, *ebp)
		*ebp = eb[:0]
		if err != nil {
			if cq.isDropped() {
				return cur, true, nil
			}
			if errors.Is(err, errRemoved) {
				return cur, false, nil
			}
			return cur, false, r.s.closedErr("read "+r.q.String(), err)
		}
		stopAt, isFull := r.pick(eb, cur)
		removedAt, rejected, err := r.fetch()
		if err != nil {
			return cur, false, err
		}
		if removedAt >= 0 {
			return removedAt, false, nil
		}
		cur, full = stopAt, isFull && rejected == 0
	}
	return cur, false, nil
}

// pick fills r.cands with the entries of block eb (starting at queue
// offset from) to fetch. It returns the offset after the last entry
// looked at and whether the batch is full.
func (r *batchReader) pick(eb []byte, from int64) (stopAt int64, full bool) {
	r.cands = r.cands[:0]
	pendBytes := 0
	n := len(eb) / cqEntrySize
	for i := 0; i < n; i++ {
		phys, size, tags := getEntry(eb[i*cqEntrySize:])
		// As RocketMQ: the batch-full check comes before filtering.
		nrec := len(r.into.Records) + len(r.cands)
		if nrec >= r.maxMsgs || (nrec > 0 && r.into.Bytes+pendBytes+int(size) > r.maxBytes) {
			return from + int64(i), true
		}
		if size <= 0 {
			continue
		}
		if r.opts.Filter != nil && !r.opts.Filter(tags) {
			continue
		}
		r.cands = append(r.cands, candidate{off: from + int64(i), phys: phys, size: size})
		pendBytes += int(size)
	}
	return from + int64(n), false
}

// fetch reads the candidates' records, a span at a time, and accepts or
// rejects each. It returns the queue offset where the log was found
// removed under the read (-1: it was not) and how many records were
// rejected (damaged or not matched).
func (r *batchReader) fetch() (removedAt int64, rejected int, err error) {
	for i := 0; i < len(r.cands); {
		j, n, gaps := r.span(i)
		var rej int
		if gaps {
			rej, err = r.readSpan(i, j, n)
		} else {
			rej, err = r.readDirect(i, j, n)
		}
		rejected += rej
		if err != nil {
			if errors.Is(err, errRemoved) {
				return r.cands[i].off, rejected, nil
			}
			return -1, rejected, r.s.closedErr("read "+r.q.String(), err)
		}
		i = j
	}
	return -1, rejected, nil
}

// span returns the end j of the span of candidates starting at i, its
// length in the log and whether it has gaps. Contiguous records always
// share a read (as they did before spans); a gap is read through only
// when it is at most r.gap, the span stays within spanMax and the
// segment holding its first record.
func (r *batchReader) span(i int) (j int, n int64, gaps bool) {
	c := r.cands
	start := c[i].phys
	end := start + int64(c[i].size)
	segEnd := start - start%r.s.segSize + r.s.segSize
	for j = i + 1; j < len(c); j++ {
		next := c[j].phys
		nend := next + int64(c[j].size)
		if next == end && !gaps {
			end = nend
			continue
		}
		if next < end || next-end > r.gap || nend-start > spanMax || nend > segEnd {
			break
		}
		end, gaps = nend, true
	}
	return j, end - start, gaps
}

// readDirect reads the contiguous records of candidates [i, j), n bytes,
// straight into the buffer and accepts them.
func (r *batchReader) readDirect(i, j int, n int64) (rejected int, err error) {
	start := len(r.buf)
	if cap(r.buf)-start < int(n) {
		r.runEnd = -1 // the records so far stay in the old array
	}
	r.buf = slices.Grow(r.buf, int(n))[:start+int(n)]
	r.s.ra.reads.Add(1)
	if err := r.s.readAt(r.cands[i].phys, r.buf[start:]); err != nil {
		r.buf = r.buf[:start]
		return 0, err
	}
	p := start
	for k := i; k < j; k++ {
		if !r.accept(k, p) {
			rejected++
		}
		p += int(r.cands[k].size)
	}
	return rejected, nil
}

// readSpan reads the n log bytes from candidate i's record to candidate
// j-1's end with one read into scratch space and copies the records of
// candidates [i, j) out of it, one after another in the buffer, accepting
// them (a rejected record's copy is dropped).
func (r *batchReader) readSpan(i, j int, n int64) (rejected int, err error) {
	sp := spanPool.Get().(*[]byte)
	defer spanPool.Put(sp)
	scratch := (*sp)[:n]
	r.s.ra.reads.Add(1)
	base := r.cands[i].phys
	if err := r.s.readAt(base, scratch); err != nil {
		return 0, err
	}
	want := 0
	for k := i; k < j; k++ {
		want += int(r.cands[k].size)
	}
	if cap(r.buf)-len(r.buf) < want {
		r.runEnd = -1
		r.buf = slices.Grow(r.buf, want)
	}
	for k := i; k < j; k++ {
		at := r.cands[k].phys - base
		p := len(r.buf)
		r.buf = append(r.buf, scratch[at:at+int64(r.cands[k].size)]...)
		if !r.accept(k, p) {
			r.buf = r.buf[:p]
			rejected++
		}
	}
	return rejected, nil
}

// accept checks candidate k's record, at p in the buffer, and adds it to
// the result; false means it was rejected: damaged (skipped, recorded,
// still counted as scanned so consumers move past it) or not matched.
func (r *batchReader) accept(k, p int) bool {
	c := r.cands[k]
	sz := int(c.size)
	rec := r.buf[p : p+sz : p+sz]
	if why := checkRead(rec, c.phys, r.q, c.off); why != "" {
		r.s.readDamage(c.phys, c.size, fmt.Sprintf("consume queue %s offset %d: %s", r.q, c.off, why))
		return false
	}
	if r.opts.Match != nil && !r.opts.Match(rec) {
		return false
	}
	into := r.into
	into.Records = append(into.Records, rec)
	into.QueueOffsets = append(into.QueueOffsets, c.off)
	into.Bytes += sz
	if p == r.runEnd {
		into.Runs[len(into.Runs)-1] = r.buf[r.runStart : p+sz : p+sz]
	} else {
		into.Runs = append(into.Runs, rec)
		r.runStart = p
	}
	r.runEnd = p + sz
	return true
}
