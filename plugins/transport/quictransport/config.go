package quictransport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// Config is the transport.quic section. The same section serves both ends:
// the listener reads the certificate keys, the dialler the trust keys.
type Config struct {
	// CertFile and KeyFile are the server's PEM certificate (chain) and key.
	// When both are empty the listener generates a self-signed ECDSA
	// certificate for localhost, 127.0.0.1 and ::1 (and the listen host) and
	// logs its SHA-256 fingerprint at Warn: fine for `mq dev`, not for
	// production.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// CAFile is the PEM bundle a client trusts. When empty the client trusts
	// the system roots, unless InsecureSkipVerify is set.
	CAFile string `koanf:"ca_file"`
	// InsecureSkipVerify makes a client accept any server certificate. The
	// self-signed certificate of `mq dev` needs it (or ca_file pointing at
	// an exported copy) for local clients. Default false; never in
	// production: it gives up server authentication.
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
	// ServerName is the name a client verifies the certificate against;
	// empty means the host of the address dialled.
	ServerName string `koanf:"server_name"`
	// ClientAuth is none, request (verify a client certificate if one is
	// presented) or require; ClientCAFile holds the CAs client
	// certificates must chain to (default: the system roots). The same
	// keys as transport.tcp.tls.
	ClientAuth   string `koanf:"client_auth"`
	ClientCAFile string `koanf:"client_ca_file"`
	// ClientCertFile and ClientKeyFile are presented when dialling a
	// server that asks for a client certificate.
	ClientCertFile string `koanf:"client_cert_file"`
	ClientKeyFile  string `koanf:"client_key_file"`
	// IdleTimeout closes a connection on which no packet arrived for this
	// long (the smaller of both ends' values applies). Keep-alives count as
	// traffic, so with KeepAlive set only a dead peer or path times out.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// KeepAlive is the period of keep-alive packets (at most half of
	// IdleTimeout is used); 0 sends none.
	KeepAlive time.Duration `koanf:"keep_alive"`
	// MaxStreams bounds the streams a peer may open towards us, and so the
	// frames it may have in flight towards us at once (a stream carries one
	// frame at a time; streams are reused, see the package doc); further
	// writers of the peer wait for one of its streams to become idle.
	MaxStreams int `koanf:"max_streams"`
	// HandshakeTimeout aborts a handshake during which nothing arrived for
	// this long; the whole handshake is bounded to twice this.
	HandshakeTimeout time.Duration `koanf:"handshake_timeout"`
	// DialTimeout bounds connection set-up, handshake included.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// WriteTimeout bounds one frame write, waiting for a stream and for
	// flow control included; a peer that stops reading is dropped instead
	// of blocking its writers forever. It also bounds how long Close waits
	// for the peer to take the frames written before it (at most 5 s).
	// 0 disables it.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// ZeroRTT lets a client that reconnects to a server it had a session
	// with send its first frames in the first flight (0-RTT), saving the
	// handshake's round trip, and lets a server accept them. Both ends
	// must enable it. Default false: 0-RTT data can be replayed by an
	// attacker on the path, and a replayed SEND_MESSAGE stores the
	// message again; enable it only where duplicates are acceptable
	// (RocketMQ consumers must tolerate them anyway) and the link's round
	// trip matters (satellite, cellular).
	ZeroRTT bool `koanf:"zero_rtt"`
	// MaxAckDelay is the longest this end delays the ACK of a packet that
	// needs one (quic-go acknowledges every second packet at once, and any
	// packet after a gap). It is advertised to the peer, which adds it (plus
	// 1 ms, rounded up to whole milliseconds) to its probe timeout: the wait
	// before the last packet of a burst — the tail of a pull answer, a lone
	// request — is probed when it or its ACK is lost. 1 ms (the default)
	// gives a probe timeout of about RTT + 3 ms; 0 keeps quic-go's own
	// 25 ms. A shorter delay costs more ACK-only packets, never safety:
	// congestion control is unchanged, and a peer's advertised value is
	// honoured whatever ours is. Needs the patched quic-go in internal/quic.
	MaxAckDelay time.Duration `koanf:"max_ack_delay"`
	// AckThreshold is the number of packets that need an ACK after which
	// this end acknowledges at once instead of waiting up to MaxAckDelay
	// (QUIC's rule, and quic-go's, is 2). 10 by default, applied once the
	// first 100 packets arrived (the peer's slow start still gets an ACK
	// every second packet), as Chromium's ACK decimation: the ACKs of a
	// burst of requests ride on their answers, and a pull answer of 24
	// packets is acknowledged about twice instead of 4-12 times, each
	// ACK-only packet costing both ends a packet's work. Out-of-order
	// packets are acknowledged at once whatever the value. 0 or 2 keeps
	// QUIC's 2; at most 256. Needs the patched quic-go in internal/quic.
	AckThreshold int `koanf:"ack_threshold"`
	// CongestionBackoff is the factor the congestion window (quic-go's
	// NewReno) is multiplied by on a loss event. 0.85 by default (quic-go
	// alone: 0.7); 0 means quic-go's 0.7; at most 0.9. A higher value cuts
	// less on the random loss of a radio link (the lab: about twice the
	// pull throughput at 1–5 % loss, docs/lab/BENCHMARKS.md) and takes a
	// little more than one Reno flow's share on a congested path: 0.85 is
	// the backoff of Chromium's QUIC, which emulated two TCP connections,
	// without that emulation's doubled increase. Congestion control stays
	// on. Needs the patched quic-go in internal/quic.
	CongestionBackoff float64 `koanf:"congestion_backoff"`
	// Congestion is the congestion controller: "bbr" (the default:
	// Quiver's BBR, BBRv3 without ECN, in internal/quic/internal/congestion:
	// it paces at its estimate of the bottleneck bandwidth and reads loss
	// up to 2 %, or up to 15 % while the RTT shows no queue, as the link's
	// rather than congestion) or "reno" (quic-go's NewReno with
	// CongestionBackoff). Each end chooses for the data it sends: a
	// broker's listener for pull answers, a client's dialler for sends.
	// BBR is the default because the lossy-link lab measured it ahead of
	// reno on every lossy profile, pulls and push consumers most (up to
	// 3.5× the throughput, p99 down to a tenth), and level at 0 % loss; on
	// a shared bottleneck it takes about the share the kernel's TCP BBR
	// takes from a CUBIC flow (docs/lab/BENCHMARKS.md, issue 38). Needs
	// the patched quic-go in internal/quic.
	Congestion string `koanf:"congestion"`

	// sessions caches TLS session tickets for the dialler (NewConfig
	// makes it; a Config built otherwise does not resume sessions).
	sessions tls.ClientSessionCache
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		ClientAuth:        "none",
		IdleTimeout:       30 * time.Second,
		KeepAlive:         10 * time.Second,
		MaxStreams:        1024,
		HandshakeTimeout:  10 * time.Second,
		DialTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxAckDelay:       time.Millisecond,
		AckThreshold:      10,
		CongestionBackoff: 0.85,
		Congestion:        "bbr",
		sessions:          tls.NewLRUClientSessionCache(64),
	}
}

