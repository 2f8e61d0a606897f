package pop

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestHandleRoundTrip(t *testing.T) {
	h := handle{queue: 3, offset: 1 << 40, nonce: 0xdeadbeefcafe, attempt: 7}
	s := encodeHandle(testKey, "G", "T", h)
	got, err := decodeHandle(testKey, "G", "T", s)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	_, err = decodeHandle([]byte("another key......................"), "G", "T", s)
	assert.ErrorIs(t, err, ErrInvalidHandle, "another broker's key")
	_, err = decodeHandle(testKey, "G", "T2", s)
	assert.ErrorIs(t, err, ErrInvalidHandle)
}

// FuzzDecodeHandle: arbitrary input never panics, and only a handle made
// with the key for that group and topic decodes.
func FuzzDecodeHandle(f *testing.F) {
	f.Add(encodeHandle(testKey, "G", "T", handle{queue: 1, offset: 2, nonce: 3, attempt: 1}), "G", "T")
	f.Add("AAAA", "G", "T")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, s, group, topic string) {
		h, err := decodeHandle(testKey, group, topic, s)
		if err != nil {
			return
		}
		if encodeHandle(testKey, group, topic, h) != s {
			t.Fatalf("handle %q decoded but does not re-encode", s)
		}
	})
}

// FuzzJournalLine: a damaged journal line never panics the replay.
func FuzzJournalLine(f *testing.F) {
	f.Add([]byte(`00000000 {"s":1,"k":"pop","g":"G","t":"T","q":0,"o":1}`))
	f.Add([]byte("zz"))
	f.Fuzz(func(t *testing.T, line []byte) {
		parseLine(line)
	})
}
