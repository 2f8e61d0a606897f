package metrics

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/ha"
	"github.com/quivermq/quiver/modules/namesrv"
)

// ConfigSection is the metrics section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "metrics", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "metrics") }

type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Plan      *kernel.Plan
	Logger    *slog.Logger
	Broker    *broker.Broker  `optional:"true"`
	Namesrv   *namesrv.Server `optional:"true"`
	Guard     *kernel.Guard   `optional:"true"`
	HA        *ha.Service     `optional:"true"`
	// Collectors are series other modules export (the mirror's).
	Collectors []prometheus.Collector `group:"metrics.collectors"`
}

func newFromFx(p params, soft bool) (*Service, error) {
	cfg := *p.Config
	if soft && !p.Plan.Config.Exists("metrics.listen") {
		cfg.Listen = DevListen
	} else {
		soft = false
	}
	deps := Deps{Broker: p.Broker, Namesrv: p.Namesrv, Logger: p.Logger, Collectors: p.Collectors}
	if p.Broker != nil {
		deps.StorageDir = p.Plan.Storage.Dir
	}
	if p.HA != nil {
		deps.Replica = p.HA
	}
	if p.Guard != nil {
		deps.Sign = p.Guard.Sign
	}
	s, err := New(&cfg, deps)
	if err != nil {
		return nil, err
	}
	s.soft = soft
	p.Lifecycle.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	return s, nil
}

// Module serves metrics.listen (off by default) for the broker and/or
// name server of the app.
var Module = fx.Module("metrics",
	fx.Provide(configFromPlan),
	fx.Invoke(func(p params) error { _, err := newFromFx(p, false); return err }),
)

// DevModule is Module for `mq dev`: when metrics.listen is unset it serves
// DevListen, and only logs if that address is busy (another mq dev).
var DevModule = fx.Module("metrics",
	fx.Provide(configFromPlan),
	fx.Invoke(func(p params) error { _, err := newFromFx(p, true); return err }),
)
