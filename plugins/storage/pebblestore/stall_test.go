package pebblestore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStallThresholds: small memtables get more of them before writes
// stop, and an L0 limit scaled to as much L0 data as with the default
// memtable; the default memtable keeps Pebble's usual values.
func TestStallThresholds(t *testing.T) {
	tests := []struct {
		give              int64
		wantMem, wantL0At int
	}{
		{give: 8 << 20, wantMem: 2, wantL0At: 12},
		{give: 64 << 20, wantMem: 2, wantL0At: 12},
		{give: DefaultMemTableSize, wantMem: 2, wantL0At: 12},
		{give: 2 << 20, wantMem: 4, wantL0At: 24},
		{give: 1 << 20, wantMem: 8, wantL0At: 48},
		{give: 256 << 10, wantMem: 32, wantL0At: 192},
		{give: 300 << 10, wantMem: 28, wantL0At: 164},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.wantMem, memTableStops(tt.give), "memtable %d", tt.give)
		assert.Equal(t, tt.wantL0At, l0Stops(12, tt.give), "memtable %d", tt.give)
	}
}
