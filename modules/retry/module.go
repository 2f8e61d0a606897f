package retry

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/modules/broker"
)

// ConfigSection is the retry section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "retry", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "retry") }

// Module adds consumer send-back, dead-letter resend and offset reset by
// time to the broker (compose it with broker.Module). Left out of a build,
// send-back answers REQUEST_CODE_NOT_SUPPORTED and clients send failed
// messages to %RETRY%<group> themselves.
var Module = fx.Module("retry",
	fx.Provide(configFromPlan),
	fx.Invoke(func(cfg *Config, b *broker.Broker) error {
		_, err := New(cfg, b)
		return err
	}),
)
