package grpc

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBufferPoolTiers: a buffer is at least the length asked for and at
// most 1.5× it (256B for the smallest); over bufPoolMax it is exactly the
// length and not kept; a buffer of a size no tier has is not kept either.
func TestBufferPoolTiers(t *testing.T) {
	p := newBufferPool()
	for _, n := range []int{0, 1, 255, 256, 257, 384, 385, 4096, 32<<10 + 1, 64 << 10, 65<<10 + 13, 700 << 10, bufPoolMax} {
		b := p.Get(n)
		assert.Len(t, *b, n)
		assert.GreaterOrEqual(t, cap(*b), n)
		assert.LessOrEqual(t, cap(*b), max(bufPoolMin, n*3/2), "length %d", n)
		for _, c := range *b {
			if c != 0 {
				t.Fatalf("length %d: buffer not cleared", n)
			}
		}
		p.Put(b)
		assert.Equal(t, cap(*b), len(*b), "a kept buffer is whole again")
	}
	big := p.Get(bufPoolMax + 1)
	assert.Equal(t, bufPoolMax+1, cap(*big))
	assert.Equal(t, -1, p.tier(bufPoolMax+1))

	// Reused buffers come back cleared, whatever they held.
	b := p.Get(1000)
	for i := range *b {
		(*b)[i] = 0xff
	}
	p.Put(b)
	for range 10 {
		c := p.Get(1000)
		for _, x := range *c {
			if x != 0 {
				t.Fatal("a reused buffer was not cleared")
			}
		}
		p.Put(c)
	}

	odd := make([]byte, 300)
	p.Put(&odd) // no tier of 300: dropped, not an error
	assert.Less(t, p.tier(300), len(p.sizes))
}
