package schedule

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/modules/broker"
)

// ConfigSection is the schedule section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "schedule", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "schedule") }

// Module adds delay levels and timers to the broker (compose it with
// broker.Module) and provides the *Service (the gRPC endpoint recalls
// timers through it). With schedule.enabled=false the *Service is nil,
// delayed messages are delivered at once and RECALL_MESSAGE is refused.
var Module = fx.Module("schedule",
	fx.Provide(configFromPlan),
	fx.Provide(func(lc fx.Lifecycle, cfg *Config, b *broker.Broker) (*Service, error) {
		if !cfg.Enabled {
			registerRecallOff(b)
			return nil, nil
		}
		s, err := New(cfg, b)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
		return s, nil
	}),
	fx.Invoke(func(*Service) {}), // built whether or not anything asks for it
)
