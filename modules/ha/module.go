package ha

import (
	"errors"
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
)

// ConfigSection is the ha section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "ha", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "ha") }

type params struct {
	fx.In
	Config     *Config
	Broker     *broker.Broker
	Transports *transport.Set
	Logger     *slog.Logger
	Plan       *kernel.Plan
	Shutdowner fx.Shutdowner
	Guard      *kernel.Guard `optional:"true"`
}

func newFromFx(p params) (*Service, error) {
	s, err := New(p.Config, p.Broker, p.Transports.Dial, p.Logger)
	if err != nil {
		return nil, err
	}
	if p.Guard != nil {
		if err := needClusterCredential(p.Config, p.Broker.Config().Role, p.Guard, p.Logger); err != nil {
			return nil, err
		}
		s.SetSigner(p.Guard.Sign)
	}
	if p.Config.Failover {
		dir := p.Plan.Storage.Dir
		restart := func() {
			if err := p.Shutdowner.Shutdown(fx.ExitCode(RestartExitCode)); err != nil {
				p.Logger.Error("ha: request restart", "err", err)
			}
		}
		if err := s.EnableFailover(Dir(dir), restart); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Module is replication (compose it with broker.Module): a SLAVE follows
// its master; a master serves HA_PULL and, as SYNC_MASTER, acknowledges
// sends once a slave has their bytes; with ha.failover the controllers
// decide the role. It provides *Service (Lag, for metrics). Wrap the
// storage engines with Truncating too, so that a truncation failover
// records is applied.
var Module = fx.Module("ha",
	fx.Provide(configFromPlan, newFromFx),
	fx.Invoke(func(lc fx.Lifecycle, s *Service) {
		lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	}),
)

// ErrNoClusterCredential: a broker with ACL on that must act as a cluster
// member — it pulls from a master (a SLAVE, or any member with
// ha.failover) or registers with name servers that check
// (auth.acl.namesrv_enabled) — has no credential that can. Masters and name
// servers with ACL on serve HA_PULL, controller heartbeats and
// registrations to cluster members only (docs/SECURITY.md).
var ErrNoClusterCredential = errors.New("ha: acl is on and this broker must sign as a cluster member: " +
	"set auth.acl.access_key and auth.acl.secret_key to an account with role: broker (docs/SECURITY.md)")

// needClusterCredential fails when the broker must act as a cluster
// member and has no credential at all; a credential its own ACL file
// lists without role: broker is logged at Error (the file may be fixed
// while the broker runs: it is reloaded).
func needClusterCredential(cfg *Config, role string, g *kernel.Guard, log *slog.Logger) error {
	replicates := cfg.Failover || role == broker.RoleSlave
	if len(g.Interceptors) == 0 || !(replicates || g.NamesrvChecked()) {
		return nil
	}
	if !g.CanSign() {
		return ErrNoClusterCredential
	}
	if !replicates && g.CanSignLocally() {
		return nil // mq dev: the name server beside it takes the process's own credential
	}
	for _, a := range g.Authenticators() {
		if cs, ok := a.(auth.ClusterSigner); ok {
			if err := cs.ClusterCredential(); err != nil && log != nil {
				log.Error("ha: masters and name servers will refuse this broker's cluster requests until its account has role: broker", "err", err)
			}
		}
	}
	return nil
}
