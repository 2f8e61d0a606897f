package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/retention"
	"github.com/quivermq/quiver/core/transport"
)

// NewConfigFrom decodes the broker section strictly.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	var bad *config.AddrErrors
	err := cfg.Decode("broker", c)
	if err != nil && !errors.As(err, &bad) {
		return nil, err
	}
	// Bad addresses leave the rest decoded: report them with the rest.
	return c, errors.Join(err, c.Validate())
}

// ErrPropertyFilterOff is what subscribing with an expression type other
// than TAG gets when filter.property_filter is false.
var ErrPropertyFilterOff = errors.New("broker: filter.property_filter is false: this broker serves TAG expressions only")

// refused stands for a filter plugin turned off by filter.property_filter.
type refused struct{ typ string }

func (r refused) Compile(string) (filter.Matcher, error) {
	return nil, fmt.Errorf("%w (%s refused)", ErrPropertyFilterOff, r.typ)
}

// ConfigSection is the broker section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "broker", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "broker") }

// filtersFromPlan builds one compiler per registered filter plugin, each
// with its section filter.<id> as the plan decoded it. The section's one
// scalar key, filter.property_filter (default true, RocketMQ's
// enablePropertyFilter), is the broker-level switch: false refuses every
// expression type but TAG when a consumer subscribes.
func filtersFromPlan(p *kernel.Plan) (map[string]filter.Compiler, error) {
	out := map[string]filter.Compiler{}
	reg := p.Registries.Filter
	for _, id := range reg.IDs() {
		prov, _ := reg.Get(id)
		c, ok := p.FilterConfigs[id]
		if !ok {
			c = prov.NewConfig()
		}
		comp, err := prov.New(c)
		if err != nil {
			return nil, fmt.Errorf("filter %s: %w", id, err)
		}
		if !p.PropertyFilter && prov.Type() != filter.TypeTag {
			comp = refused{typ: prov.Type()}
		}
		out[prov.Type()] = comp
	}
	return out, nil
}

type params struct {
	fx.In
	Config     *Config
	Plan       *kernel.Plan
	Store      store.Store
	Transports *transport.Set
	Remoting   kernel.RemotingConfig
	Logger     *slog.Logger
	Guard      *kernel.Guard `optional:"true"`
	// Cleaner is storage's retention loop (fileReservedTime and
	// deleteWhen change it at run time, admin_config.go).
	Cleaner *retention.Cleaner `optional:"true"`
}

func newFromFx(p params) (*Broker, error) {
	filters, err := filtersFromPlan(p.Plan)
	if err != nil {
		return nil, err
	}
	deps := Deps{
		Store: p.Store, Transports: p.Transports, Filters: filters, Logger: p.Logger,
		DataDir: p.Plan.Storage.Dir, Retention: p.Plan.Storage.Retention, PeerOptions: remoting.PeerOptions{MaxInFlight: p.Remoting.MaxInFlight},
		MaxConns: p.Remoting.MaxConnections, MaxConnsPerHost: p.Remoting.MaxConnectionsPerIP,
		StoreFlush: store.FlushMode(p.Plan.Storage.Flush),
	}
	if p.Cleaner != nil {
		deps.Cleaner = p.Cleaner
	}
	if p.Guard != nil {
		deps.Interceptors = p.Guard.Interceptors
		deps.Sign = p.Guard.Sign
		p.Guard.UseStore(p.Store) // authorization reads stored messages' topics
		deps.Authenticators = p.Guard.Authenticators()
		if p.Guard.NamesrvChecked() && !p.Guard.CanSign() && len(p.Config.Namesrv) > 0 {
			// acl_admin.go
			return nil, errUnsignedRegistration
		}
	}
	b, err := New(p.Config, deps)
	if err != nil {
		return nil, err
	}
	for _, a := range deps.Authenticators {
		if r, ok := a.(auth.Replicated); ok { // ACL 2.0's users and policies
			for _, d := range r.ReplicaDocs() {
				b.AddReplicaMeta(ReplicaMeta{Name: d.Name, Code: d.Code, Apply: d.Apply, Version: d.Version})
				if d.Watch != nil {
					d.Watch(b.ReplicaMetaChanged)
				}
			}
		}
	}
	return b, nil
}

// Module is the broker: send, pull, offsets, heartbeats, admin codes and
// name-server registration. It needs kernel.Module, kernel.StorageModule
// and at least one transport.
var Module = fx.Module("broker",
	fx.Provide(configFromPlan, newFromFx),
	fx.Invoke(func(lc fx.Lifecycle, b *Broker) {
		lc.Append(fx.Hook{
			OnStart: b.Start,
			OnStop:  func(ctx context.Context) error { return b.Stop(ctx) },
		})
	}),
)
