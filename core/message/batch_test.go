package message_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

// capturedBatch is the spec §4.3 capture: two 2-byte bodies, no properties.
const capturedBatch = "00000018 00000000 00000000 00000000 00000002 6231 0000" +
	"00000018 00000000 00000000 00000000 00000002 6232 0000"

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

func TestDecodeBatchCaptured(t *testing.T) {
	b := unhex(t, capturedBatch)
	items, err := message.DecodeBatch(b)
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, "b1", string(items[0].Body))
	assert.Equal(t, "b2", string(items[1].Body))
	for _, it := range items {
		assert.Equal(t, int32(0), it.Flag)
		assert.Equal(t, message.Properties{}, it.Properties)
	}
	// The encoder writes the same bytes.
	var enc []byte
	for _, it := range items {
		enc = message.AppendBatchItem(enc, it)
	}
	assert.Equal(t, b, enc)
}

func TestBatchRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		items []message.BatchItem
	}{
		{"one", []message.BatchItem{{Flag: 1, Body: []byte("x"), Properties: message.Properties{"TAGS": "a"}}}},
		{"several", []message.BatchItem{
			{Flag: 0, Body: []byte("first"), Properties: message.Properties{"KEYS": "k1 k2", "TAGS": "t"}},
			{Flag: -1, Body: []byte{}, Properties: message.Properties{}},
			{Flag: 5, Body: bytes.Repeat([]byte{0}, 70000), Properties: message.Properties{"UNIQ_KEY": "C0A8"}},
		}},
		{"max properties", []message.BatchItem{{Body: []byte("b"), Properties: message.Properties{"K": strings.Repeat("v", message.MaxPropertiesLength-2)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var enc []byte
			for _, it := range tt.items {
				enc = message.AppendBatchItem(enc, it)
			}
			got, err := message.DecodeBatch(enc)
			require.NoError(t, err)
			require.Len(t, got, len(tt.items))
			for i := range got {
				assert.Equal(t, tt.items[i].Flag, got[i].Flag)
				assert.True(t, bytes.Equal(tt.items[i].Body, got[i].Body), "item %d body", i)
				assert.Equal(t, tt.items[i].Properties, got[i].Properties)
			}
			// Every item's size field matches 20 + body + 2 + props.
			it := tt.items[0]
			assert.Equal(t, uint32(20+len(it.Body)+2+len(it.Properties.Encode())), binary.BigEndian.Uint32(enc))
		})
	}
	got, err := message.DecodeBatch(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestDecodeBatchErrors(t *testing.T) {
	be := binary.BigEndian
	good := unhex(t, capturedBatch)[:24]
	tests := []struct {
		name string
		give func() []byte
	}{
		{"three bytes", func() []byte { return []byte{0, 0, 0} }},
		{"size below 22", func() []byte { b := bytes.Clone(good); be.PutUint32(b, 21); return b }},
		{"size negative", func() []byte { b := bytes.Clone(good); be.PutUint32(b, 0x80000000); return b }},
		{"size beyond data", func() []byte { b := bytes.Clone(good); be.PutUint32(b, 25); return b }},
		{"size larger than fields", func() []byte { b := append(bytes.Clone(good), 0); be.PutUint32(b, 25); return b }},
		{"body length negative", func() []byte { b := bytes.Clone(good); be.PutUint32(b[16:], 0xFFFFFFFF); return b }},
		{"body length beyond size", func() []byte { b := bytes.Clone(good); be.PutUint32(b[16:], 3); return b }},
		{"props length beyond size", func() []byte { b := bytes.Clone(good); be.PutUint16(b[22:], 1); return b }},
		{"second item bad", func() []byte { return append(bytes.Clone(good), 0, 0, 0, 0x18) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = message.DecodeBatch(tt.give()) })
			assert.ErrorIs(t, err, message.ErrMalformed)
		})
	}
}

func TestDecodeBatchNegativePropsLength(t *testing.T) {
	// A non-positive properties length means none, as the Go client reads it.
	b := unhex(t, capturedBatch)[:24]
	binary.BigEndian.PutUint16(b[22:], 0xFFFF)
	items, err := message.DecodeBatch(b)
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, message.Properties{}, items[0].Properties)
}

func TestDecodeBatchTruncated(t *testing.T) {
	var enc []byte
	for i := range 3 {
		enc = message.AppendBatchItem(enc, message.BatchItem{Flag: int32(i), Body: []byte("body"), Properties: message.Properties{"a": "b"}})
	}
	itemLen := len(enc) / 3
	for n := range len(enc) {
		var items []message.BatchItem
		var err error
		require.NotPanics(t, func() { items, err = message.DecodeBatch(enc[:n]) }, "cut at %d", n)
		if n%itemLen == 0 {
			require.NoError(t, err, "cut at an item boundary %d", n)
			assert.Len(t, items, n/itemLen)
			continue
		}
		require.ErrorIs(t, err, message.ErrMalformed, "cut at %d", n)
	}
}

// TestAppendBatchItemAllocatesNothing: with room in b, encoding an item
// (properties included) allocates nothing; the mirror encodes every
// pulled message so.
func TestAppendBatchItemAllocatesNothing(t *testing.T) {
	it := message.BatchItem{Flag: 2, Body: bytes.Repeat([]byte("x"), 1024),
		Properties: message.Properties{"UNIQ_KEY": "C0A80001", "KEYS": "k1 k2", "TAGS": "t", "WAIT": "true"}}
	b := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() { b = message.AppendBatchItem(b[:0], it) })
	assert.Zero(t, allocs)
	got, err := message.DecodeBatch(b)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, it.Flag, got[0].Flag)
	assert.Equal(t, it.Body, got[0].Body)
	assert.Equal(t, it.Properties, got[0].Properties)
}
