//go:build linux

package lossy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// labCounters reads, around each cell of TestLabWorkloads, the packet
// counters that tell the link's losses from the endpoints' own:
//
//   - the client's QUIC connections' quic-go ConnectionStats (packets
//     sent, received, and declared lost: ours the peer never acknowledged,
//     whether the link or the broker's receive path dropped them);
//   - the TUN devices' packet counts in A and B: A's TUN transmitted minus
//     B's received is what the emulator dropped from A to B (its
//     impairment, or a full queue), and the reverse for B to A;
//   - the kernel's UDP receive-buffer drops (RcvbufErrors of
//     /proc/net/snmp) in A and in B: datagrams a QUIC endpoint too slow
//     to read (CPU starvation) lost before quic-go saw them.
//
// A counter it cannot read is reported as -1.
type labCounters struct {
	t     *testing.T
	nsB   string
	tunA  string
	tunB  string
	noTUN bool
}

func newLabCounters(t *testing.T, nsB, addrA string) *labCounters {
	lc := &labCounters{t: t, nsB: nsB}
	ifs, err := net.Interfaces()
	if err == nil {
		for _, ifc := range ifs {
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.String() == addrA {
					lc.tunA = ifc.Name
				}
			}
		}
	}
	if base, ok := strings.CutSuffix(lc.tunA, "ta"); ok {
		lc.tunB = base + "tb" // linkemu's names: <prefix>ta, <prefix>tb
	} else {
		lc.noTUN = true
		t.Logf("lab counters: no TUN with %s in namespace A (%v); link drops not reported", addrA, err)
	}
	return lc
}

type cellCounters struct {
	quicSent, quicRecv, quicLost   int64
	tunATx, tunARx, tunBTx, tunBRx int64
	rcvbufA, rcvbufB               int64
}

func (lc *labCounters) read(r *rig) cellCounters {
	var c cellCounters
	s, rv, l := r.quicStats()
	c.quicSent, c.quicRecv, c.quicLost = int64(s), int64(rv), int64(l)
	c.rcvbufA = udpRcvbufErrors(readFileOr("/proc/net/snmp"))
	c.tunATx, c.tunARx, c.tunBTx, c.tunBRx = -1, -1, -1, -1
	if !lc.noTUN {
		c.tunATx = atoiOr(readFileOr("/sys/class/net/" + lc.tunA + "/statistics/tx_packets"))
		c.tunARx = atoiOr(readFileOr("/sys/class/net/" + lc.tunA + "/statistics/rx_packets"))
	}
	// Namespace B: `ip netns exec` mounts B's sysfs and shows B's
	// /proc/net.
	script := "cat /proc/net/snmp"
	if !lc.noTUN {
		script += "; echo TUN; cat /sys/class/net/" + lc.tunB + "/statistics/tx_packets /sys/class/net/" + lc.tunB + "/statistics/rx_packets"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lc.nsB, "sh", "-c", script).Output()
	if err != nil {
		lc.t.Logf("lab counters of namespace %s: %v", lc.nsB, err)
		c.rcvbufB = -1
		return c
	}
	snmp, tun, _ := strings.Cut(string(out), "TUN\n")
	c.rcvbufB = udpRcvbufErrors(snmp)
	if f := strings.Fields(tun); len(f) == 2 {
		c.tunBTx, c.tunBRx = atoiOr(f[0]), atoiOr(f[1])
	}
	return c
}

// sub is c − before; a counter unknown in either is -1.
func (c cellCounters) sub(before cellCounters) cellCounters {
	d := func(a, b int64) int64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a - b
	}
	return cellCounters{
		quicSent: d(c.quicSent, before.quicSent), quicRecv: d(c.quicRecv, before.quicRecv), quicLost: d(c.quicLost, before.quicLost),
		tunATx: d(c.tunATx, before.tunATx), tunARx: d(c.tunARx, before.tunARx),
		tunBTx: d(c.tunBTx, before.tunBTx), tunBRx: d(c.tunBRx, before.tunBRx),
		rcvbufA: d(c.rcvbufA, before.rcvbufA), rcvbufB: d(c.rcvbufB, before.rcvbufB),
	}
}

// String is the LAB line's counter fields (of a difference).
func (c cellCounters) String() string {
	drop := func(tx, rx int64) int64 {
		if tx < 0 || rx < 0 {
			return -1
		}
		return tx - rx
	}
	return fmt.Sprintf("quic_sent=%d quic_recv=%d quic_lost=%d link_ab=%d link_drop_ab=%d link_ba=%d link_drop_ba=%d rcvbuf_a=%d rcvbuf_b=%d",
		c.quicSent, c.quicRecv, c.quicLost, c.tunATx, drop(c.tunATx, c.tunBRx), c.tunBTx, drop(c.tunBTx, c.tunARx), c.rcvbufA, c.rcvbufB)
}

// routeSource makes src the source address of A's route to dst (through
// the lab's TUN): new sockets towards dst bind to src.
func (lc *labCounters) routeSource(dst, src string) error {
	if lc.noTUN {
		return fmt.Errorf("lab: no TUN device known in namespace A")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", "route", "replace", dst+"/32", "dev", lc.tunA, "src", src)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("lab: ip route replace %s src %s: %w: %s", dst, src, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func readFileOr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

func atoiOr(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// udpRcvbufErrors is the Udp RcvbufErrors counter of a /proc/net/snmp
// text, or -1.
func udpRcvbufErrors(snmp string) int64 {
	var names []string
	for _, line := range strings.Split(snmp, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i+1 < len(f) {
				return atoiOr(f[i+1])
			}
		}
		return -1
	}
	return -1
}
