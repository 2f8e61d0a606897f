package message

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
)

// ErrBadMsgID reports an offsetMsgId that cannot be parsed.
var ErrBadMsgID = errors.New("message: malformed offset message id")

// OffsetMsgID is the uppercase hex of store host IP, int32 port and int64
// commit-log offset: 32 characters for IPv4, 56 for IPv6.
func OffsetMsgID(storeHost netip.AddrPort, commitLogOffset int64) string {
	var buf [28]byte
	b := appendHost(buf[:0], storeHost)
	b = binary.BigEndian.AppendUint64(b, uint64(commitLogOffset))
	var out [56]byte
	for i, c := range b {
		out[2*i], out[2*i+1] = upperHex[c>>4], upperHex[c&0xF]
	}
	return string(out[:2*len(b)])
}

const upperHex = "0123456789ABCDEF"

// ParseOffsetMsgID returns the store host and commit-log offset in id.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	var ipLen int
	switch len(id) {
	case 32:
		ipLen = 4
	case 56:
		ipLen = 16
	default:
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q has length %d", ErrBadMsgID, id, len(id))
	}
	raw, err := hex.DecodeString(id)
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %q: %v", ErrBadMsgID, id, err)
	}
	addr, _ := netip.AddrFromSlice(raw[:ipLen])
	port := binary.BigEndian.Uint32(raw[ipLen : ipLen+4])
	off := int64(binary.BigEndian.Uint64(raw[ipLen+4:]))
	return netip.AddrPortFrom(addr, uint16(port)), off, nil
}

func appendHost(b []byte, h netip.AddrPort) []byte {
	a := h.Addr()
	switch {
	case !a.IsValid():
		// No host: 0.0.0.0, port 0. (As4 panics on the zero Addr.)
		b = append(b, 0, 0, 0, 0)
	case a.Is4() || a.Is4In6():
		ip := a.Unmap().As4()
		b = append(b, ip[:]...)
	default:
		ip := a.As16()
		b = append(b, ip[:]...)
	}
	return binary.BigEndian.AppendUint32(b, uint32(h.Port()))
}

func hostIsV6(h netip.AddrPort) bool {
	a := h.Addr()
	return a.IsValid() && a.Is6() && !a.Is4In6()
}
