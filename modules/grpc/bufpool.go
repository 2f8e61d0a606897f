package grpc

import (
	"slices"
	"sync"

	"google.golang.org/grpc/mem"
)

// The endpoint's buffers for messages and frames. grpc-go's default pool
// has tiers of 256B, 4KiB, 16KiB, 32KiB and 1MiB, so every message of
// 33KiB to 1MiB takes a 1MiB buffer and clears all of it: a 64KiB message
// queued in the stream of a consumer that stopped reading held 1MiB, 12
// such consumers pinned 32MB of pooled buffers (the stalled-reader flood
// of docs/lab/BENCHMARKS.md), and each such message cost a 1MiB clear.
// Here the tiers step by at most 1.5× (2^k and 3·2^(k-1)), so a buffer is
// at most half again its length, up to bufPoolMax (above the largest
// request the endpoint reads: max_message_size 4MiB + 1MiB); larger
// buffers are allocated to their length and left to the collector.

const (
	bufPoolMin = 256
	bufPoolMax = 8 << 20
)

// bufferPool is a mem.BufferPool of fine tiers. The zero value is not
// usable; newBufferPool builds one.
type bufferPool struct {
	sizes []int // ascending
	pools []sync.Pool
}

var _ mem.BufferPool = (*bufferPool)(nil)

func newBufferPool() *bufferPool {
	var sizes []int
	for s := bufPoolMin; s <= bufPoolMax; s *= 2 {
		sizes = append(sizes, s)
		if s*3/2 < bufPoolMax {
			sizes = append(sizes, s*3/2)
		}
	}
	slices.Sort(sizes)
	p := &bufferPool{sizes: sizes, pools: make([]sync.Pool, len(sizes))}
	for i, s := range sizes {
		p.pools[i].New = func() any {
			b := make([]byte, s)
			return &b
		}
	}
	return p
}

// endpointBuffers is the pool the endpoint's server and codec share.
var endpointBuffers = newBufferPool()

// tier is the index of the smallest tier of at least n bytes, or -1.
func (p *bufferPool) tier(n int) int {
	i, _ := slices.BinarySearch(p.sizes, n)
	if i == len(p.sizes) {
		return -1
	}
	return i
}

// Get returns a buffer of length n, cleared.
func (p *bufferPool) Get(n int) *[]byte {
	i := p.tier(n)
	if i < 0 {
		b := make([]byte, n)
		return &b
	}
	bp := p.pools[i].Get().(*[]byte)
	b := (*bp)[:n]
	clear(b)
	*bp = b
	return bp
}

// Put keeps buf for reuse if its capacity is a tier's; any other buffer
// (one over bufPoolMax, or one not from this pool) is dropped.
func (p *bufferPool) Put(buf *[]byte) {
	c := cap(*buf)
	i, found := slices.BinarySearch(p.sizes, c)
	if !found {
		return
	}
	*buf = (*buf)[:c]
	p.pools[i].Put(buf)
}
