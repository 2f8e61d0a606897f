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
// broker.Module). With schedule.enabled=false it does nothing and delayed
// messages are delivered at once.
var Module = fx.Module("schedule",
	kernel.AsSection(ConfigSection),
	fx.Provide(configFromPlan),
	fx.Invoke(func(lc fx.Lifecycle, cfg *Config, b *broker.Broker) error {
		if !cfg.Enabled {
			return nil
		}
		s, err := New(cfg, b)
		if err != nil {
			return err
		}
		lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
		return nil
	}),
)
