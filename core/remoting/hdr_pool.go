package remoting

import "sync"

// The extFields maps of SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE and
// PULL_MESSAGE requests, and of responses, are recycled: they are a
// quarter of a broker's allocations under a publish load, and every
// request fills one of about the same size. The ownership rule: Decode
// takes the map from the pool for such a command (Command.pooledExt);
// only Release gives it back: the Router's, after a handler registered
// with RegisterScoped returned (one that promises to keep no reference to
// the map), or a caller's done with a response (consumer.PullEach). A
// pooled map that is never released is simply collected.

// pooledExtCode reports the request codes whose header maps are pooled.
func pooledExtCode(code int32) bool {
	switch code {
	case SendMessage, SendMessageV2, SendBatchMessage, PullMessage:
		return true
	}
	return false
}

// pooledExt reports whether c's decoded header map may go back to the
// pool (its code and flag known).
func pooledExt(c *Command) bool {
	return c.Flag&FlagResponse != 0 || pooledExtCode(c.Code)
}

// extMapSize is about the fields of SEND_MESSAGE_V2 (a..n) and PULL_MESSAGE.
const extMapSize = 16

// A new map starts small and grows to what its command needs (most
// responses are not given back, and carry a few fields); one that comes
// back keeps its size.
var extMapPool = sync.Pool{New: func() any { return make(map[string]string) }}

func getExtMap() map[string]string { return extMapPool.Get().(map[string]string) }

func putExtMap(m map[string]string) {
	if len(m) > 4*extMapSize {
		return // an odd request grew it: let it go rather than keep it
	}
	clear(m)
	extMapPool.Put(m)
}

// releaseExt gives a pooled ExtFields map (or the entries kept without a
// map) back and leaves c without one.
func (c *Command) releaseExt() {
	c.releaseRaw()
	if !c.pooledExt {
		return
	}
	m := c.ExtFields
	c.ExtFields, c.pooledExt = nil, false
	if m != nil {
		putExtMap(m)
	}
}

// Release hands the decoded header map back to the pool and the frame the
// command was read into back to its transport (transport.FrameRecycler),
// and drops ExtFields and Body: the caller must keep nothing of either
// afterwards (strings read from them stay valid). It does nothing for a
// command built locally; a second call does nothing. Handlers registered
// with Router.RegisterScoped have their request released for them; a
// caller done with a response may release it (consumer.PullEach does).
func (c *Command) Release() {
	c.releaseExt()
	if c.recycler == nil {
		return
	}
	f, r := c.frame, c.recycler
	c.frame, c.recycler, c.Body = nil, nil, nil
	r.RecycleFrame(f)
}
