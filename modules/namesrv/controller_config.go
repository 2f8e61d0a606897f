package namesrv

import (
	"net"
	"time"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// controllerSection is where the failover controller's keys live.
const controllerSection = Section + ".controller"

// ControllerConfig is the namesrv.controller section: the failover
// controller (modules/controller) this name server runs.
type ControllerConfig struct {
	// Enabled runs the failover controller in this name server.
	Enabled bool `koanf:"enabled"`
	// Listen is the raft TCP address (host:port, an IP the other
	// controllers can reach); it is also this controller's raft id.
	Listen string `koanf:"listen"`
	// Peers lists every controller's listen address, this one included;
	// they bootstrap the raft cluster the first time (empty: this one
	// alone).
	Peers []string `koanf:"peers"`
	// DataDir holds the raft log, stable store and snapshots.
	DataDir string `koanf:"data_dir"`
	// RaftTimeout is raft's heartbeat and election timeout (leader lease:
	// half of it).
	RaftTimeout time.Duration `koanf:"raft_timeout"`
	// CheckInterval is how often the leader looks for lapsed masters.
	CheckInterval time.Duration `koanf:"check_interval"`
	// DefaultFailoverTimeout applies to groups whose brokers reported none.
	DefaultFailoverTimeout time.Duration `koanf:"default_failover_timeout"`
	// AllowFrom lists more addresses (IPs or CIDRs) whose connections the
	// raft port accepts; it accepts the peers' own (Peers, resolved) and
	// closes any other connection (a source address is no credential:
	// TLS below, docs/SECURITY.md). For controllers that reach each other
	// through NAT.
	AllowFrom []string `koanf:"allow_from"`
	// TLS authenticates the raft port's connections both ways.
	TLS ControllerTLS `koanf:"tls"`
}

// ControllerTLS is namesrv.controller.tls: mutual TLS between the
// controllers. Each presents a certificate the cluster's CA signed, for
// its listen address (an IP SAN, or the host name peers dial), and
// accepts only peers presenting one; files rotated on disk are read
// again (tlsconf.Reloader).
type ControllerTLS struct {
	// Enabled turns TLS on for every connection of the raft port (raft
	// and read-index): all controllers of a cluster must agree.
	Enabled bool `koanf:"enabled"`
	// CertFile and KeyFile are this controller's certificate and key
	// (PEM), used as server and as client.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// CAFile holds the CA certificates (PEM) a peer's certificate must
	// chain to.
	CAFile string `koanf:"ca_file"`
}

// NewControllerConfig returns the defaults.
func NewControllerConfig() ControllerConfig {
	return ControllerConfig{
		Listen: "127.0.0.1:9880", DataDir: "./controller", RaftTimeout: time.Second,
		CheckInterval: 200 * time.Millisecond, DefaultFailoverTimeout: 6 * time.Second,
	}
}

// Validate reports every problem with its key.
func (c *ControllerConfig) Validate() error {
	var errs config.Errors
	if !c.Enabled {
		return nil
	}
	if _, err := net.ResolveTCPAddr("tcp", c.Listen); err != nil {
		errs.Add(controllerSection+".listen", "%q is not host:port: %v", c.Listen, err)
	} else if h, _, _ := net.SplitHostPort(c.Listen); h == "" || net.ParseIP(h).IsUnspecified() {
		errs.Add(controllerSection+".listen", "%q must name the IP other controllers reach (it is the raft id)", c.Listen)
	}
	for _, p := range c.Peers {
		if _, err := net.ResolveTCPAddr("tcp", p); err != nil {
			errs.Add(controllerSection+".peers", "%q is not host:port: %v", p, err)
		}
	}
	if len(c.Peers) > 0 {
		self := false
		for _, p := range c.Peers {
			self = self || p == c.Listen
		}
		if !self {
			errs.Add(controllerSection+".peers", "must include this controller's listen address %s", c.Listen)
		}
	}
	for _, a := range c.AllowFrom {
		if _, err := config.ParseIPPrefix(a); err != nil {
			errs.Add(controllerSection+".allow_from", "%v", err)
		}
	}
	if c.TLS.Enabled {
		if c.TLS.CertFile == "" || c.TLS.KeyFile == "" || c.TLS.CAFile == "" {
			errs.Add(controllerSection+".tls", "cert_file, key_file and ca_file must all be set (mutual TLS needs the cluster's CA)")
		} else if _, err := tlsconf.NewReloader(c.TLS.CertFile, c.TLS.KeyFile, c.TLS.CAFile, nil); err != nil {
			errs.Add(controllerSection+".tls", "%v", err)
		}
	}
	if c.DataDir == "" {
		errs.Add(controllerSection+".data_dir", "must be set")
	}
	if c.RaftTimeout < 50*time.Millisecond || c.RaftTimeout > time.Minute {
		errs.Add(controllerSection+".raft_timeout", "%s is outside 50ms..1m", c.RaftTimeout)
	}
	if c.CheckInterval <= 0 || c.DefaultFailoverTimeout <= 0 {
		errs.Add(controllerSection, "check_interval and default_failover_timeout must be positive")
	}
	return errs.Err()
}
