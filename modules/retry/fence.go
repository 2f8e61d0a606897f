package retry

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// fenceFor is how long a reset offset is protected from stale commits: the
// Go client waits 10 s after RESET_CONSUMER_CLIENT_OFFSET before it applies
// it, and meanwhile still commits its old offsets (UPDATE_CONSUMER_OFFSET
// and the commit bit of pulls), which would undo the reset.
const fenceFor = 30 * time.Second

const pullCommitOffset = 1

type fenceKey struct {
	group, topic string
	queue        int32
}

// fences hold reset offsets until the group's consumer commits exactly
// that offset (it has applied the reset) or fenceFor passes.
type fences struct {
	active atomic.Int32
	mu     sync.Mutex
	m      map[fenceKey]fenceVal
	now    func() time.Time
}

type fenceVal struct {
	offset int64
	until  time.Time
}

func newFences() *fences { return &fences{m: map[fenceKey]fenceVal{}, now: time.Now} }

func (f *fences) set(k fenceKey, off int64) {
	f.mu.Lock()
	f.m[k] = fenceVal{offset: off, until: f.now().Add(fenceFor)}
	f.active.Store(int32(len(f.m)))
	f.mu.Unlock()
}

// allow reports whether a commit of off may be applied, lifting the fence
// when the commit is the reset offset itself.
func (f *fences) allow(k fenceKey, off int64) bool {
	if f.active.Load() == 0 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[k]
	if !ok {
		return true
	}
	if off == v.offset || f.now().After(v.until) {
		delete(f.m, k)
		f.active.Store(int32(len(f.m)))
		return true
	}
	return false
}

// intercept drops stale offset commits of fenced queues: an
// UPDATE_CONSUMER_OFFSET is answered without being applied, a pull's
// commit bit is cleared.
func (s *Service) intercept(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	if s.fences.active.Load() == 0 {
		return nil
	}
	switch req.Code {
	case remoting.UpdateConsumerOffset:
		e := remoting.ReadExt(req)
		k := fenceKey{e.String("consumerGroup"), e.String("topic"), e.Int32("queueId")}
		off := e.Int64("commitOffset")
		if e.Err == nil && !s.fences.allow(k, off) {
			s.log.Debug("stale offset commit dropped after a reset", "group", k.group, "topic", k.topic, "queue", k.queue, "offset", off)
			return remoting.NewResponse(req, remoting.Success, "")
		}
	case remoting.PullMessage:
		e := remoting.ReadExt(req)
		flag := e.OptInt32("sysFlag", 0)
		if flag&pullCommitOffset == 0 {
			return nil
		}
		k := fenceKey{e.String("consumerGroup"), e.String("topic"), e.Int32("queueId")}
		off := e.OptInt64("commitOffset", -1)
		if e.Err == nil && off >= 0 && !s.fences.allow(k, off) {
			req.ExtFields["sysFlag"] = strconv.Itoa(int(flag &^ pullCommitOffset))
		}
	}
	return nil
}
