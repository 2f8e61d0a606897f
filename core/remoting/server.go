package remoting

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/transport"
)

// ServerOptions tune a Server.
type ServerOptions struct {
	Peer PeerOptions
	// MaxConns bounds open connections in all; MaxConnsPerHost bounds them
	// per remote IP. Connections beyond either are closed at once. 0 means
	// no bound.
	MaxConns        int
	MaxConnsPerHost int
	// OnConnect and OnDisconnect observe connections (client tables).
	OnConnect    func(*Peer)
	OnDisconnect func(*Peer)
}

// Server accepts connections on any number of listeners and serves each
// with a Peer bound to one Handler.
type Server struct {
	handler Handler
	log     *slog.Logger
	opts    ServerOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	listeners []transport.Listener
	peers     map[*Peer]struct{}
	perHost   map[string]int
	refused   int64
}

// NewServer returns a server that answers with h.
func NewServer(h Handler, log *slog.Logger, opts ServerOptions) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{handler: h, log: log, opts: opts, ctx: ctx, cancel: cancel, peers: map[*Peer]struct{}{}, perHost: map[string]int{}}
}

// Serve starts accepting on ln in the background. The server owns ln.
// Serve on a closed server closes ln.
func (s *Server) Serve(ln transport.Listener) {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		ln.Close()
		return
	}
	s.listeners = append(s.listeners, ln)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		var delay time.Duration
		for {
			conn, err := ln.Accept(s.ctx)
			if err != nil {
				if s.ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
					return
				}
				// Back off like net/http, so a lasting error (EMFILE) does
				// not spin the loop and flood the log.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", "addr", ln.Addr(), "err", err, "retry_in", delay)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-s.ctx.Done():
					t.Stop()
					return
				}
				continue
			}
			delay = 0
			s.servePeer(conn)
		}
	}()
}

func (s *Server) servePeer(conn transport.Conn) {
	p := NewPeer(conn, s.handler, s.log, s.opts.Peer)
	host := remoteHost(conn.RemoteAddr())
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		conn.Close()
		return
	}
	if (s.opts.MaxConns > 0 && len(s.peers) >= s.opts.MaxConns) || (s.opts.MaxConnsPerHost > 0 && s.perHost[host] >= s.opts.MaxConnsPerHost) {
		s.refused++
		n := s.refused
		s.mu.Unlock()
		conn.Close()
		if n&(n-1) == 0 { // log the 1st, 2nd, 4th, ... refusal
			s.log.Warn("connection refused: limit reached", "remote", conn.RemoteAddr(), "max_connections", s.opts.MaxConns, "max_connections_per_ip", s.opts.MaxConnsPerHost, "refused", n)
		}
		return
	}
	s.peers[p] = struct{}{}
	s.perHost[host]++
	s.mu.Unlock()
	if s.opts.OnConnect != nil {
		s.opts.OnConnect(p)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := p.Run(s.ctx)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, transport.ErrClosed) && s.ctx.Err() == nil {
			s.log.Debug("connection closed", "remote", p.RemoteAddr(), "err", err)
		}
		s.mu.Lock()
		delete(s.peers, p)
		if s.perHost[host]--; s.perHost[host] <= 0 {
			delete(s.perHost, host)
		}
		s.mu.Unlock()
		if s.opts.OnDisconnect != nil {
			s.opts.OnDisconnect(p)
		}
	}()
}

// Refused counts connections closed at once because of a limit.
func (s *Server) Refused() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func remoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Addrs lists the bound addresses.
func (s *Server) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.listeners))
	for _, l := range s.listeners {
		out = append(out, l.Addr())
	}
	return out
}

// Peers returns the open connections.
func (s *Server) Peers() []*Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Peer, 0, len(s.peers))
	for p := range s.peers {
		out = append(out, p)
	}
	return out
}

// Close stops accepting, closes every connection and waits for their
// goroutines, or for ctx.
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	s.mu.Lock()
	for _, l := range s.listeners {
		l.Close()
	}
	for p := range s.peers {
		p.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
