package client

import (
	"encoding/binary"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// uniqIDs generates UNIQ_KEY values in the official client's layout:
// uppercase hex of IPv4(4) + pid(int16) + class-loader id(int32, 0), then
// lowercase hex of int32 milliseconds since the start of the month and an
// int16 counter. (The official Go client counts whole seconds ×1000; we
// keep milliseconds as Java does, which makes collisions rarer.)
type uniqIDs struct {
	mu     sync.Mutex
	prefix string
	start  time.Time
	next   time.Time
	count  uint16
}

var uniqGen = newUniqIDs()

func newUniqIDs() *uniqIDs {
	var b [10]byte
	copy(b[:4], clientIP4())
	binary.BigEndian.PutUint16(b[4:], uint16(os.Getpid()))
	return &uniqIDs{prefix: strings.ToUpper(hex.EncodeToString(b[:]))}
}

// NewUniqID returns a fresh UNIQ_KEY.
func NewUniqID() string { return uniqGen.id(time.Now()) }

func (u *uniqIDs) id(now time.Time) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !now.Before(u.next) {
		y, m, _ := now.Date()
		u.start = time.Date(y, m, 1, 0, 0, 0, 0, time.Local)
		u.next = u.start.AddDate(0, 1, 0)
	}
	u.count++
	var b [6]byte
	binary.BigEndian.PutUint32(b[:], uint32(now.Sub(u.start).Milliseconds()))
	binary.BigEndian.PutUint16(b[4:], u.count)
	return u.prefix + hex.EncodeToString(b[:])
}

// clientIP4 is the first non-loopback IPv4 address, or 127.0.0.1.
func clientIP4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				if v4 := ipn.IP.To4(); v4 != nil {
					return v4
				}
			}
		}
	}
	return net.IPv4(127, 0, 0, 1).To4()
}
