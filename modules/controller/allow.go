package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/config"
)

// The raft port carries no credential (docs/SECURITY.md): raft's RPCs
// and the read-index questions are plain TCP. It accepts connections only
// from the controllers' own addresses — the hosts of namesrv.controller
// .peers (and listen), resolved — and from namesrv.controller.allow_from
// (IPs or CIDRs: controllers reached through NAT); any other connection
// is closed at accept, counted and logged.

// reresolveAfter is how long peers' resolved names are trusted before a
// refused connection resolves them again (a peer's name moved).
const reresolveAfter = 30 * time.Second

// allowList says which remote IPs may connect to the raft port.
type allowList struct {
	hosts []string // peers' hosts: names or IPs
	nets  []netip.Prefix
	log   *slog.Logger

	mu       sync.Mutex
	ips      map[netip.Addr]bool
	resolved time.Time

	refused atomic.Int64
}

// newAllowList builds the list of cfg: its peers' (or its own listen
// address's) hosts and allow_from.
func newAllowList(ctx context.Context, cfg *Config, log *slog.Logger) (*allowList, error) {
	a := &allowList{log: log, ips: map[netip.Addr]bool{}}
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = []string{cfg.Listen}
	}
	for _, p := range peers {
		h, _, err := net.SplitHostPort(p)
		if err != nil {
			return nil, fmt.Errorf("controller: peer %q: %w", p, err)
		}
		a.hosts = append(a.hosts, h)
	}
	for _, s := range cfg.AllowFrom {
		p, err := config.ParseIPPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("controller: allow_from: %w", err)
		}
		a.nets = append(a.nets, p)
	}
	a.resolve(ctx)
	return a, nil
}

// resolve looks the peers' hosts up (each within 2 s); a name that does
// not resolve is logged and tried again on a later refusal.
func (a *allowList) resolve(ctx context.Context) {
	ips := map[netip.Addr]bool{}
	for _, h := range a.hosts {
		if ip, err := netip.ParseAddr(h); err == nil {
			ips[ip.Unmap()] = true
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", h)
		cancel()
		if err != nil {
			a.log.Warn("controller: peer's name does not resolve: its connections are refused until it does", "host", h, "err", err)
			continue
		}
		for _, ip := range addrs {
			ips[ip.Unmap()] = true
		}
	}
	a.mu.Lock()
	a.ips, a.resolved = ips, time.Now()
	a.mu.Unlock()
}

// allows says whether a connection from addr may reach raft.
func (a *allowList) allows(addr net.Addr) bool {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	if a.match(ip) {
		return true
	}
	a.mu.Lock()
	stale := time.Since(a.resolved) > reresolveAfter
	a.mu.Unlock()
	if stale {
		a.resolve(context.Background())
		if a.match(ip) {
			return true
		}
	}
	if n := a.refused.Add(1); n&(n-1) == 0 { // the 1st, 2nd, 4th, ... refusal
		a.log.Warn("controller: raft connection refused: not from a peer (namesrv.controller.peers, allow_from)", "remote", addr.String(), "refused", n)
	}
	return false
}

func (a *allowList) match(ip netip.Addr) bool {
	for _, p := range a.nets {
		if p.Contains(ip) {
			return true
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ips[ip]
}
