package tcp

import (
	"math/bits"
	"sync"
)

// Frame buffers of accepted connections come from pools of power-of-two
// sizes and go back through Conn.RecycleFrame once remoting is done with
// a request (transport.FrameRecycler): a broker under load then reads
// every send into memory it has used before instead of allocating (and
// the garbage collector clearing) a new buffer per request.
const (
	minFrameClass = 12 // 4 KiB
	maxFrameClass = 22 // 4 MiB; larger frames are allocated and dropped
)

var framePools [maxFrameClass - minFrameClass + 1]sync.Pool

// frameClass is the smallest class holding n bytes, or -1.
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

// getFrame returns a buffer of length n, from a pool where n fits one.
func getFrame(n int) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if v := framePools[c-minFrameClass].Get(); v != nil {
		return (*(v.(*[]byte)))[:n]
	}
	return make([]byte, n, 1<<c)
}

// putFrame keeps b for reuse when its capacity is exactly a class size
// (so it came from getFrame).
func putFrame(b []byte) {
	c := bits.Len(uint(cap(b))) - 1
	if c < minFrameClass || c > maxFrameClass || cap(b) != 1<<c {
		return
	}
	b = b[:0]
	framePools[c-minFrameClass].Put(&b)
}
