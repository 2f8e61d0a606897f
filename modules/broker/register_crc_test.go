package broker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBodyCrc32MatchesJava: REGISTER_BROKER's bodyCrc32 is Java's
// UtilAll.crc32(body), the CRC-32 with its top bit cleared. The wants were
// computed independently with python3: zlib.crc32(b) & 0x7fffffff; the
// first three inputs have the top bit set (zlib.crc32 = 0xf05d33e1,
// 0xcbf43926, 0xe8b7be43), where the old unmasked value, sent as a signed
// int, was negative.
func TestBodyCrc32MatchesJava(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"quiver", "1885156321"},
		{"123456789", "1274296614"},
		{"a", "1756872259"},
		{"hello", "907060870"}, // 0x3610a686: top bit clear, unchanged
		{"", "0"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, bodyCrc32([]byte(tt.give)), "%q", tt.give)
	}
}
