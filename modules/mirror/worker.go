package mirror

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/modules/broker"
)

// pollWait is how long one pull may be held by the source broker when
// the queue has nothing new (long polling).
const pollWait = 5 * time.Second

// work mirrors one source queue until ctx ends: pull a batch at the
// queue's position, write it to the target queue (retrying until it is
// stored: nothing is skipped), then advance. One batch is written at a
// time, so the target queue gets the source queue's order; the next
// batch is pulled while one is written (two batches in memory at most).
func (l *link) work(ctx context.Context, q *queueState) {
	bo := l.backoff()
	var ahead *pullAhead // the next batch, pulled while one is written
	defer func() { ahead.drop() }()
	var held *batch // a batch whose write failed, written again by the retry
	for ctx.Err() == nil {
		if err := l.step(ctx, q, &ahead, &held); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.failed("mirror "+q.src.String(), err)
			if !bo.wait(ctx) {
				return
			}
			continue
		}
		bo.reset()
	}
}

// fetched is one pull's answer from offset from.
type fetched struct {
	from int64
	res  *consumer.PullResult
	err  error
}

// batch is a pulled batch to write: its items, each one's source queue
// offset, and the source offset after it. from is q.next when it was
// pulled (or when the part not written yet was held).
type batch struct {
	from  int64
	items []message.BatchItem
	offs  []int64
	end   int64
}

// pullAhead is the pull of the batch after the one being written.
type pullAhead struct {
	ch     chan fetched
	cancel context.CancelFunc
}

// wait returns the pull's answer.
func (a *pullAhead) wait() fetched {
	f := <-a.ch
	a.cancel()
	return f
}

// drop cancels the pull and waits for its goroutine: a pull at the
// source's end is held up to pollWait, and its batch is not the next one
// once a write failed.
func (a *pullAhead) drop() {
	if a != nil {
		a.cancel()
		<-a.ch
	}
}

// pull reads a batch of q from offset from, held by the broker up to
// pollWait when there is nothing new.
func (l *link) pull(ctx context.Context, q *queueState, from int64) fetched {
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	defer cancel()
	res, err := l.puller.Pull(pctx, q.src, l.sel, from, l.cfg.BatchSize)
	return fetched{from: from, res: res, err: err}
}

// start sets the position of a queue the checkpoint does not know.
func (l *link) start(ctx context.Context, q *queueState) error {
	var off int64
	var err error
	if l.cfg.StartFrom == "latest" {
		off, err = l.puller.MaxOffset(ctx, q.src)
	} else {
		off, err = l.puller.MinOffset(ctx, q.src)
	}
	if err != nil {
		return err
	}
	q.mu.Lock()
	if !q.known {
		q.next, q.known = off, true
	}
	q.mu.Unlock()
	return nil
}

