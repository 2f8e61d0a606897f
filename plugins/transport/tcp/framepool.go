package tcp

import (
	"math/bits"
	"sync"
)

// Frame buffers come from pools of power-of-two classes and go back
// through Conn.RecycleFrame once their reader is done with them
// (transport.FrameRecycler): a broker under load reads every send into
// memory it has used before instead of allocating (and the garbage
// collector clearing) a new buffer per request, and a client handing pull
// answers back does the same. A recycled buffer joins the class its
// capacity fills and serves frames up to that size. When its class has
// none spare, a buffer is allocated with its class's full capacity where
// frames are given back as a rule (accepted connections: a server's
// requests), and to its exact size elsewhere (a client's answers are
// mostly kept by their messages), so a frame nobody gives back costs what
// it did before.
const (
	minFrameClass = 9  // 512 B
	maxFrameClass = 22 // 4 MiB; larger frames are allocated and dropped
)

var framePools [maxFrameClass - minFrameClass + 1]sync.Pool

// frameBoxes holds the empty *[]byte a pooled buffer travelled in once
// getFrame took the buffer out: putFrame reuses one rather than boxing
// each buffer it gives back anew (an allocation per frame).
var frameBoxes sync.Pool

// unbox takes the buffer out of v, a pool's *[]byte, and keeps the box.
func unbox(v any) []byte {
	p := v.(*[]byte)
	b := *p
	*p = nil
	frameBoxes.Put(p)
	return b
}

// frameClass is the smallest class whose buffers hold n bytes (those of
// class c have a capacity of at least 1<<c), or -1 beyond the largest.
func frameClass(n int) int {
	c := bits.Len(uint(n - 1))
	if n <= 1<<minFrameClass {
		c = minFrameClass
	}
	if c > maxFrameClass {
		return -1
	}
	return c
}

// getFrame returns a buffer of length n: a recycled one when its class has
// one, otherwise a new one of the class's capacity (full) or of n bytes.
func getFrame(n int, full bool) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if v := framePools[c-minFrameClass].Get(); v != nil {
		return unbox(v)[:n]
	}
	if !full && c > minFrameClass {
		// Buffers allocated to their exact size join the class below
		// the one their size asks for: one of them may still fit.
		pool := &framePools[c-1-minFrameClass]
		if v := pool.Get(); v != nil {
			if b := *(v.(*[]byte)); cap(b) >= n {
				return unbox(v)[:n]
			}
			pool.Put(v)
		}
	}
	if full {
		return make([]byte, n, 1<<c)
	}
	return make([]byte, n)
}

// putFrame keeps b for frames of up to the class its capacity fills;
// buffers outside the classes are dropped.
func putFrame(b []byte) {
	c := bits.Len(uint(cap(b))) - 1 // 1<<c <= cap(b)
	if c < minFrameClass || c > maxFrameClass {
		return
	}
	p, _ := frameBoxes.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	*p = b[:0]
	framePools[c-minFrameClass].Put(p)
}
