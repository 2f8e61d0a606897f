package grpc

import (
	"log/slog"
	"net"
	"sync"
)

// limitListener closes, as soon as they are accepted, the connections
// beyond max in all or perIP from one remote IP (0: no bound), as the
// remoting server does; the others are counted until they close.
type limitListener struct {
	net.Listener
	max, perIP int
	log        *slog.Logger

	mu      sync.Mutex
	open    int
	perHost map[string]int
	refused int64
}

func newLimitListener(ln net.Listener, max, perIP int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: max, perIP: perIP, log: log, perHost: map[string]int{}}
}

// Accept returns the next connection within the limits.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteIP(c.RemoteAddr())
		l.mu.Lock()
		if (l.max > 0 && l.open >= l.max) || (l.perIP > 0 && l.perHost[host] >= l.perIP) {
			l.refused++
			n := l.refused
			l.mu.Unlock()
			_ = c.Close()
			if n&(n-1) == 0 { // the 1st, 2nd, 4th, ... refusal
				l.log.Warn("grpc: connection refused: limit reached", "remote", c.RemoteAddr(), "max_connections", l.max, "max_connections_per_ip", l.perIP, "refused", n)
			}
			continue
		}
		l.open++
		l.perHost[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, l: l, host: host}, nil
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perHost[host]--; l.perHost[host] <= 0 {
		delete(l.perHost, host)
	}
}

// counts are the open connections and those refused so far.
func (l *limitListener) counts() (open int, refused int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.refused
}

func remoteIP(a net.Addr) string {
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
	l    *limitListener
	host string
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}
