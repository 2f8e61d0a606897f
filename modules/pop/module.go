package pop

import (
	"context"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/modules/broker"
)

// Module provides the pop state (*Service) to the gRPC endpoint; compose it
// with broker.Module. The journal closes when the app stops.
var Module = fx.Module("pop",
	fx.Provide(func(lc fx.Lifecycle, b *broker.Broker) (*Service, error) {
		s, err := New(NewConfig(), b)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.Hook{OnStop: func(context.Context) error { return s.Close() }})
		return s, nil
	}),
)
