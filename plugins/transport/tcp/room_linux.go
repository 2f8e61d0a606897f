package tcp

import (
	"crypto/tls"
	"net"

	"golang.org/x/sys/unix"
)

// SendRoom is half the socket's send buffer less the bytes queued in it
// and not yet acknowledged (SIOCOUTQ): a write of that many bytes does not
// wait for the peer, the kernel's accounting of a queued byte being at
// most twice its size. It is 0 when the socket cannot say (not TCP, closed,
// or the bytes buffered for a write still to flush).
func (c *Conn) SendRoom() int {
	if !c.wmu.TryLock() {
		return 0 // a write is running: its bytes are not counted yet
	}
	defer c.wmu.Unlock()
	if c.w.Buffered() > 0 {
		return 0
	}
	nc := c.c
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	room := 0
	if err := rc.Control(func(fd uintptr) {
		buf, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		if err != nil {
			return
		}
		queued, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		if err != nil {
			return
		}
		room = buf/2 - queued
	}); err != nil || room < 0 {
		return 0
	}
	return room
}
