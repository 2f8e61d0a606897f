// Package netlimit bounds the sockets Quiver serves besides remoting
// (which bounds its own, core/remoting): connections in all and per
// remote IP for any listener, and for HTTP servers (metrics, console)
// the timeouts and request sizes a production server needs. Each limit
// and its default is a row of docs/SECURITY.md.
package netlimit

import (
	"log/slog"
	"net"
	"sync"
)

// Listener closes, as soon as they are accepted, the connections beyond
// max in all or perIP from one remote IP (0: no bound), as the remoting
// server does; the others are counted until they close.
type Listener struct {
	net.Listener
	max, perIP int
	what       string // the server's name, in the refusal's log line
	log        *slog.Logger

	mu      sync.Mutex
	open    int
	perHost map[string]int
	refused int64
}

// NewListener bounds ln's connections; what names the server in logs.
func NewListener(ln net.Listener, max, perIP int, what string, log *slog.Logger) *Listener {
	return &Listener{Listener: ln, max: max, perIP: perIP, what: what, log: log, perHost: map[string]int{}}
}

// Accept returns the next connection within the limits.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := RemoteIP(c.RemoteAddr())
		l.mu.Lock()
		if (l.max > 0 && l.open >= l.max) || (l.perIP > 0 && l.perHost[host] >= l.perIP) {
			l.refused++
			n := l.refused
			l.mu.Unlock()
			_ = c.Close()
			if n&(n-1) == 0 { // the 1st, 2nd, 4th, ... refusal
				l.log.Warn(l.what+": connection refused: limit reached", "remote", c.RemoteAddr(), "max_connections", l.max, "max_connections_per_ip", l.perIP, "refused", n)
			}
			continue
		}
		l.open++
		l.perHost[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, l: l, host: host}, nil
	}
}

func (l *Listener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perHost[host]--; l.perHost[host] <= 0 {
		delete(l.perHost, host)
	}
}

// Counts are the open connections and those refused so far.
func (l *Listener) Counts() (open int, refused int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.refused
}

// RemoteIP is the IP of a remote address, as connections are counted.
func RemoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// countedConn gives its slot back on its first Close.
type countedConn struct {
	net.Conn
	l    *Listener
	host string
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}
