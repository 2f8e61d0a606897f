package ha

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// The master side: it serves HA_PULL, knows its slaves and what each
// acknowledged, answers SYNC_MASTER sends once a slave has their bytes,
// suggests a slave to consumers far behind, and takes back the consumer
// offsets committed to its slaves.

// slaveState is what a master knows of one slave.
type slaveState struct {
	id     int64 // registered brokerId
	member int64 // configured broker.id (failover identity)
	addr   string
	acked  int64
	seen   time.Time
}

func (s *Service) broadcast() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// liveFor is how long a slave counts as connected after its last request.
func (s *Service) liveFor() time.Duration { return 2*s.cfg.MaxWait + 3*time.Second }

// bestAck is the highest offset a connected slave acknowledged.
func (s *Service) bestAck() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bestAckLocked()
}

func (s *Service) bestAckLocked() (int64, bool) {
	best, ok := int64(0), false
	now := time.Now()
	for _, sl := range s.slaves {
		if now.Sub(sl.seen) <= s.liveFor() && (!ok || sl.acked > best) {
			best, ok = sl.acked, true
		}
	}
	return best, ok
}

// handlePull serves HA_PULL: records from the slave's offset (which also
// acknowledges everything below it), at once when there are any, else
// after up to ha.max_wait for new ones.
func (s *Service) handlePull(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	off := e.Int64("offset")
	id := e.OptInt64("brokerId", 1)
	maxBytes := e.OptInt64("maxBytes", int64(s.cfg.BatchBytes))
	addr := e.OptString("slaveAddr")
	if e.Err != nil {
		return remoting.Errorf(req, remoting.SystemError, e.Err.Error())
	}
	member := e.OptInt64("memberId", id)
	if refused := s.refusePull(req, e.OptString("brokerName"), e.OptInt64("epoch", 0)); refused != nil {
		return refused
	}
	wake := s.noteSlave(id, member, addr, off)

	_, end := s.lr.LogOffsets()
	if off > end {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("slave offset %d is past the master's end %d", off, end))
	}
	// A slave that reports the versions it knows is answered at once
	// when they changed since (between its last answer and this request:
	// the wake came before it was held).
	known := e.OptString(metaVersionsExt)
	if off == end {
		if known == "" || known == s.metaVersions() {
			t := time.NewTimer(s.cfg.MaxWait)
			select {
			case <-wake:
			case <-t.C:
			case <-ctx.Done():
			case <-s.ctx.Done():
			}
			t.Stop()
		}
		// Data may still be on its way after a wake by an ack: wait once
		// more for a write, briefly.
		if _, end = s.lr.LogOffsets(); off == end {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.SetExtInt("masterMax", end)
			resp.SetExtInt("next", off)
			resp.SetExt(metaVersionsExt, s.metaVersions())
			return resp
		}
	}
	recs, next, err := s.lr.ReadLog(ctx, off, int(maxBytes))
	if err != nil && len(recs) == 0 {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	_, end = s.lr.LogOffsets()
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.SetExtInt("masterMax", end)
	resp.SetExtInt("next", next)
	resp.SetExt(metaVersionsExt, s.metaVersions())
	resp.BodyParts = recs
	return resp
}

// refusePull answers an HA_PULL this broker must not serve: one for
// another broker name, or, under failover, one while this broker is not
// the master or for another epoch. It returns nil to serve it.
func (s *Service) refusePull(req *remoting.Command, name string, epoch int64) *remoting.Command {
	if name != "" && name != s.b.Config().Name {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("this is broker %s, not %s", s.b.Config().Name, name))
	}
	if s.fo != nil {
		r := s.b.Role()
		switch {
		case !r.Writable:
			return remoting.Errorf(req, remoting.ServiceNotAvailable, fmt.Sprintf("broker %s at %s is not the master now (epoch %d)", s.b.Config().Name, s.b.Config().AdvertiseAddr(), r.Epoch))
		case epoch != r.Epoch:
			return remoting.Errorf(req, remoting.ServiceNotAvailable, fmt.Sprintf("epoch %d asked, this master serves epoch %d", epoch, r.Epoch))
		}
	}
	return nil
}

