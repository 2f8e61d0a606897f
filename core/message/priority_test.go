package message

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParsePriority(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int32
		ok   bool
	}{
		{"0", 0, true}, {"9", 9, true}, {"007", 7, true}, {"2147483647", MaxPriority, true},
		{"", 0, false}, {"-1", 0, false}, {"+1", 0, false}, {" 1", 0, false}, {"1 ", 0, false},
		{"1.5", 0, false}, {"2147483648", 0, false}, {"99999999999", 0, false}, {"x", 0, false},
	} {
		got, ok := ParsePriority(tt.in)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
	p, ok := Properties{PropertyPriority: "4"}.Priority()
	assert.True(t, ok)
	assert.Equal(t, int32(4), p)
	_, ok = Properties{}.Priority()
	assert.False(t, ok)
}

// FuzzParsePriority: any input either parses to a value in [0,
// MaxPriority] that formats back to the same number, or is refused; it
// never panics.
func FuzzParsePriority(f *testing.F) {
	for _, s := range []string{"0", "9", "2147483647", "2147483648", "-1", "", "0009", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := ParsePriority(s)
		if !ok {
			if p != 0 {
				t.Fatalf("%q refused with %d", s, p)
			}
			return
		}
		if p < 0 {
			t.Fatalf("%q parsed to %d", s, p)
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n != uint64(p) {
			t.Fatalf("%q parsed to %d, strconv says %d (%v)", s, p, n, err)
		}
	})
}
