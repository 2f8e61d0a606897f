package message_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

func TestOffsetMsgID(t *testing.T) {
	tests := []struct {
		name   string
		host   netip.AddrPort
		offset int64
		want   string
	}{
		{"loopback offset 0", netip.MustParseAddrPort("127.0.0.1:10911"), 0, "7F00000100002A9F0000000000000000"},
		{"private host", netip.MustParseAddrPort("192.168.1.20:10911"), 0x1234, "C0A8011400002A9F0000000000001234"},
		{"max offset", netip.MustParseAddrPort("10.0.0.1:1"), 0x7FFFFFFFFFFFFFFF, "0A000001000000017FFFFFFFFFFFFFFF"},
		{"v4 in v6 is written as v4", netip.MustParseAddrPort("[::ffff:127.0.0.1]:10911"), 0, "7F00000100002A9F0000000000000000"},
		{"ipv6", netip.MustParseAddrPort("[::1]:10911"), 5,
			"00000000000000000000000000000001" + "00002A9F" + "0000000000000005"},
		{"ipv6 full", netip.MustParseAddrPort("[2001:db8::abcd]:65535"), 255,
			"20010DB800000000000000000000ABCD" + "0000FFFF" + "00000000000000FF"},
		{"no host", netip.AddrPort{}, 1, "00000000000000000000000000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := message.OffsetMsgID(tt.host, tt.offset)
			assert.Equal(t, tt.want, got)
			host, off, err := message.ParseOffsetMsgID(got)
			require.NoError(t, err)
			assert.Equal(t, tt.offset, off)
			want := netip.AddrPortFrom(tt.host.Addr().Unmap(), tt.host.Port())
			if !tt.host.IsValid() {
				want = netip.MustParseAddrPort("0.0.0.0:0")
			}
			assert.Equal(t, want, host)
		})
	}
}

func TestParseOffsetMsgID(t *testing.T) {
	host, off, err := message.ParseOffsetMsgID("7f00000100002a9f00000000000000ff")
	require.NoError(t, err, "lowercase hex is accepted")
	assert.Equal(t, netip.MustParseAddrPort("127.0.0.1:10911"), host)
	assert.Equal(t, int64(255), off)

	for _, give := range []string{
		"",
		"7F",
		strings.Repeat("0", 31),
		strings.Repeat("0", 33),
		strings.Repeat("0", 55), // the Go client would panic on these
		strings.Repeat("0", 57),
		strings.Repeat("0", 64),
		"7F00000100002A9F000000000000000G",
		"7F00000100002A9F00000000000000 0",
		strings.Repeat("Z", 56),
	} {
		_, _, err := message.ParseOffsetMsgID(give)
		assert.ErrorIs(t, err, message.ErrBadMsgID, "%q", give)
	}
}

func TestTagsHashCode(t *testing.T) {
	// javaHash is String.hashCode over UTF-16 code units, written out.
	javaHash := func(units ...uint16) int64 {
		var h int32
		for _, u := range units {
			h = 31*h + int32(u)
		}
		return int64(h)
	}
	tests := []struct {
		name  string
		give  string
		units []uint16
		want  int64
	}{
		{"spec vector", "TagA", []uint16{'T', 'a', 'g', 'A'}, 2598919},
		{"empty", "", nil, 0},
		{"latin-1 is one unit, not two UTF-8 bytes", "é", []uint16{0xE9}, 233},
		{"BMP CJK", "标签", []uint16{0x6807, 0x7B7E}, 857175},
		{"surrogate pair", "😀", []uint16{0xD83D, 0xDE00}, 1772899},
		{"pair inside ASCII", "a😀b", []uint16{'a', 0xD83D, 0xDE00, 'b'}, 57849694},
		{"wraps around int32", "TagA||TagB||TagC", []uint16{'T', 'a', 'g', 'A', '|', '|', 'T', 'a', 'g', 'B', '|', '|', 'T', 'a', 'g', 'C'}, -136118632},
		{"mixed", "日本語タグ🎉", []uint16{0x65E5, 0x672C, 0x8A9E, 0x30BF, 0x30B0, 0xD83C, 0xDF89}, -303473547},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, javaHash(tt.units...), "hand-computed value")
			assert.Equal(t, tt.want, message.TagsHashCode(tt.give))
		})
	}
	// The Go client hashes UTF-8 bytes; for non-ASCII it differs (spec §7.2).
	var goClient int32
	for _, b := range []byte("é") {
		goClient = 31*goClient + int32(b)
	}
	assert.NotEqual(t, int64(goClient), message.TagsHashCode("é"))
}
