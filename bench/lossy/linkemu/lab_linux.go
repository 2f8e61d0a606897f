package linkemu

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Lab is two network namespaces, A and B, joined by a veth pair, with a
// TUN device in each. A reaches B at AddrB and B reaches A at AddrA through
// the TUNs: the lab reads each packet from the sending side's TUN, applies
// that direction's impairment, carries it as a UDP datagram over the veth
// (the "wire") and writes it into the other side's TUN. TUN devices
// without IFF_VNET_HDR take no segmentation offload, so every packet the
// emulator sees is at most MTU bytes; the veth's offloads are turned off
// too (SIOCETHTOOL) where the kernel lets us.
type Lab struct {
	NsA, NsB string
	// AddrA and AddrB are the emulated link's addresses in A and B.
	AddrA, AddrB string
	// AddrA2 is a second address of A's TUN, routed back by B through
	// the emulated link too: a client in A that switches the route to
	// AddrB to this source (ip route replace AddrB dev <tun> src AddrA2)
	// changes its address as a device changing networks does.
	AddrA2 string

	log     *slog.Logger
	tunA    *os.File
	tunB    *os.File
	wireA   *net.UDPConn
	wireB   *net.UDPConn
	dirs    [2]*direction
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
}

const (
	labMTU  = 1400
	wireMTU = 1600
	// The emulated link's addresses and the veth's.
	addrA, addrB = "10.99.0.1", "10.99.0.2"
	addrA2       = "10.99.0.3"
	vethA, vethB = "10.98.0.1", "10.98.0.2"
	wirePort     = 7999
)

// Stats counts one direction's packets.
type Stats struct {
	Packets, Dropped, Delivered int64
}

// Available says why a lab cannot run here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("linkemu: needs root (network namespaces, TUN devices)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("linkemu: no TUN device: %w", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("linkemu: the ip command (iproute2) is missing: %w", err)
	}
	return nil
}

// Start creates the namespaces (named prefix+"a" and prefix+"b"), the veth
// pair and the TUNs, and forwards packets with profile p's impairments
// (seeded with seed) until Close, which removes everything.
func Start(ctx context.Context, prefix string, p Profile, seed uint64, log *slog.Logger) (l *Lab, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l = &Lab{NsA: prefix + "a", NsB: prefix + "b", AddrA: addrA, AddrB: addrB, AddrA2: addrA2, log: log}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	// Leftovers of a crashed run with the same prefix.
	_ = ipCmd(ctx, "netns", "del", l.NsA)
	_ = ipCmd(ctx, "netns", "del", l.NsB)
	va, vb := prefix+"va", prefix+"vb"
	for _, args := range [][]string{
		{"netns", "add", l.NsA},
		{"netns", "add", l.NsB},
		{"link", "add", va, "mtu", fmt.Sprint(wireMTU), "netns", l.NsA, "type", "veth", "peer", "name", vb, "mtu", fmt.Sprint(wireMTU), "netns", l.NsB},
		{"-n", l.NsA, "link", "set", "lo", "up"},
		{"-n", l.NsB, "link", "set", "lo", "up"},
		{"-n", l.NsA, "addr", "add", vethA + "/30", "dev", va},
		{"-n", l.NsB, "addr", "add", vethB + "/30", "dev", vb},
		{"-n", l.NsA, "link", "set", va, "up"},
		{"-n", l.NsB, "link", "set", vb, "up"},
	} {
		if err := ipCmd(ctx, args...); err != nil {
			return nil, err
		}
	}
	ta, tb := prefix+"ta", prefix+"tb"
	if err := inNetns(l.NsA, func() error {
		offloadsOff(va, log)
		var err error
		if l.tunA, err = openTUN(ta); err != nil {
			return err
		}
		l.wireA, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(vethA), Port: wirePort})
		return err
	}); err != nil {
		return nil, err
	}
	if err := inNetns(l.NsB, func() error {
		offloadsOff(vb, log)
		var err error
		if l.tunB, err = openTUN(tb); err != nil {
			return err
		}
		l.wireB, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(vethB), Port: wirePort})
		return err
	}); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"-n", l.NsA, "link", "set", ta, "mtu", fmt.Sprint(labMTU), "up"},
		{"-n", l.NsB, "link", "set", tb, "mtu", fmt.Sprint(labMTU), "up"},
		{"-n", l.NsA, "addr", "add", addrA, "peer", addrB, "dev", ta},
		{"-n", l.NsB, "addr", "add", addrB, "peer", addrA, "dev", tb},
		{"-n", l.NsA, "addr", "add", addrA2 + "/32", "dev", ta},
		{"-n", l.NsB, "route", "add", addrA2 + "/32", "dev", tb},
	} {
		if err := ipCmd(ctx, args...); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.dirs[0] = newDirection(NewImpairer(p.AtoB, seed), l.wireA, &net.UDPAddr{IP: net.ParseIP(vethB), Port: wirePort})
	l.dirs[1] = newDirection(NewImpairer(p.BtoA, seed+1), l.wireB, &net.UDPAddr{IP: net.ParseIP(vethA), Port: wirePort})
	for _, g := range []func(){
		func() { l.dirs[0].readTUN(l.tunA) },
		func() { l.dirs[1].readTUN(l.tunB) },
		func() { l.dirs[0].send(rctx) },
		func() { l.dirs[1].send(rctx) },
		func() { deliver(l.wireB, l.tunB, &l.dirs[0].delivered) },
		func() { deliver(l.wireA, l.tunA, &l.dirs[1].delivered) },
	} {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); g() }()
	}
	log.Info("linkemu: lab up", "profile", p.Name, "ns_a", l.NsA, "ns_b", l.NsB, "addr_a", addrA, "addr_b", addrB)
	return l, nil
}

