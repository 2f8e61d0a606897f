package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ExpiryWarning is how long before its certificate expires a Reloader
// starts warning, once at each reading and then once a day.
const ExpiryWarning = 14 * 24 * time.Hour

// ReloadEvery bounds how often a Reloader looks at its files: a rotated
// certificate is served from the first handshake this long after the
// files changed.
const ReloadEvery = time.Second

// Reloader serves a certificate and a CA pool read from files, and reads
// them again when a file changes (looked at on use, at most every
// ReloadEvery), so certificates rotated on disk — by cert-manager, an
// ACME client or by hand, in place or by a symlink swap — are used by new
// handshakes without a restart. A reading that fails (a half-written file,
// a key that does not match its certificate) is logged and the last good
// one kept; it is tried again when a file changes again. Connections
// already open keep the certificate of their handshake.
type Reloader struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger
	now                       func() time.Time

	mu      sync.Mutex
	checked time.Time
	stamps  [3]fileStamp // certFile, keyFile, caFile
	cert    *tls.Certificate
	pool    *x509.CertPool
	gen     uint64      // readings so far
	srv     *tls.Config // Server's per-handshake config for gen
	srvGen  uint64
	warned  time.Time // the last expiry warning
}

// fileStamp is what says a file changed: the hash of its content (a
// modification time can be kept by a copy, or fall in the tick of the
// previous write).
type fileStamp [sha256.Size]byte

// NewReloader reads certFile and keyFile (both or neither) and caFile
// (may be empty), failing when they do not load.
func NewReloader(certFile, keyFile, caFile string, log *slog.Logger) (*Reloader, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tlsconf: a certificate file needs its key file and a key file its certificate")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log, now: time.Now}
	st := r.stat()
	cert, pool, err := r.load()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamps, r.checked = st, r.now()
	r.setLocked(cert, pool)
	return r, nil
}

// Server returns a listener's configuration: base, whose handshakes each
// use base with the current certificate and, with a CA file, the current
// pool as ClientCAs (one configuration per reading). base must not be
// changed afterwards.
func (r *Reloader) Server(base *tls.Config) *tls.Config {
	outer := base.Clone()
	outer.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		r.refresh()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.srv == nil || r.srvGen != r.gen {
			r.srv, r.srvGen = r.withLocked(base, false), r.gen
		}
		return r.srv, nil
	}
	return outer
}

// Client returns a dialler's configuration for one connection: base
// with the current certificate as the client's and, with a CA file, the
// current pool as RootCAs.
func (r *Reloader) Client(base *tls.Config) *tls.Config {
	r.refresh()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.withLocked(base, true)
}

// withLocked is a copy of base with the current certificate and pool
// (RootCAs for a client, ClientCAs for a server).
func (r *Reloader) withLocked(base *tls.Config, client bool) *tls.Config {
	c := base.Clone()
	if r.cert != nil {
		c.Certificates = []tls.Certificate{*r.cert}
	}
	if r.pool != nil {
		if client {
			c.RootCAs = r.pool
		} else {
			c.ClientCAs = r.pool
		}
	}
	return c
}

// refresh reads the files again when ReloadEvery has passed since the
// last look and one of them changed. One caller a second looks; the
// files are read without the lock, so handshakes meanwhile go on with
// the current reading.
func (r *Reloader) refresh() {
	r.mu.Lock()
	now := r.now()
	if now.Sub(r.checked) < ReloadEvery {
		r.mu.Unlock()
		return
	}
	r.checked = now
	old := r.stamps
	r.mu.Unlock()

	st := r.stat()
	if st == old {
		r.mu.Lock()
		if now.Sub(r.warned) >= 24*time.Hour {
			r.warnExpiryLocked(now)
		}
		r.mu.Unlock()
		return
	}
	cert, pool, err := r.load()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamps = st
	if err != nil {
		r.log.Warn("tls: certificate files changed but do not load; serving the previous ones", "err", err)
		return
	}
	args := []any{"cert_file", r.certFile, "ca_file", r.caFile}
	if cert != nil {
		args = append(args, "sha256", Fingerprint(cert.Certificate[0]), "not_after", cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	r.log.Info("tls: certificate files reloaded", args...)
	r.setLocked(cert, pool)
}

// stat stamps the files (a missing or unreadable file: the zero stamp).
// They are a few KiB each, read at most every ReloadEvery.
func (r *Reloader) stat() [3]fileStamp {
	var st [3]fileStamp
	for i, f := range []string{r.certFile, r.keyFile, r.caFile} {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil {
			st[i] = sha256.Sum256(b)
		}
	}
	return st
}

// load reads every file (nil for those not configured).
func (r *Reloader) load() (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if r.certFile != "" {
		c, err := LoadKeyPair(r.certFile, r.keyFile)
		if err != nil {
			return nil, nil, err
		}
		if c.Leaf == nil { // GODEBUG=x509keypairleaf=0
			if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
				return nil, nil, fmt.Errorf("tlsconf: parse %s: %w", r.certFile, err)
			}
		}
		cert = &c
	}
	var pool *x509.CertPool
	if r.caFile != "" {
		p, err := CertPool(r.caFile)
		if err != nil {
			return nil, nil, err
		}
		pool = p
	}
	return cert, pool, nil
}

// setLocked makes a reading current and warns when its certificate
// nears its expiry.
func (r *Reloader) setLocked(cert *tls.Certificate, pool *x509.CertPool) {
	r.cert, r.pool = cert, pool
	r.gen++
	r.warnExpiryLocked(r.now())
}

// warnExpiryLocked logs when the certificate expires within
// ExpiryWarning, or has expired.
func (r *Reloader) warnExpiryLocked(now time.Time) {
	if r.cert == nil || r.cert.Leaf.NotAfter.Sub(now) > ExpiryWarning {
		return
	}
	r.warned = now
	left := r.cert.Leaf.NotAfter.Sub(now).Round(time.Minute)
	msg := "tls: certificate expires soon; rotate it (the files are read again when they change)"
	if left <= 0 {
		msg = "tls: certificate has expired; rotate it (the files are read again when they change)"
	}
	r.log.Warn(msg, "cert_file", r.certFile, "not_after", r.cert.Leaf.NotAfter.Format(time.RFC3339), "left", left.String())
}
