package pebblestore

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walTestChunk is one chunk of a WAL in the sync-header format Pebble
// writes (type 9-12: full, first, middle, last), for log logNum.
func walTestChunk(enc byte, logNum uint32, payload []byte) []byte {
	c := make([]byte, walSyncHdr, walSyncHdr+len(payload))
	binary.LittleEndian.PutUint16(c[4:], uint16(len(payload)))
	c[6] = enc
	binary.LittleEndian.PutUint32(c[7:], logNum)
	c = append(c, payload...)
	binary.LittleEndian.PutUint32(c[0:], walCRC(c[6:]))
	return c
}

// walTestBatch is a batch payload of size bytes: sequence number, count,
// then filler.
func walTestBatch(seq uint64, count uint32, size int) []byte {
	p := make([]byte, size)
	binary.LittleEndian.PutUint64(p, seq)
	binary.LittleEndian.PutUint32(p[8:], count)
	for i := 12; i < size; i++ {
		p[i] = byte(seq) + byte(i)
	}
	return p
}

// TestWALResyncWithEmptyFirstChunkAtBlockEnd: when a record does not fit
// the end of a block, Pebble's writer starts it there with a first chunk
// of no payload and goes on in the next block. The chain of valid chunks
// after a damaged one then ends in a chunk with no batch header to check;
// resync refused that chain, so the damage cost the rest of its block
// (about 75 records in TestCorruptWAL under -race, where an async sync
// made the block end that way).
func TestWALResyncWithEmptyFirstChunkAtBlockEnd(t *testing.T) {
	const logNum, size = 7, 333
	var b []byte
	seq := uint64(100)
	n := 0
	// Full chunks until the next would leave less than two headers.
	for walBlockSize-len(b) >= 2*(walSyncHdr+size)+walSyncHdr {
		b = append(b, walTestChunk(9, logNum, walTestBatch(seq, 2, size))...)
		seq += 2
		n++
	}
	// One more full chunk sized so that exactly one header is left, then
	// the empty first chunk of the record that continues in block 2.
	last := walBlockSize - len(b) - 2*walSyncHdr
	b = append(b, walTestChunk(9, logNum, walTestBatch(seq, 2, last))...)
	seq += 2
	n++
	b = append(b, walTestChunk(10, logNum, nil)...)
	require.Len(t, b, walBlockSize)
	b = append(b, walTestChunk(12, logNum, walTestBatch(seq, 2, size))...) // its last chunk
	n++

	clean := scanWAL(b, logNum)
	require.Equal(t, n, len(clean.batches))
	require.Negative(t, clean.bad)

	// Damage the third record's payload: it alone is lost.
	dmg := append([]byte(nil), b...)
	third := 2*(walSyncHdr+size) + walSyncHdr + 40
	for i := range 64 {
		dmg[third+i] ^= 0xa5
	}
	sc := scanWAL(dmg, logNum)
	assert.True(t, sc.confirmed, "valid chunks follow the damage")
	assert.Equal(t, 1, sc.lost)
	assert.Equal(t, n-1, len(sc.batches), "only the damaged record is lost")
	assert.Equal(t, 2, sc.firstAfter)
}