// Stats returns the counts of A→B and B→A.
func (l *Lab) Stats() (atob, btoa Stats) {
	return l.dirs[0].stats(), l.dirs[1].stats()
}

// Close stops forwarding and removes the namespaces (and with them the
// veth pair and the TUNs).
func (l *Lab) Close() error {
	l.closeMu.Do(func() {
		if l.cancel != nil {
			l.cancel()
		}
		for _, c := range []interface{ Close() error }{l.tunA, l.tunB, l.wireA, l.wireB} {
			if c != nil && !isNil(c) {
				c.Close()
			}
		}
		l.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ipCmd(ctx, "netns", "del", l.NsA)
		_ = ipCmd(ctx, "netns", "del", l.NsB)
	})
	return nil
}

func isNil(c any) bool {
	switch v := c.(type) {
	case *os.File:
		return v == nil
	case *net.UDPConn:
		return v == nil
	}
	return false
}

// InA runs fn on an OS thread inside namespace A: sockets it creates
// belong to A.
func (l *Lab) InA(fn func() error) error { return inNetns(l.NsA, fn) }

// InB is InA for namespace B.
func (l *Lab) InB(fn func() error) error { return inNetns(l.NsB, fn) }

// Command returns cmd (an argv) to run inside namespace ns.
func Command(ctx context.Context, ns string, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
}

