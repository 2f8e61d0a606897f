package ha

import (
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
)

type params struct {
	fx.In
	Config     *Config
	Broker     *broker.Broker
	Transports *transport.Set
	Logger     *slog.Logger
	Guard      *kernel.Guard `optional:"true"`
}

func newFromFx(p params) (*Service, error) {
	s, err := New(p.Config, p.Broker, p.Transports.Dial, p.Logger)
	if err != nil {
		return nil, err
	}
	if p.Guard != nil {
		s.SetSigner(p.Guard.Sign)
	}
	return s, nil
}

// Module is replication (compose it with broker.Module): a SLAVE follows
// its master; a master serves HA_PULL and, as SYNC_MASTER, acknowledges
// sends once a slave has their bytes. It provides *Service (Lag, for
// metrics).
var Module = fx.Module("ha",
	fx.Provide(NewConfigFrom, newFromFx),
	fx.Invoke(func(lc fx.Lifecycle, s *Service) {
		lc.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
	}),
)
