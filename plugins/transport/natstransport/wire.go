package natstransport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Message kinds: the first payload byte of every message (readable
// letters, so `nats sub 'quiver.>'` output can be followed).
const (
	kindFrame   byte = 'F' // a whole frame
	kindFirst   byte = 'S' // the first piece of a split frame: total length (4 bytes), data
	kindMore    byte = 'M' // a further piece of a split frame
	kindPing    byte = 'P' // keep-alive
	kindClose   byte = 'X' // goodbye; optional reason text
	kindConnect byte = 'C' // to a listener subject: version, the dialer's address
	kindAccept  byte = 'A' // answer to a connect: version, the listener's address
	kindRefuse  byte = 'R' // answer to a connect: reason text
	kindProbe   byte = 'Q' // to a listener subject: is anyone listening? (answered with kindAccept)
)

// version is the wire version carried by connect and accept.
const version byte = 1

// headerLen is the kind byte and the 4-byte sequence number that start
// every message.
const headerLen = 5

// firstLen is the header of a split frame's first piece: header and total
// length.
const firstLen = headerLen + 4

// putHeader writes kind and seq at the start of b.
func putHeader(b []byte, kind byte, seq uint32) {
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:], seq)
}

// control builds a message without frame data.
func control(kind byte, seq uint32, text string) []byte {
	b := make([]byte, headerLen, headerLen+len(text))
	putHeader(b, kind, seq)
	return append(b, text...)
}

// parseHeader splits a message into kind, sequence number and rest.
func parseHeader(b []byte) (kind byte, seq uint32, rest []byte, err error) {
	if len(b) < headerLen {
		return 0, 0, nil, fmt.Errorf("natstransport: message of %d bytes has no header", len(b))
	}
	return b[0], binary.BigEndian.Uint32(b[1:]), b[headerLen:], nil
}

// Subjects.

// checkSubject accepts a subject (or subject prefix) made of non-empty
// tokens without wildcards or whitespace.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("%q has an empty token", s)
		}
		if tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("%q contains a wildcard or whitespace", s)
		}
	}
	return nil
}

// hostToken maps a host to one subject token: IP literals in canonical
// form, names lower-cased, with '.' and ':' (and anything else a token
// cannot hold) replaced by '_'.
func hostToken(host string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().WithZone("").String()
	} else {
		host = strings.ToLower(host)
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', ':', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, host)
}

// address is a listen or dial address understood: either host:port or a
// name used verbatim as the subject tail.
type address struct {
	host string // "" for a name
	port int
	name string
}

// parseAddress splits addr into host and port, or takes it as a name when
// it has no port.
func parseAddress(addr string) (address, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Contains(addr, ":") {
			return address{}, fmt.Errorf("natstransport: address %q: %w", addr, err)
		}
		if err := checkSubject(addr); err != nil {
			return address{}, fmt.Errorf("natstransport: address %q is neither host:port nor a subject name: %w", addr, err)
		}
		return address{name: addr}, nil
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return address{}, fmt.Errorf("natstransport: address %q: bad port %q", addr, port)
	}
	if strings.ContainsAny(host, " \t\r\n") {
		return address{}, fmt.Errorf("natstransport: address %q: bad host", addr)
	}
	return address{host: host, port: p}, nil
}

func (a address) isName() bool { return a.name != "" }

// unspecified reports a host that means every local address (as for TCP).
func (a address) unspecified() bool {
	if a.isName() {
		return false
	}
	if a.host == "" {
		return true
	}
	ip, err := netip.ParseAddr(a.host)
	return err == nil && ip.IsUnspecified()
}

// String is the address as Addr reports it.
func (a address) String() string {
	if a.isName() {
		return a.name
	}
	return net.JoinHostPort(a.host, strconv.Itoa(a.port))
}

// subject is the listener subject of a for prefix.
func (a address) subject(prefix string) string {
	if a.isName() {
		return prefix + "." + a.name
	}
	return prefix + "." + hostToken(a.host) + "." + strconv.Itoa(a.port)
}

// listenSubjects are the subjects a listener on a subscribes to: one, or
// for an unspecified host one per local interface address plus loopback,
// as a TCP listener on 0.0.0.0 accepts connections to any of them.
func (a address) listenSubjects(prefix string) []string {
	if !a.unspecified() {
		return []string{a.subject(prefix)}
	}
	seen := map[string]bool{}
	var out []string
	add := func(host string) {
		s := address{host: host, port: a.port}.subject(prefix)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add("127.0.0.1")
	add("::1")
	add("localhost")
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range addrs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil {
				add(p.Addr().String())
			}
		}
	}
	return out
}

// dialAddress is what a dialer for an unspecified host reaches, like a TCP
// dial to 0.0.0.0: the loopback address.
func (a address) dialAddress() address {
	if a.unspecified() {
		return address{host: "127.0.0.1", port: a.port}
	}
	return a
}