func ipCmd(ctx context.Context, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("linkemu: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// inNetns runs fn with the calling goroutine locked to a thread switched
// into network namespace ns. The thread switches back afterwards; if that
// fails it stays locked and so dies with the goroutine.
func inNetns(ns string, fn func() error) error {
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return fmt.Errorf("linkemu: netns %s: %w", ns, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("linkemu: own netns: %w", err)
	}
	defer self.Close()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("linkemu: enter netns %s: %w", ns, err)
	}
	ferr := fn()
	if err := setns(self); err != nil {
		return fmt.Errorf("linkemu: leave netns %s: %w", ns, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// openTUN creates TUN device name (IFF_TUN|IFF_NO_PI: raw IP packets, no
// offload header) in the current namespace, non-blocking so that Close
// interrupts a read.
func openTUN(name string) (*os.File, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("linkemu: open /dev/net/tun: %w", err)
	}
	var ifr [40]byte
	copy(ifr[:16], name)
	*(*uint16)(unsafe.Pointer(&ifr[16])) = syscall.IFF_TUN | syscall.IFF_NO_PI
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TUNSETIFF, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("linkemu: TUNSETIFF %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}

// offloadsOff turns off checksum, scatter-gather, TSO, GSO and GRO on dev
// with the legacy SIOCETHTOOL commands (ethtool is not installed); what the
// kernel refuses is logged and left.
func offloadsOff(dev string, log *slog.Logger) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		log.Warn("linkemu: offloads left on", "dev", dev, "err", err)
		return
	}
	defer syscall.Close(fd)
	const siocethtool = 0x8946
	for _, c := range []struct {
		name string
		cmd  uint32
	}{{"tx-checksum", 0x17}, {"scatter-gather", 0x19}, {"tso", 0x1f}, {"gso", 0x24}, {"gro", 0x2c}, {"rx-checksum", 0x15}} {
		ev := struct{ cmd, data uint32 }{c.cmd, 0}
		var ifr [40]byte
		copy(ifr[:16], dev)
		*(*uintptr)(unsafe.Pointer(&ifr[16])) = uintptr(unsafe.Pointer(&ev))
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), siocethtool, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
			log.Debug("linkemu: offload not turned off", "dev", dev, "offload", c.name, "err", e)
		}
		runtime.KeepAlive(&ev)
	}
}

// direction is one way through the emulator: packets read from the
// sending side's TUN wait in a heap until their release time, then go
// over the wire.
type direction struct {
	m    *Impairer
	wire *net.UDPConn
	to   *net.UDPAddr

	mu   sync.Mutex
	q    pktHeap
	seq  uint64
	kick chan struct{}

	packets, dropped, delivered atomic.Int64
}

type pkt struct {
	at  time.Time
	seq uint64
	b   []byte
}

type pktHeap []pkt

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h pktHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pktHeap) Push(x any)   { *h = append(*h, x.(pkt)) }
func (h *pktHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newDirection(m *Impairer, wire *net.UDPConn, to *net.UDPAddr) *direction {
	return &direction{m: m, wire: wire, to: to, kick: make(chan struct{}, 1)}
}

func (d *direction) stats() Stats {
	return Stats{Packets: d.packets.Load(), Dropped: d.dropped.Load(), Delivered: d.delivered.Load()}
}

// readTUN takes packets until the TUN is closed.
func (d *direction) readTUN(tun *os.File) {
	buf := make([]byte, 65536)
	for {
		n, err := tun.Read(buf)
		if err != nil {
			return
		}
		d.packets.Add(1)
		d.mu.Lock()
		at, drop := d.m.Next(time.Now(), n)
		if drop {
			d.mu.Unlock()
			d.dropped.Add(1)
			continue
		}
		d.seq++
		heap.Push(&d.q, pkt{at: at, seq: d.seq, b: bytes.Clone(buf[:n])})
		first := d.q[0].seq == d.seq
		d.mu.Unlock()
		if first {
			select {
			case d.kick <- struct{}{}:
			default:
			}
		}
	}
}

// send releases packets on time until ctx ends.
func (d *direction) send(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		var due []pkt
		now := time.Now()
		for len(d.q) > 0 && !d.q[0].at.After(now) {
			due = append(due, heap.Pop(&d.q).(pkt))
			d.m.Done()
		}
		wait := time.Hour
		if len(d.q) > 0 {
			wait = d.q[0].at.Sub(now)
		}
		d.mu.Unlock()
		for _, p := range due {
			d.wire.WriteToUDP(p.b, d.to) //nolint:errcheck // the emulated link drops what cannot be sent, as a link would
		}
		if len(due) > 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-timer.C:
		}
	}
}

// deliver writes datagrams arriving on the wire into the receiving side's
// TUN until the wire is closed.
func deliver(wire *net.UDPConn, tun *os.File, n *atomic.Int64) {
	buf := make([]byte, 65536)
	for {
		k, _, err := wire.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if _, err := tun.Write(buf[:k]); err == nil {
			n.Add(1)
		}
	}
}
