package acl

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// addrMatcher reports whether a client IP matches a white-list entry.
type addrMatcher func(netip.Addr) bool

func matchNone(netip.Addr) bool { return false }
func matchAll(netip.Addr) bool  { return true }

// remoteIP extracts the client IP from a remote address: "host:port",
// "[v6]:port" or a bare IP. IPv4-mapped IPv6 addresses become IPv4 and
// zones are dropped, so "[::ffff:10.0.0.1]:5" matches "10.0.0.*". An
// address that is not an IP (another transport's naming) matches no entry.
func remoteIP(remote string) (netip.Addr, bool) {
	host := strings.TrimPrefix(remote, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// compileAddrs compiles a list of white-list entries into one matcher that
// accepts an IP matching any of them.
func compileAddrs(pats []string) (addrMatcher, error) {
	var ms []addrMatcher
	for _, p := range pats {
		m, err := compileAddr(p)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return anyOf(ms), nil
}

func anyOf(ms []addrMatcher) addrMatcher {
	switch len(ms) {
	case 0:
		return matchNone
	case 1:
		return ms[0]
	}
	return func(a netip.Addr) bool {
		for _, m := range ms {
			if m(a) {
				return true
			}
		}
		return false
	}
}

// compileAddr compiles one white-list entry. The forms are RocketMQ's
// (RemoteAddressStrategyFactory) plus CIDR:
//
//	""                       matches nothing (a blank entry)
//	*  *.*.*.*  *:*:*:*:*:*:*:*  matches everything
//	192.168.0.1  ::1         one address (IPv6 in any notation)
//	192.168.0.{1,2}          the listed last parts (IPv4 or IPv6)
//	a, b, c                  any of the comma-separated entries
//	192.168.1.*  10.*.1-5.*  per-part wildcard and ranges
//	fe80::*  2001:db8:0-ff::*  the same per IPv6 group (hex)
//	10.0.0.0/8  2001:db8::/32  CIDR
//
// Ranges are checked per part. Java's RangeRemoteAddressStrategy only
// checks the first wildcard or range part and ignores the parts after it
// (so Java's 10.*.1-5.* matches 10.9.9.9); Quiver checks every part, which
// is stricter. Java accepts only plain addresses inside a comma list;
// Quiver accepts any form there.
func compileAddr(p string) (addrMatcher, error) {
	s := strings.TrimSpace(p)
	switch {
	case s == "":
		return matchNone, nil
	case s == "*" || s == "*.*.*.*" || s == "*:*:*:*:*:*:*:*":
		return matchAll, nil
	case strings.HasSuffix(s, "}"):
		return compileBraces(s)
	case strings.Contains(s, ","):
		var ms []addrMatcher
		for _, part := range strings.Split(s, ",") {
			if strings.TrimSpace(part) == "" {
				return nil, fmt.Errorf("address %q: empty entry in a comma list", s)
			}
			m, err := compileAddr(part)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		return anyOf(ms), nil
	case strings.Contains(s, "/"):
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("address %q: bad CIDR: %w", s, err)
		}
		pfx = pfx.Masked()
		if pfx.Addr().Is4In6() {
			return nil, fmt.Errorf("address %q: use the IPv4 form of an IPv4-mapped prefix", s)
		}
		return func(a netip.Addr) bool { return pfx.Contains(a) }, nil
	case strings.ContainsAny(s, "*-"):
		if strings.Contains(s, ":") {
			return compileRange6(s)
		}
		return compileRange4(s)
	}
	return compileExact(s)
}

func compileExact(s string) (addrMatcher, error) {
	want, err := netip.ParseAddr(s)
	if err != nil {
		return nil, fmt.Errorf("address %q is not an IP address or a RocketMQ address pattern", s)
	}
	want = want.Unmap().WithZone("")
	return func(a netip.Addr) bool { return a == want }, nil
}

// compileBraces handles 192.168.0.{1,2} and 2001:db8::{1,2}: the braces
// must hold the last part.
func compileBraces(s string) (addrMatcher, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 || strings.Count(s, "{") != 1 || strings.Count(s, "}") != 1 {
		return nil, fmt.Errorf("address %q: braces must hold the last part, as in 192.168.0.{1,2}", s)
	}
	prefix, inner := s[:open], s[open+1:len(s)-1]
	if prefix == "" || (!strings.HasSuffix(prefix, ".") && !strings.HasSuffix(prefix, ":")) {
		return nil, fmt.Errorf("address %q: braces must hold the last part, as in 192.168.0.{1,2}", s)
	}
	var ms []addrMatcher
	for _, alt := range strings.Split(inner, ",") {
		alt = strings.TrimSpace(alt)
		if alt == "" {
			return nil, fmt.Errorf("address %q: empty entry in braces", s)
		}
		m, err := compileExact(prefix + alt)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return anyOf(ms), nil
}

type span struct{ lo, hi uint32 }

func parseSpan(part string, base int, max uint32, maxDigits int) (span, error) {
	part = strings.TrimSpace(part)
	if part == "*" {
		return span{0, max}, nil
	}
	num := func(s string) (uint32, error) {
		if s == "" || len(s) > maxDigits {
			return 0, fmt.Errorf("bad number %q", s)
		}
		digits := "0123456789"
		if base == 16 {
			digits = "0123456789abcdefABCDEF"
		}
		for _, c := range s {
			if !strings.ContainsRune(digits, c) {
				return 0, fmt.Errorf("bad number %q", s)
			}
		}
		n, err := strconv.ParseUint(s, base, 32)
		if err != nil || uint32(n) > max {
			return 0, fmt.Errorf("bad number %q", s)
		}
		return uint32(n), nil
	}
	if lo, hi, ok := strings.Cut(part, "-"); ok {
		a, err := num(strings.TrimSpace(lo))
		if err != nil {
			return span{}, err
		}
		b, err := num(strings.TrimSpace(hi))
		if err != nil {
			return span{}, err
		}
		if a > b {
			return span{}, fmt.Errorf("range %q runs backwards", part)
		}
		return span{a, b}, nil
	}
	n, err := num(part)
	if err != nil {
		return span{}, err
	}
	return span{n, n}, nil
}

func compileRange4(s string) (addrMatcher, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil, fmt.Errorf("address %q: an IPv4 pattern has four parts", s)
	}
	var spans [4]span
	for i, p := range parts {
		sp, err := parseSpan(p, 10, 255, 3)
		if err != nil {
			return nil, fmt.Errorf("address %q: part %d: %w", s, i+1, err)
		}
		spans[i] = sp
	}
	return func(a netip.Addr) bool {
		if !a.Is4() {
			return false
		}
		b := a.As4()
		for i, sp := range spans {
			if v := uint32(b[i]); v < sp.lo || v > sp.hi {
				return false
			}
		}
		return true
	}, nil
}

func compileRange6(s string) (addrMatcher, error) {
	var groups []string
	if left, right, ok := strings.Cut(s, "::"); ok {
		if strings.Contains(right, "::") {
			return nil, fmt.Errorf("address %q: \"::\" appears twice", s)
		}
		var l, r []string
		if left != "" {
			l = strings.Split(left, ":")
		}
		if right != "" {
			r = strings.Split(right, ":")
		}
		fill := 8 - len(l) - len(r)
		if fill < 1 {
			return nil, fmt.Errorf("address %q: too many groups for \"::\"", s)
		}
		groups = append(groups, l...)
		for ; fill > 0; fill-- {
			groups = append(groups, "0")
		}
		groups = append(groups, r...)
	} else {
		groups = strings.Split(s, ":")
		// fe80:1:*  — a trailing * stands for the remaining groups.
		for len(groups) < 8 && groups[len(groups)-1] == "*" {
			groups = append(groups, "*")
		}
	}
	if len(groups) != 8 {
		return nil, fmt.Errorf("address %q: an IPv6 pattern has eight groups", s)
	}
	var spans [8]span
	for i, g := range groups {
		sp, err := parseSpan(g, 16, 0xffff, 4)
		if err != nil {
			return nil, fmt.Errorf("address %q: group %d: %w", s, i+1, err)
		}
		spans[i] = sp
	}
	return func(a netip.Addr) bool {
		if !a.Is6() {
			return false
		}
		b := a.As16()
		for i, sp := range spans {
			if v := uint32(b[2*i])<<8 | uint32(b[2*i+1]); v < sp.lo || v > sp.hi {
				return false
			}
		}
		return true
	}, nil
}
