package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/quivermq/quiver/core/transport"
)

// Migrator is a connection that can move to a new local address while
// keeping its session: QUIC connection migration
// (quictransport.Conn.Migrate). TCP and NATS connections do not
// implement it.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// migrators remembers the client's latest connection to each address that
// can migrate. A redial to an address replaces its entry, so the table is
// bounded by the number of addresses the client talks to.
type migrators struct {
	mu    sync.Mutex
	conns map[string]Migrator
}

func (m *migrators) track(addr string, conn transport.Conn) {
	mc, ok := conn.(Migrator)
	if !ok {
		return
	}
	m.mu.Lock()
	if m.conns == nil {
		m.conns = map[string]Migrator{}
	}
	m.conns[addr] = mc
	m.mu.Unlock()
}

// Migrate moves every open connection of the client that supports it (the
// QUIC ones: to brokers and name servers) to a new local UDP socket, bound
// to the address the kernel now routes each peer from: call it when the
// device changed networks (a new Wi-Fi or cellular address, a NAT
// rebinding). The connections keep their sessions: requests in flight are
// retransmitted on the new path and complete, nothing acknowledged is
// lost, and nothing is redialled. Each new path is validated with the
// server before traffic moves to it.
//
// It returns how many connections moved. Connections that closed in the
// meantime are skipped (the next request redials them); the errors of the
// others are joined. TCP and NATS connections are left alone: after an
// address change they break and are redialled on the next request.
func (c *Client) Migrate(ctx context.Context) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	c.migr.mu.Lock()
	addrs := make([]string, 0, len(c.migr.conns))
	conns := make([]Migrator, 0, len(c.migr.conns))
	for a, mc := range c.migr.conns {
		addrs, conns = append(addrs, a), append(conns, mc)
	}
	c.migr.mu.Unlock()
	var errs []error
	n := 0
	for i, mc := range conns {
		err := mc.Migrate(ctx)
		switch {
		case err == nil:
			n++
		case errors.Is(err, transport.ErrClosed):
			c.migr.mu.Lock()
			if c.migr.conns[addrs[i]] == mc {
				delete(c.migr.conns, addrs[i])
			}
			c.migr.mu.Unlock()
		default:
			errs = append(errs, fmt.Errorf("client: migrate connection to %s: %w", addrs[i], err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return n, errors.Join(errs...)
}
