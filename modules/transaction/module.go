package transaction

import (
	"log/slog"
	"time"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/modules/broker"
)

type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Raw       *config.Config
	Broker    *broker.Broker
	Logger    *slog.Logger
}

func newFromFx(p params) (*Service, error) {
	var retention time.Duration
	if v := p.Raw.String("storage.retention"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			retention = d
		}
	}
	s, err := New(p.Config, Deps{Broker: p.Broker, Logger: p.Logger, Retention: retention})
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
	fx.Provide(NewConfigFrom, newFromFx),
	fx.Invoke(func(*Service) {}),
)