// noteSlave records slave id's request (its acknowledged offset off) and
// wakes the waiters; it returns the channel the next change closes.
func (s *Service) noteSlave(id, member int64, addr string, off int64) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slaves[id]
	if sl == nil {
		sl = &slaveState{id: id}
		s.slaves[id] = sl
	}
	if time.Since(sl.seen) > s.liveFor() {
		_, end := s.lr.LogOffsets()
		s.log.Info("slave connected", "slave_id", id, "slave_addr", addr, "offset", off, "lag_bytes", end-off)
	}
	sl.addr, sl.member, sl.acked, sl.seen = addr, member, off, time.Now()
	close(s.wake)
	s.wake = make(chan struct{})
	return s.wake
}

// waitAck is the SYNC_MASTER ack waiter: SLAVE_NOT_AVAILABLE when no
// slave is connected within slave_fall_behind_max, FLUSH_SLAVE_TIMEOUT when
// none confirms physEnd within sync_timeout.
func (s *Service) waitAck(ctx context.Context, physEnd int64) int32 {
	var t *time.Timer
	for first := true; ; first = false {
		s.mu.Lock()
		best, ok := s.bestAckLocked()
		wake := s.wake
		s.mu.Unlock()
		if ok && best >= physEnd {
			if t != nil {
				t.Stop()
			}
			if s.fo != nil && !s.b.Role().Writable {
				// Fenced or deposed while waiting: the write may be cut
				// when this broker rejoins, so it is not acknowledged.
				return remoting.FlushSlaveTimeout
			}
			return remoting.Success
		}
		if first {
			if !ok || physEnd-best > int64(s.cfg.SlaveFallBehindMax) {
				return remoting.SlaveNotAvailable
			}
			t = time.NewTimer(s.cfg.SyncTimeout)
			defer t.Stop() //nolint:gocritic // the timer is made once (t == nil before), stopped on return
		}
		select {
		case <-wake:
		case <-t.C:
			return remoting.FlushSlaveTimeout
		case <-ctx.Done():
			return remoting.FlushSlaveTimeout
		}
	}
}

// suggest is the master's suggestWhichBrokerId: a connected slave's id
// when the consumer's next message is more than slave_read_lag_bytes
// behind the commit log's end (RocketMQ: 40% of RAM), else 0.
func (s *Service) suggest(res *store.ReadResult) int64 {
	if len(res.Records) == 0 {
		return 0
	}
	last := res.Records[len(res.Records)-1]
	if len(last) < 36 {
		return 0
	}
	phys := int64(binary.BigEndian.Uint64(last[28:]))
	_, end := s.lr.LogOffsets()
	if end-phys <= int64(s.cfg.SlaveReadLagBytes) {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, sl := range s.slaves {
		if now.Sub(sl.seen) <= s.liveFor() && sl.acked > phys {
			return sl.id
		}
	}
	return 0
}

// takeBackOffsets merges the offsets committed to connected slaves (by
// clients that commit to a slave while the master is away) into the
// master's, keeping the higher of each.
func (s *Service) takeBackOffsets() {
	if s.b.IsSlave() || !s.b.Role().Writable {
		return
	}
	s.mu.Lock()
	var addrs []string
	now := time.Now()
	for _, sl := range s.slaves {
		if sl.addr != "" && now.Sub(sl.seen) <= s.liveFor() {
			addrs = append(addrs, sl.addr)
		}
	}
	s.mu.Unlock()
	for _, addr := range addrs {
		table, err := s.fetchOffsets(addr)
		if err != nil {
			s.log.Warn("take back consumer offsets from slave", "slave_addr", addr, "err", err)
			continue
		}
		if n := s.b.MergeConsumerOffsets(table); n > 0 {
			s.log.Info("took back consumer offsets from slave", "slave_addr", addr, "offsets", n)
		}
	}
}