// step is one pull (or the one pulled ahead, or the batch whose write
// failed) and its writes.
func (l *link) step(ctx context.Context, q *queueState, ahead **pullAhead, held **batch) error {
	q.mu.Lock()
	known, next, dst := q.known, q.next, q.dst
	if len(q.gaps) > 0 && !q.filling {
		l.startFill(ctx, q) // gaps read from the checkpoint
	}
	q.mu.Unlock()
	if !known {
		if err := l.start(ctx, q); err != nil {
			return onSide(sideSource, fmt.Errorf("start position: %w", err))
		}
		return nil
	}
	if b := *held; b != nil {
		*held = nil
		if b.from == next {
			// Written again as it was pulled: pulled again at each retry,
			// a target away for an hour cost every queue a batch (and a
			// pull ahead) per backoff, over the source's uplink. The
			// queue's end is still asked, for the lag the status shows.
			mctx, cancel := context.WithTimeout(ctx, pollWait)
			maxOff, err := l.puller.MaxOffset(mctx, q.src)
			cancel()
			if err != nil {
				*held = b
				return onSide(sideSource, fmt.Errorf("max offset: %w", err))
			}
			l.ok(sideSource)
			q.mu.Lock()
			q.maxOff = max(q.maxOff, maxOff)
			q.mu.Unlock()
			return l.writeBatch(ctx, q, dst, b, ahead, held)
		}
	}
	var f fetched
	if *ahead != nil {
		f = (*ahead).wait()
		*ahead = nil
		if f.from != next {
			f = fetched{} // pulled for a batch that was not written: again
		}
	}
	if f.res == nil && f.err == nil {
		f = l.pull(ctx, q, next)
	}
	res, err := f.res, f.err
	if err != nil {
		// The broker answers a held pull before the deadline: a timeout
		// is a link that stopped answering (a cut uplink).
		return onSide(sideSource, fmt.Errorf("pull: %w", err))
	}
	l.ok(sideSource)
	q.mu.Lock()
	q.maxOff = res.MaxOffset
	q.mu.Unlock()
	switch res.Status {
	case consumer.NoNewMsg, consumer.NoMatchedMsg:
		q.mu.Lock()
		if res.NextBeginOffset > q.next {
			q.next = res.NextBeginOffset
		}
		if q.next >= q.maxOff {
			q.lagTS = 0
		}
		q.mu.Unlock()
		return nil
	case consumer.OffsetIllegal:
		l.log.Warn("mirror: the source no longer holds the position (retention deleted what the link had not mirrored yet)",
			"queue", q.src.String(), "position", next, "next", res.NextBeginOffset)
		q.mu.Lock()
		q.next = res.NextBeginOffset
		q.mu.Unlock()
		return nil
	}
	if l.jump(ctx, q, next, res.MaxOffset) {
		return nil // the pulled batch is in the gap now
	}
	if len(res.Messages) > 0 {
		q.mu.Lock()
		q.lagTS = res.Messages[0].StoreTimestamp.UnixMilli()
		q.mu.Unlock()
	}
	items, firstOff := l.convert(res.Messages)
	if res.NextBeginOffset > next {
		actx, cancel := context.WithCancel(ctx)
		a := &pullAhead{ch: make(chan fetched, 1), cancel: cancel}
		from := res.NextBeginOffset
		go func() { a.ch <- l.pull(actx, q, from) }()
		*ahead = a
	}
	return l.writeBatch(ctx, q, dst, &batch{from: next, items: items, offs: firstOff, end: res.NextBeginOffset}, ahead, held)
}

// writeBatch writes b to target queue dst, in writes of up to
// batch_bytes, moving q's position past each; when a write fails, the
// part not written is held for the retry.
func (l *link) writeBatch(ctx context.Context, q *queueState, dst client.MessageQueue, b *batch, ahead **pullAhead, held **batch) error {
	items, firstOff := b.items, b.offs
	for start := 0; start < len(items); {
		end, bytes := start, 0
		for end < len(items) && (end == start || bytes+len(items[end].Body) <= int(l.cfg.BatchBytes)) {
			bytes += len(items[end].Body)
			end++
		}
		if l.limiter != nil && !l.limiter.take(ctx, end-start, true) {
			return ctx.Err()
		}
		off, err := l.write(ctx, dst, items[start:end])
		if err != nil {
			// The retry writes what is left of this batch: waiting for
			// the batch after it, held by an idle source, would delay it
			// by up to pollWait instead of the backoff.
			(*ahead).drop()
			*ahead = nil
			q.mu.Lock()
			from := q.next
			q.mu.Unlock()
			*held = &batch{from: from, items: items[start:], offs: firstOff[start:], end: b.end}
			return onSide(sideTarget, err)
		}
		l.ok(sideTarget)
		q.mu.Lock()
		if q.dst == dst {
			q.addPair(pair{Src: firstOff[start], Dst: off})
		}
		// Everything before this batch's last message is stored.
		if n := firstOff[end-1] + 1; n > q.next {
			q.next = n
		}
		q.mu.Unlock()
		c := l.counters(q.src.Topic)
		c.msgs.Add(int64(end - start))
		c.bytes.Add(int64(bytes))
		l.mirrored.Add(int64(end - start))
		start = end
	}
	q.mu.Lock()
	if b.end > q.next {
		q.next = b.end
	}
	if q.next >= q.maxOff {
		q.lagTS = 0
	}
	q.mu.Unlock()
	return nil
}

