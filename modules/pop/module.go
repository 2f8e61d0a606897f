package pop

import (
	"context"
	"errors"
	"path/filepath"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/modules/broker"
)

// Module provides the pop state (*Service) to the gRPC endpoint; compose it
// with broker.Module. Its files open when the app starts, after the
// broker, and close when it stops: an app whose start fails before pop's
// keeps nothing of pop open (fx stops only what started).
var Module = fx.Module("pop",
	fx.Provide(func(lc fx.Lifecycle, b *broker.Broker) (*Service, error) {
		cfg := NewConfig()
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		if b.DataDir() == "" {
			return nil, errors.New("pop: the broker has no data directory")
		}
		s := newService(cfg, b)
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error { return s.openAt(filepath.Join(b.DataDir(), "pop"), nil) },
			OnStop:  func(context.Context) error { return s.Close() },
		})
		return s, nil
	}),
)
