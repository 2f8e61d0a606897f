package schedule

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/modules/broker"
)

// Module adds delay levels and timers to the broker (compose it with
// broker.Module). With schedule.enabled=false it does nothing and delayed
// messages are delivered at once.
var Module = fx.Module("schedule",
	fx.Provide(NewConfigFrom),
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
