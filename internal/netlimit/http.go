package netlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// HTTP are an HTTP server's bounds, the remoting side's where it has one:
// connections in all and per IP, a request's header and body sizes, and
// how long a request may take to arrive, its answer to leave, and an idle
// keep-alive connection to stay open (remoting.*, transport.tcp.*).
type HTTP struct {
	MaxConnections      int // 0: no bound
	MaxConnectionsPerIP int // 0: no bound
	MaxHeaderBytes      int
	MaxBodyBytes        int64
	ReadHeaderTimeout   time.Duration
	ReadTimeout         time.Duration // the whole request, body included
	WriteTimeout        time.Duration // from the request read to the answer written
	IdleTimeout         time.Duration
}

// DefaultHTTP are the bounds of the metrics endpoint and the console: a
// browser opens at most 6 connections to a host and a Prometheus server
// one, so 64 per IP leaves room for a team behind one address; requests
// are a form or a GET.
func DefaultHTTP() HTTP {
	return HTTP{
		MaxConnections: 512, MaxConnectionsPerIP: 64,
		MaxHeaderBytes: 64 << 10, MaxBodyBytes: 64 << 10,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
	}
}

// Server is an http.Server for h within l; serve it on Listener's
// listener. A body is never read past MaxBodyBytes (see LimitBody).
func (l HTTP) Server(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           LimitBody(h, l.MaxBodyBytes),
		ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout,
		MaxHeaderBytes: l.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Listener bounds ln's connections by l.
func (l HTTP) Listener(ln net.Listener, what string, log *slog.Logger) *Listener {
	return NewListener(ln, l.MaxConnections, l.MaxConnectionsPerIP, what, log)
}

// LimitBody stops reading any body at max bytes (0: no bound): reading
// past it fails with *http.MaxBytesError (ParseForm: ErrTooLarge, which
// the handler answers 413 in its own format), and a body that says it is
// longer fails on its first read, so none of it is read. A route may set
// a lower bound inside a server's.
func LimitBody(h http.Handler, max int64) http.Handler {
	if max <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			// Unread: the connection cannot be reused.
			w.Header().Set("Connection", "close")
			r.Body = tooLarge{max}
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		h.ServeHTTP(w, r)
	})
}

// tooLarge is a body over its bound, not read.
type tooLarge struct{ limit int64 }

func (b tooLarge) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: b.limit} }
func (tooLarge) Close() error               { return nil }

// ParseForm parses r's form (URL-encoded or multipart, held in memory
// within the body's bound) and says why it could not: a body over the
// bound is ErrTooLarge. Handlers call it before FormValue, which drops
// the error and answers "".
func ParseForm(r *http.Request, maxMemory int64) error {
	var err error
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/form-data") {
		err = r.ParseMultipartForm(maxMemory)
	} else {
		err = r.ParseForm()
	}
	if err == nil {
		return nil
	}
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return fmt.Errorf("%w: over %d bytes", ErrTooLarge, mbe.Limit)
	}
	return fmt.Errorf("parse form: %w", err)
}

// ErrTooLarge is a request body over its bound (answered 413).
var ErrTooLarge = errors.New("request body too large")
