package config

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
)

// AddrTag is the struct tag that marks a string or []string field as
// network addresses, so Decode checks them with one rule whatever the
// section: `addr:"dial"` for addresses Quiver connects to (host:port,
// port 1-65535: name servers, a master, peers) and `addr:"listen"` for
// addresses it binds (host may be empty, port 0-65535, 0 picking one).
// Either may carry a transport scheme (quic://host:port). An empty value
// is not checked (the section's Validate says whether it must be set).
const AddrTag = "addr"

// Address kinds (AddrTag values).
const (
	AddrDial   = "dial"
	AddrListen = "listen"
)

// AddrErrors is what Decode returns when every key decoded but some
// addresses are bad: out is filled, so a section's NewConfigFrom may still
// validate the rest and report every problem at once.
type AddrErrors struct{ Errors }

// Unwrap returns the problems.
func (e *AddrErrors) Unwrap() []error { return e.Errors }

// CheckAddr checks one address of kind AddrDial or AddrListen.
func CheckAddr(s, kind string) error {
	hp := s
	if i := strings.Index(hp, "://"); i >= 0 {
		hp = hp[i+3:]
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("%q is not host:port", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("%q: port %q is not a number", s, port)
	}
	lo := 1
	if kind == AddrListen {
		lo = 0
	}
	if n < lo || n > 65535 {
		return fmt.Errorf("%q: port %d is outside %d-65535", s, n, lo)
	}
	if kind != AddrListen && host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	return nil
}

// ParseIPPrefix reads an IP or a CIDR block as a prefix: an IP is the
// prefix of its full length, a CIDR's host bits are cleared, and an
// IPv4-mapped IPv6 address is its IPv4 address (as a peer's address is
// after Unmap).
func ParseIPPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		return p.Masked(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP nor a CIDR", s)
	}
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

// checkAddrFields checks every field of v (a struct, or a pointer to
// one, decoded from the section at path) that carries AddrTag, and the
// structs below it.
func checkAddrFields(path string, v reflect.Value, errs *Errors) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		key := path
		if name != "" {
			key = joinKey(path, name)
		} else if !f.Anonymous {
			key = joinKey(path, strings.ToLower(f.Name))
		}
		fv := v.Field(i)
		kind := f.Tag.Get(AddrTag)
		if kind == "" {
			checkAddrFields(key, fv, errs)
			continue
		}
		if kind != AddrDial && kind != AddrListen {
			panic(fmt.Sprintf("config: field %s.%s: addr tag %q is neither %q nor %q", t, f.Name, kind, AddrDial, AddrListen))
		}
		switch {
		case fv.Kind() == reflect.String:
			if s := fv.String(); s != "" {
				if err := CheckAddr(s, kind); err != nil {
					errs.Add(key, "%v", err)
				}
			}
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			for j := range fv.Len() {
				if err := CheckAddr(fv.Index(j).String(), kind); err != nil {
					errs.Add(key, "%v", err)
				}
			}
		default:
			panic(fmt.Sprintf("config: field %s.%s: addr tag on a %s (want string or []string)", t, f.Name, fv.Type()))
		}
	}
}
