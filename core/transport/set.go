package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Set is the group of enabled transports of a process: servers listen on
// all of them, clients dial by address scheme ("quic://host:port"; a plain
// "host:port" means tcp).
type Set struct {
	providers []Provider
	cfgs      map[string]any
	deps      Deps
}

// NewSet binds enabled providers to their decoded configs.
func NewSet(enabled []Provider, cfgs map[string]any, deps Deps) *Set {
	return &Set{providers: enabled, cfgs: cfgs, deps: deps}
}

// IDs lists the enabled transports in order.
func (s *Set) IDs() []string {
	out := make([]string, len(s.providers))
	for i, p := range s.providers {
		out[i] = p.ID()
	}
	return out
}

// Listen binds addr on every enabled transport. On error, listeners
// already bound are closed.
func (s *Set) Listen(ctx context.Context, addr string) ([]Listener, error) {
	var out []Listener
	for _, p := range s.providers {
		ln, err := p.Listen(ctx, addr, s.cfgs[p.ID()], s.deps)
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			return nil, fmt.Errorf("transport %s: listen %s: %w", p.ID(), addr, err)
		}
		out = append(out, ln)
	}
	if len(out) == 0 {
		return nil, errors.New("transport: no transport enabled")
	}
	return out, nil
}

// SplitScheme splits "quic://host:port" into "quic" and "host:port"; a
// plain address has scheme "tcp".
func SplitScheme(addr string) (scheme, hostport string) {
	if i := strings.Index(addr, "://"); i >= 0 {
		return addr[:i], addr[i+3:]
	}
	return "tcp", addr
}

// Dial connects to addr with the transport its scheme names.
func (s *Set) Dial(ctx context.Context, addr string) (Conn, error) {
	scheme, hp := SplitScheme(addr)
	for _, p := range s.providers {
		if p.ID() == scheme {
			return p.Dial(ctx, hp, s.cfgs[p.ID()], s.deps)
		}
	}
	return nil, fmt.Errorf("transport: no enabled transport %q for %s (enabled: %s)", scheme, addr, strings.Join(s.IDs(), ", "))
}