// convert turns pulled messages into batch items for the target, in
// order, leaving out those whose origin is the target cluster. offs holds
// each item's source queue offset.
func (l *link) convert(msgs []*client.MessageExt) (items []message.BatchItem, offs []int64) {
	target, source := "", ""
	if p := l.targetCluster.Load(); p != nil {
		target = *p
	}
	if p := l.sourceCluster.Load(); p != nil {
		source = *p
	}
	for _, m := range msgs {
		it, ok := mirrored(m, source, target, l.cfg.Name)
		if !ok {
			l.loopSkipped.Add(1)
			continue
		}
		items = append(items, it)
		offs = append(offs, m.QueueOffset)
	}
	return items, offs
}

// mirrored is m as the target stores it; ok is false when m came from
// the target cluster (active-active: never send a message home). The
// item shares m's body and properties: m, pulled for the link alone, is
// changed in place (copying each message's properties was about 4 % of a
// catch-up's CPU) and must not be used as the source's message after.
func mirrored(m *client.MessageExt, sourceCluster, targetCluster, linkName string) (message.BatchItem, bool) {
	p := message.Properties(m.Properties)
	if p == nil {
		p = make(message.Properties, 6)
		m.Properties = p
	}
	origin := p[broker.PropertyMirrorOrigin]
	if origin == "" {
		origin = p[message.PropertyCluster]
	}
	if origin == "" {
		origin = sourceCluster
	}
	if origin != "" && origin == targetCluster {
		return message.BatchItem{}, false
	}
	if origin == "" {
		origin = "unknown" // still marks the message as mirrored (the target's window is rebuilt from it)
	}
	// Set by the pulling client or the brokers, not the producer.
	for _, k := range [...]string{message.PropertyMinOffset, message.PropertyMaxOffset, message.PropertyCluster,
		message.PropertyTransactionPrepared, message.PropertyWaitStoreMsgOK} {
		delete(p, k)
	}
	p[broker.PropertyMirrorOrigin] = origin
	if p[message.PropertyUniqKey] == "" {
		// A message sent without an id is known by its offset id, which
		// its consumers saw as its id: keep that.
		p[message.PropertyUniqKey] = m.OffsetMsgID
	}
	p[broker.PropertyMirrorDedup] = linkName
	if m.BornHost != "" {
		p[broker.PropertyMirrorBornHost] = m.BornHost
	}
	p[broker.PropertyMirrorBornTS] = strconv.FormatInt(m.BornTimestamp.UnixMilli(), 10)
	keepDueTime(p, m.StoreTimestamp.UnixMilli())
	return message.BatchItem{Flag: m.Flag, Body: m.Body, Properties: p}, true
}

// keepDueTime makes a delayed message keep its due time in the target:
// it reached its topic when due (its store time, or TIMER_OUT_MS), and
// the target delivers it then rather than delaying it again. A DELAY
// level is parked through the batch send (which refuses DELAY) and
// restored by the target broker, with TIMER_DELIVER_MS, read first, set
// to the due time.
func keepDueTime(p message.Properties, storeMs int64) {
	lvl := p[message.PropertyDelayTimeLevel]
	delayed := lvl != "" && lvl != "0"
	for _, k := range [...]string{message.PropertyStartDeliverTime, message.PropertyTimerDeliverMS, message.PropertyTimerDelayMS} {
		if p[k] != "" {
			delayed = true
		}
	}
	if !delayed {
		return
	}
	due := storeMs
	if v, err := strconv.ParseInt(p[message.PropertyTimerOut], 10, 64); err == nil && v > 0 {
		due = v
	}
	if p[message.PropertyStartDeliverTime] == "" && p[message.PropertyTimerDeliverMS] == "" {
		p[message.PropertyTimerDeliverMS] = strconv.FormatInt(due, 10)
	}
	if lvl != "" {
		delete(p, message.PropertyDelayTimeLevel)
		if lvl != "0" {
			p[broker.PropertyMirrorDelay] = lvl
		}
	}
}

