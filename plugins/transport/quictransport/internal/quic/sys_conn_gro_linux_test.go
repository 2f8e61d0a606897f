//go:build linux

package quic

// QUIVER patch: tests of UDP GRO on receive (sys_conn_oob.go).

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kernelTakesGRO sets UDP_GRO on a fresh UDP socket of its own.
func kernelTakesGRO() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1)
}

// groPair is a receiving oobConn and a sending socket on 127.0.0.1.
func groPair(t *testing.T) (*oobConn, *net.UDPConn) {
	t.Helper()
	recv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Close() })
	oc, err := newConn(recv, true)
	if err != nil {
		t.Fatal(err)
	}
	send, err := net.DialUDP("udp", nil, recv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close() })
	if err := recv.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return oc, send
}

// segments is n datagrams of size bytes and a last one of last bytes, each
// filled with its own index.
func segments(n, size, last int) [][]byte {
	var segs [][]byte
	for i := range n {
		segs = append(segs, bytes.Repeat([]byte{byte(i + 1)}, size))
	}
	if last > 0 {
		segs = append(segs, bytes.Repeat([]byte{0xEE}, last))
	}
	return segs
}

// sendGSO sends segs in one sendmsg with UDP_SEGMENT (all but the last
// of the same size), as quic-go's GSO sender does; it skips the test when
// the kernel refuses GSO.
func sendGSO(t *testing.T, c *net.UDPConn, segs [][]byte) {
	t.Helper()
	oob := appendUDPSegmentSizeMsg(nil, uint16(len(segs[0])))
	if _, _, err := c.WriteMsgUDP(bytes.Join(segs, nil), oob, nil); err != nil {
		if errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOPROTOOPT) {
			t.Skipf("no UDP GSO here: %v", err)
		}
		t.Fatal(err)
	}
}

// readAll reads n packets and checks they are want, in order.
func readAll(t *testing.T, oc *oobConn, want [][]byte) {
	t.Helper()
	for i, w := range want {
		p, err := oc.ReadPacket()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if !bytes.Equal(p.data, w) {
			t.Fatalf("packet %d: %d bytes starting %x, want %d bytes of %x", i, len(p.data), p.data[:min(4, len(p.data))], len(w), w[0])
		}
		if p.remoteAddr == nil {
			t.Fatalf("packet %d: no remote address", i)
		}
		p.buffer.Release()
	}
}

// TestGROSplitsCoalescedDatagrams: a GSO batch sent over loopback reaches a
// socket with UDP GRO as one coalesced message (the kernel keeps the batch
// whole for a GRO reader), and ReadPacket returns its datagrams one by one,
// with plain datagrams around it in order. Without GRO (QUIC_GO_DISABLE_GRO
// or a kernel without it) the kernel splits the batch and the reads are
// the same.
func TestGROSplitsCoalescedDatagrams(t *testing.T) {
	for _, tt := range []struct {
		name    string
		disable bool
	}{{"gro", false}, {"without gro", true}} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.disable {
				t.Setenv("QUIC_GO_DISABLE_GRO", "true")
			}
			oc, send := groPair(t)
			if !tt.disable && !oc.gro {
				// Only a kernel that refuses the option excuses a
				// connection without GRO; if a plain socket takes it,
				// enableGRO failed where it should not have.
				if err := kernelTakesGRO(); err == nil {
					t.Fatal("the kernel takes UDP_GRO but the connection did not turn it on")
				} else {
					t.Skipf("the kernel refuses UDP_GRO: %v", err)
				}
			}
			if tt.disable && oc.gro {
				t.Fatal("QUIC_GO_DISABLE_GRO=true left GRO on")
			}
			before := []byte("plain datagram before")
			after := []byte("plain datagram after")
			segs := segments(10, 1200, 500)
			if _, err := send.Write(before); err != nil {
				t.Fatal(err)
			}
			sendGSO(t, send, segs)
			if _, err := send.Write(after); err != nil {
				t.Fatal(err)
			}
			want := append(append([][]byte{before}, segs...), after)
			readAll(t, oc, want)
			if tt.disable {
				if oc.coalesced != 0 {
					t.Fatalf("%d coalesced messages without GRO", oc.coalesced)
				}
				return
			}
			if oc.coalesced != 1 {
				t.Fatalf("%d coalesced messages, want the GSO batch as 1", oc.coalesced)
			}
			// A second batch of another segment size, the largest a GSO
			// batch of quic-go's can hold.
			segs = segments(14, 1452, 0)
			sendGSO(t, send, segs)
			readAll(t, oc, segs)
			if oc.coalesced != 2 {
				t.Fatalf("%d coalesced messages, want 2", oc.coalesced)
			}
		})
	}
}

// TestGROSegmentSize: the UDP_GRO control message's size in the host's
// byte order, or byte-swapped as qemu-user hands it to a big-endian guest.
func TestGROSegmentSize(t *testing.T) {
	le := func(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	be := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	for _, v := range []uint32{1, 1200, 1252, 1452, 65535} {
		for _, b := range [][]byte{le(v), be(v)} {
			got, ok := groSegmentSize(unix.UDP_GRO, b)
			if !ok || got != int(v) {
				t.Fatalf("size %d as %x: got %d, %v", v, b, got, ok)
			}
		}
	}
	if _, ok := groSegmentSize(unix.UDP_SEGMENT, le(1200)); ok {
		t.Fatal("UDP_SEGMENT read as a GRO size")
	}
	if _, ok := groSegmentSize(unix.UDP_GRO, []byte{1, 2}); ok {
		t.Fatal("a short control message read as a GRO size")
	}
}
