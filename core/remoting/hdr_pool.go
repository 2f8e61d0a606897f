package remoting

import "sync"

// The extFields maps of SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE and
// PULL_MESSAGE requests are recycled: they are a quarter of a broker's
// allocations under a publish load, and every request fills one of about
// the same size. The ownership rule: Decode takes the map from the pool
// for a request with one of these codes (Command.pooledExt); only the
// Router gives it back, after a handler registered with RegisterScoped
// returned, i.e. one that promises to keep no reference to the map. A
// pooled map that never reaches such a handler (a client's decode, any
// other handler) is simply collected.

// pooledExtCodes are the request codes whose header maps are pooled.
func pooledExtCode(code int32) bool {
	switch code {
	case SendMessage, SendMessageV2, SendBatchMessage, PullMessage:
		return true
	}
	return false
}

// extMapSize covers SEND_MESSAGE_V2's a..n and PULL_MESSAGE's fields.
const extMapSize = 16

var extMapPool = sync.Pool{New: func() any { return make(map[string]string, extMapSize) }}

func getExtMap() map[string]string { return extMapPool.Get().(map[string]string) }

func putExtMap(m map[string]string) {
	if len(m) > 4*extMapSize {
		return // an odd request grew it: let it go rather than keep it
	}
	clear(m)
	extMapPool.Put(m)
}

// releaseExt gives a pooled ExtFields map back and leaves c without one.
func (c *Command) releaseExt() {
	if !c.pooledExt {
		return
	}
	m := c.ExtFields
	c.ExtFields, c.pooledExt = nil, false
	if m != nil {
		putExtMap(m)
	}
}

// Release hands the frame a received command was read into back to its
// transport for reuse (transport.FrameRecycler) and drops Body: the
// caller must keep nothing of Body afterwards. It does nothing for a
// command built locally or read by a transport that does not recycle
// frames; a second call does nothing. Handlers registered with
// Router.RegisterScoped have their request released for them; a caller
// done with a response's body may release it (consumer.PullEach does).
func (c *Command) Release() {
	if c.recycle == nil {
		return
	}
	f, r := c.frame, c.recycle
	c.frame, c.recycle, c.Body = nil, nil, nil
	r(f)
}
