package retry

import (
	"go.uber.org/fx"

	"github.com/quivermq/quiver/modules/broker"
)

// Module adds consumer send-back, dead-letter resend and offset reset by
// time to the broker (compose it with broker.Module). Left out of a build,
// send-back answers REQUEST_CODE_NOT_SUPPORTED and clients send failed
// messages to %RETRY%<group> themselves.
var Module = fx.Module("retry",
	fx.Provide(NewConfigFrom),
	fx.Invoke(func(cfg *Config, b *broker.Broker) error {
		_, err := New(cfg, b)
		return err
	}),
)