// write sends items to target queue dst in one SEND_BATCH_MESSAGE and
// returns the queue offset of the first (of its first copy, if the
// target had it already). Errors are the caller's to retry.
func (l *link) write(ctx context.Context, dst client.MessageQueue, items []message.BatchItem) (int64, error) {
	addr, ok := l.dst.BrokerAddr(dst.BrokerName)
	if !ok {
		if _, err := l.dst.FetchRoute(ctx, dst.Topic); err != nil {
			return 0, fmt.Errorf("route %s in the target: %w", dst.Topic, err)
		}
		if addr, ok = l.dst.BrokerAddr(dst.BrokerName); !ok {
			return 0, fmt.Errorf("target broker %s: %w", dst.BrokerName, client.ErrBrokerNotFound)
		}
	}
	// Sized up front: grown append by append, a batch of 256 KiB cost
	// more CPU than the rest of its encoding.
	size := 0
	for _, it := range items {
		size += 26 + len(it.Body)
		for k, v := range it.Properties {
			size += len(k) + len(v) + 2
		}
	}
	body := make([]byte, 0, size)
	for _, it := range items {
		body = message.AppendBatchItem(body, it)
	}
	req := client.NewRequest(remoting.SendBatchMessage, map[string]string{
		"a": Group(l.cfg.Name), "b": dst.Topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(dst.QueueID),
		"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "", "j": "0", "k": "false",
		"l": "0", "m": "true", "n": dst.BrokerName,
	}, body)
	resp, err := l.dst.Invoke(ctx, addr, req)
	if err != nil {
		return 0, fmt.Errorf("write %d messages to %s: %w", len(items), dst, err)
	}
	switch resp.Code {
	case remoting.Success, remoting.FlushDiskTimeout, remoting.FlushSlaveTimeout, remoting.SlaveNotAvailable:
		// Stored on the master: a replica's lag is not the link's to retry.
	default:
		return 0, fmt.Errorf("write %d messages to %s: %w", len(items), dst, client.NewBrokerError(addr, resp))
	}
	off, err := strconv.ParseInt(resp.Ext("queueOffset"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("write to %s: bad queueOffset %q", dst, resp.Ext("queueOffset"))
	}
	return off, nil
}

// catchUpGap is how many batches a queue must be behind before a
// newest-first link skips to the live tail; maxGaps bounds the gaps a
// queue has open at once (at the bound the link catches up in order).
const (
	catchUpGap = 4
	maxGaps    = 8
)

// newestFirst reports whether q's topic catches up newest first: the
// link's catch_up, unless the topic is ordered (or not known yet not to
// be: discoverTopic finds out).
func (l *link) newestFirst(topic string) bool {
	if l.cfg.CatchUp != CatchUpNewestFirst {
		return false
	}
	v, ok := l.ordered.Load(topic)
	return ok && !v.(bool)
}

// jump moves q's live position to the tail when q is more than
// catchUpGap batches behind (catch_up newest_first): the offsets skipped
// become a gap, written behind the live tail by the queue's filler. It
// reports whether it jumped (the batch pulled at next is then the
// filler's).
func (l *link) jump(ctx context.Context, q *queueState, next, maxOff int64) bool {
	if !l.newestFirst(q.src.Topic) || maxOff-next <= int64(catchUpGap*l.cfg.BatchSize) {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next != next {
		return false
	}
	to := maxOff - int64(l.cfg.BatchSize) // the newest batch goes with the live tail
	switch n := len(q.gaps); {
	case n > 0 && q.gaps[n-1].To == next:
		q.gaps[n-1].To = to // nothing written since the last jump: one gap
	case n >= maxGaps:
		return false
	default:
		q.gaps = append(q.gaps, Gap{From: next, To: to})
	}
	q.next = to
	l.log.Info("mirror: live tail first, the backlog behind it", "queue", q.src.String(), "gap", fmt.Sprintf("[%d,%d)", next, to))
	if !q.filling {
		l.startFill(ctx, q)
	}
	return true
}

// startFill starts q's filler; q.mu is held.
func (l *link) startFill(ctx context.Context, q *queueState) {
	q.filling = true
	l.workers.Add(1)
	go func() {
		defer l.workers.Done()
		l.fill(ctx, q)
	}()
}

// fill writes q's gaps, oldest first, one batch at a time behind the live
// tail (its rate-limit tokens go to live writes first), until none is
// left or ctx ends.
func (l *link) fill(ctx context.Context, q *queueState) {
	defer func() {
		q.mu.Lock()
		q.filling = false
		q.mu.Unlock()
	}()
	bo := l.backoff()
	for ctx.Err() == nil {
		q.mu.Lock()
		if len(q.gaps) == 0 {
			q.filling = false
			q.gapTS = 0
			q.mu.Unlock()
			return
		}
		g, dst := q.gaps[0], q.dst
		q.mu.Unlock()
		if err := l.fillStep(ctx, q, g, dst); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.failed("fill the gap of "+q.src.String(), err)
			if !bo.wait(ctx) {
				return
			}
			continue
		}
		bo.reset()
	}
}

// fillStep writes one batch of gap g from its start and moves the gap's
// start past it.
func (l *link) fillStep(ctx context.Context, q *queueState, g Gap, dst client.MessageQueue) error {
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	res, err := l.puller.Pull(pctx, q.src, l.sel, g.From, min(l.cfg.BatchSize, int(g.To-g.From)))
	cancel()
	if err != nil {
		return onSide(sideSource, fmt.Errorf("pull: %w", err))
	}
	l.ok(sideSource)
	next := res.NextBeginOffset
	switch res.Status {
	case consumer.NoNewMsg:
		if next <= g.From {
			return onSide(sideSource, fmt.Errorf("pull at %d of a gap to %d: nothing there", g.From, g.To))
		}
	case consumer.OffsetIllegal:
		l.log.Warn("mirror: the source no longer holds the position (retention deleted what the link had not mirrored yet)",
			"queue", q.src.String(), "position", g.From, "next", next)
	}
	var msgs []*client.MessageExt
	for _, m := range res.Messages {
		if m.QueueOffset < g.To {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) > 0 {
		q.mu.Lock()
		q.gapTS = msgs[0].StoreTimestamp.UnixMilli()
		q.mu.Unlock()
	}
	items, offs := l.convert(msgs)
	for start := 0; start < len(items); {
		end, bytes := start, 0
		for end < len(items) && (end == start || bytes+len(items[end].Body) <= int(l.cfg.BatchBytes)) {
			bytes += len(items[end].Body)
			end++
		}
		if l.limiter != nil && !l.limiter.take(ctx, end-start, false) {
			return ctx.Err()
		}
		if _, err := l.write(ctx, dst, items[start:end]); err != nil {
			return onSide(sideTarget, err)
		}
		l.ok(sideTarget)
		l.advanceGap(q, g, offs[end-1]+1)
		c := l.counters(q.src.Topic)
		c.msgs.Add(int64(end - start))
		c.bytes.Add(int64(bytes))
		l.mirrored.Add(int64(end - start))
		start = end
	}
	if len(msgs) > 0 {
		next = max(next, msgs[len(msgs)-1].QueueOffset+1)
	}
	if next <= g.From {
		return onSide(sideSource, fmt.Errorf("pull at %d of a gap to %d: %v, next %d", g.From, g.To, res.Status, next))
	}
	l.advanceGap(q, g, next)
	return nil
}

// advanceGap moves the start of q's first gap (g, as the filler read it)
// to from; a gap whose start reaches its end is closed.
func (l *link) advanceGap(q *queueState, g Gap, from int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.gaps) == 0 { // the filler alone moves or closes the first gap
		return
	}
	gp := &q.gaps[0]
	if from > gp.From {
		gp.From = min(from, gp.To)
	}
	if gp.From >= gp.To {
		q.gaps = q.gaps[1:]
		if len(q.gaps) == 0 {
			q.gapTS = 0
			l.log.Info("mirror: backlog behind the live tail written", "queue", q.src.String())
		}
	}
}
