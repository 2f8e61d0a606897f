package natstransport

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is the transport.nats section. The same section serves listeners
// and dialers; every Listen and Dial of a process with the same connection
// keys (url, credentials, TLS, reconnect and connect settings) shares one
// NATS connection.
type Config struct {
	// URL is the NATS server to connect to; a comma-separated list names
	// several servers of one cluster (nats.go tries them in random order
	// and reconnects to any of them). Schemes nats://, tls://, ws://,
	// wss://.
	URL string `koanf:"url"`
	// CredentialsFile is a NATS .creds file (user JWT and nkey seed),
	// as `nats context` and nsc write them (nats.UserCredentials).
	CredentialsFile string `koanf:"credentials_file"`
	// NKeySeedFile is a file holding an nkey user seed ("SU..."), for
	// servers configured with nkey users (nats.NkeyOptionFromSeed).
	NKeySeedFile string `koanf:"nkey_seed_file"`
	// TLS secures the connection to the NATS server (not end to end:
	// frames are visible to the NATS servers on the path).
	TLS TLSConfig `koanf:"tls"`
	// SubjectPrefix is the first subject token(s) of every listener
	// subject: a listener for 127.0.0.1:10911 subscribes to
	// <prefix>.127_0_0_1.10911 (see the package comment).
	SubjectPrefix string `koanf:"subject_prefix"`
	// ReconnectWait is how long nats.go waits before reconnecting to a
	// server it was connected to.
	ReconnectWait time.Duration `koanf:"reconnect_wait"`
	// MaxReconnects bounds reconnect attempts after a connection loss;
	// -1 retries forever (the default: servers must survive a NATS
	// restart). When they are exhausted the NATS connection closes for
	// good, and with it every listener and connection on it.
	MaxReconnects int `koanf:"max_reconnects"`
	// IdleTimeout closes a Quiver connection on which nothing arrived from
	// the peer for this long, so a vanished peer (a killed process whose
	// goodbye never came) is detected. Each end sends a keep-alive when it
	// sent nothing for a third of it, so only a dead peer times out. 0
	// disables both.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// ConnectTimeout bounds the connection to the NATS server and the
	// handshake of a Dial with a listener.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
}

// TLSConfig is the transport.nats.tls section.
type TLSConfig struct {
	// CAFile is the PEM bundle the NATS server certificate must chain to
	// (default: the system roots). Setting any TLS key enables TLS, as a
	// tls:// URL does.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile are a client certificate for servers that
	// verify clients.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// InsecureSkipVerify accepts any server certificate (development
	// only).
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
}

func (t TLSConfig) enabled() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{
		URL:            "nats://127.0.0.1:4222",
		SubjectPrefix:  "quiver",
		ReconnectWait:  2 * time.Second,
		MaxReconnects:  -1,
		IdleTimeout:    120 * time.Second,
		ConnectTimeout: 10 * time.Second,
	}
}

// Validate checks the values and reports every problem found, each under
// its key.
func (c *Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, errors.New("url: must be set"))
	}
	for _, u := range splitURLs(c.URL) {
		p, err := url.Parse(u)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("url: %q: %v", u, err))
		case p.Scheme != "nats" && p.Scheme != "tls" && p.Scheme != "ws" && p.Scheme != "wss":
			errs = append(errs, fmt.Errorf("url: %q: scheme must be nats, tls, ws or wss", u))
		case p.Host == "":
			errs = append(errs, fmt.Errorf("url: %q: no host", u))
		}
	}
	if c.CredentialsFile != "" && c.NKeySeedFile != "" {
		errs = append(errs, errors.New("credentials_file, nkey_seed_file: set one or neither"))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls.cert_file, tls.key_file: set both or neither"))
	}
	if c.TLS.CAFile != "" && c.TLS.InsecureSkipVerify {
		errs = append(errs, errors.New("tls.insecure_skip_verify: set tls.ca_file or tls.insecure_skip_verify, not both"))
	}
	if err := checkSubject(c.SubjectPrefix); err != nil {
		errs = append(errs, fmt.Errorf("subject_prefix: %w", err))
	} else if strings.HasPrefix(c.SubjectPrefix, "_INBOX") || strings.HasPrefix(c.SubjectPrefix, "$") {
		errs = append(errs, fmt.Errorf("subject_prefix: %q is reserved by NATS", c.SubjectPrefix))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"reconnect_wait", c.ReconnectWait}, {"idle_timeout", c.IdleTimeout}, {"connect_timeout", c.ConnectTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", d.key, d.v))
		}
	}
	if c.ConnectTimeout == 0 {
		errs = append(errs, errors.New("connect_timeout: must be positive"))
	}
	if c.IdleTimeout > 0 && c.IdleTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("idle_timeout: %v is below 100ms (0 disables it)", c.IdleTimeout))
	}
	if c.MaxReconnects < -1 {
		errs = append(errs, fmt.Errorf("max_reconnects: must be -1 (forever) or more, got %d", c.MaxReconnects))
	}
	return errors.Join(errs...)
}

func splitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// connKey identifies the NATS connection a config asks for: configs with
// the same key share one.
func (c *Config) connKey() string {
	return strings.Join([]string{strings.Join(splitURLs(c.URL), ","), c.CredentialsFile, c.NKeySeedFile,
		c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, fmt.Sprint(c.TLS.InsecureSkipVerify),
		c.ReconnectWait.String(), fmt.Sprint(c.MaxReconnects), c.ConnectTimeout.String()}, "\x00")
}
