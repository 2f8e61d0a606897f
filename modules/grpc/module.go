package grpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/modules/schedule"
	"github.com/quivermq/quiver/modules/transaction"
)

// ConfigSection is the grpc section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "grpc", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "grpc") }

type params struct {
	fx.In
	Lifecycle   fx.Lifecycle
	Config      *Config
	Plan        *kernel.Plan
	Logger      *slog.Logger
	Broker      *broker.Broker
	Pop         *pop.Service         `optional:"true"`
	Guard       *kernel.Guard        `optional:"true"`
	Transaction *transaction.Service `optional:"true"`
	Schedule    *schedule.Service    `optional:"true"`
}

func newFromFx(p params, dev bool) error {
	cfg := *p.Config
	soft := false
	if dev && !p.Plan.Config.Exists("grpc.enabled") {
		cfg.Enabled, soft = true, true
	}
	if !cfg.Enabled {
		return nil
	}
	// The enabled auth plugins check every call (auth.go) as the guard
	// checks remoting requests.
	var plugins []AuthPlugin
	azs := p.Guard.Authorizers()
	for i, an := range p.Guard.Authenticators() {
		var az auth.Authorizer
		if i < len(azs) {
			az = azs[i]
		}
		plugins = append(plugins, AuthPlugin{Authenticator: an, Authorizer: az}) // New refuses a nil Authorizer
	}
	s, err := New(&cfg, Deps{Broker: p.Broker, Pop: p.Pop, Logger: p.Logger, Auth: plugins, Transaction: p.Transaction, Schedule: p.Schedule})
	if err != nil {
		if soft {
			p.Logger.Warn("grpc: endpoint not served", "err", err)
			return nil
		}
		return err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			err := s.Start(ctx)
			if err != nil && soft && errors.Is(err, syscall.EADDRINUSE) {
				p.Logger.Warn("grpc: endpoint not served: address busy", "listen", cfg.Listen, "err", err)
				return nil
			}
			if err != nil {
				return fmt.Errorf("grpc: %w", err)
			}
			return nil
		},
		OnStop: s.Stop,
	})
	return nil
}

// Module serves the RocketMQ 5 gRPC endpoint when grpc.enabled is set.
var Module = fx.Module("grpc",
	fx.Provide(configFromPlan),
	fx.Invoke(func(p params) error { return newFromFx(p, false) }),
)

// DevModule is Module for `mq dev`: the endpoint is on unless grpc.enabled
// is set to false, and a busy address only logs (another mq dev).
var DevModule = fx.Module("grpc",
	fx.Provide(configFromPlan),
	fx.Invoke(func(p params) error { return newFromFx(p, true) }),
)
