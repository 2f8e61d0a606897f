package transaction

import (
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/modules/broker"
)

// ConfigSection is the transaction section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "transaction", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) {
	return kernel.Setting[*Config](p, "transaction")
}

type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Plan      *kernel.Plan
	Broker    *broker.Broker
	Logger    *slog.Logger
}

func newFromFx(p params) (*Service, error) {
	s, err := New(p.Config, Deps{Broker: p.Broker, Logger: p.Logger, Retention: p.Plan.Storage.Retention})
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	return s, nil
}

// Module adds transactional messages to the broker: half messages, the
// END_TRANSACTION processor and the check-back service. It needs
// broker.Module.
var Module = fx.Module("transaction",
	fx.Provide(configFromPlan, newFromFx),
	fx.Invoke(func(*Service) {}),
)
