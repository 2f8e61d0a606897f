package broker

import (
	"context"
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
)

// NewConfigFrom decodes the broker section strictly.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("broker", c); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// NewFilters builds one compiler per registered filter plugin, each with
// its section filter.<id>.
func NewFilters(cfg *config.Config, reg *kernel.FilterRegistry) (map[string]filter.Compiler, error) {
	out := map[string]filter.Compiler{}
	for _, id := range reg.IDs() {
		p, _ := reg.Get(id)
		c := p.NewConfig()
		if err := cfg.Decode("filter."+id, c); err != nil {
			return nil, err
		}
		comp, err := p.New(c)
		if err != nil {
			return nil, err
		}
		out[p.Type()] = comp
	}
	return out, nil
}

type params struct {
	fx.In
	Config     *Config
	Raw        *config.Config
	Store      store.Store
	Transports *transport.Set
	Filters    *kernel.FilterRegistry
	Remoting   kernel.RemotingConfig
	Logger     *slog.Logger
	Guard      *kernel.Guard `optional:"true"`
}

func newFromFx(p params) (*Broker, error) {
	filters, err := NewFilters(p.Raw, p.Filters)
	if err != nil {
		return nil, err
	}
	dir := p.Raw.String("storage.dir")
	if dir == "" {
		dir = kernel.DefaultStorageConfig().Dir
	}
	deps := Deps{
		Store: p.Store, Transports: p.Transports, Filters: filters, Logger: p.Logger,
		DataDir: dir, PeerOptions: remoting.PeerOptions{MaxInFlight: p.Remoting.MaxInFlight},
	}
	if p.Guard != nil {
		deps.Interceptors = p.Guard.Interceptors
		deps.Sign = p.Guard.Sign
	}
	return New(p.Config, deps)
}

// Module is the broker: send, pull, offsets, heartbeats, admin codes and
// name-server registration. It needs kernel.Module, kernel.StorageModule
// and at least one transport.
var Module = fx.Module("broker",
	fx.Provide(NewConfigFrom, newFromFx),
	fx.Invoke(func(lc fx.Lifecycle, b *Broker) {
		lc.Append(fx.Hook{
			OnStart: b.Start,
			OnStop:  func(ctx context.Context) error { return b.Stop(ctx) },
		})
	}),
)