// maxAckDelayLimit is below QUIC's largest max_ack_delay (2^14 ms) by the
// granularity quic-go adds when advertising it.
const maxAckDelayLimit = 16 * time.Second

// maxAckThreshold bounds ack_threshold: past it the ACK timer, not the
// count, decides anyway.
const maxAckThreshold = 256

// maxStreamsLimit is QUIC's stream count limit (2^60).
const maxStreamsLimit = 1 << 60

// Validate checks the values and reports every problem found, each under
// its key.
func (c *Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"idle_timeout", c.IdleTimeout}, {"keep_alive", c.KeepAlive}, {"handshake_timeout", c.HandshakeTimeout},
		{"dial_timeout", c.DialTimeout}, {"write_timeout", c.WriteTimeout}, {"max_ack_delay", c.MaxAckDelay}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", d.key, d.v))
		}
	}
	if c.IdleTimeout == 0 {
		errs = append(errs, errors.New("idle_timeout: must be positive"))
	}
	if c.HandshakeTimeout == 0 {
		errs = append(errs, errors.New("handshake_timeout: must be positive"))
	}
	if c.IdleTimeout > 0 && c.KeepAlive >= c.IdleTimeout {
		errs = append(errs, fmt.Errorf("keep_alive: %v must be below idle_timeout %v", c.KeepAlive, c.IdleTimeout))
	}
	if c.CongestionBackoff != 0 && (c.CongestionBackoff < 0.5 || c.CongestionBackoff > 0.9) {
		errs = append(errs, fmt.Errorf("congestion_backoff: must be 0 (quic-go's 0.7) or between 0.5 and 0.9, got %v", c.CongestionBackoff))
	}
	switch c.Congestion {
	case "", "reno", "bbr":
	default:
		errs = append(errs, fmt.Errorf("congestion: must be reno or bbr, got %q", c.Congestion))
	}
	if c.MaxAckDelay > maxAckDelayLimit {
		errs = append(errs, fmt.Errorf("max_ack_delay: must be at most %v, got %v", maxAckDelayLimit, c.MaxAckDelay))
	}
	if c.AckThreshold < 0 || c.AckThreshold == 1 || c.AckThreshold > maxAckThreshold {
		errs = append(errs, fmt.Errorf("ack_threshold: must be 0 (QUIC's 2) or between 2 and %d, got %d", maxAckThreshold, c.AckThreshold))
	}
	if c.MaxStreams < 1 || int64(c.MaxStreams) > maxStreamsLimit {
		errs = append(errs, fmt.Errorf("max_streams: must be between 1 and 2^60, got %d", c.MaxStreams))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("cert_file, key_file: set both or neither"))
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		errs = append(errs, errors.New("client_cert_file, client_key_file: set both or neither"))
	}
	if _, err := tlsconf.ClientAuth(c.ClientAuth); err != nil {
		errs = append(errs, fmt.Errorf("client_auth: %w", err))
	}
	if c.CAFile != "" && c.InsecureSkipVerify {
		errs = append(errs, errors.New("insecure_skip_verify: set ca_file or insecure_skip_verify, not both"))
	}
	return errors.Join(errs...)
}
