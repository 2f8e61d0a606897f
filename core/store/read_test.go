package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name          string
		off, min, max int64
		want          ReadStatus
		wantNext      int64
		wantScan      bool
	}{
		{"empty queue", 0, 0, 0, NoMessageInQueue, 0, false},
		{"empty queue, offset ahead", 5, 0, 0, NoMessageInQueue, 0, false},
		{"below min", 1, 3, 9, OffsetTooSmall, 3, false},
		{"negative", -1, 0, 9, OffsetTooSmall, 0, false},
		{"at max", 9, 3, 9, OffsetOverflowOne, 9, false},
		{"past max", 12, 3, 9, OffsetOverflowBadly, 9, false},
		{"inside", 4, 3, 9, Found, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r ReadResult
			assert.Equal(t, tt.wantScan, r.Classify(tt.off, tt.min, tt.max))
			assert.Equal(t, tt.want, r.Status)
			assert.Equal(t, tt.wantNext, r.NextOffset)
			assert.Equal(t, tt.min, r.MinOffset)
			assert.Equal(t, tt.max, r.MaxOffset)
		})
	}
}

func TestLimits(t *testing.T) {
	m, b, s := ReadOptions{}.Limits()
	assert.Equal(t, []int64{32, 256 << 10, 800}, []int64{int64(m), int64(b), s})
	m, b, s = ReadOptions{MaxMessages: 100, MaxBytes: 10, MaxScan: 0}.Limits()
	assert.Equal(t, []int64{100, 10, 2000}, []int64{int64(m), int64(b), s})
	_, _, s = ReadOptions{MaxScan: 7}.Limits()
	assert.Equal(t, int64(7), s)
}
