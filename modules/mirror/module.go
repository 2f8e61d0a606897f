package mirror

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/modules/broker"
)

// ConfigSection is the mirror section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "mirror", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

type params struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Plan       *kernel.Plan
	Transports *transport.Set
	Logger     *slog.Logger
}

// Module runs the links of the mirror section in the process (a broker's,
// typically the edge broker forwarding to the central cluster); it dials
// both clusters with the process's transports. Without links it does
// nothing. It provides the *Service (nil without links) and its metrics
// collector to the metrics module (value group metrics.collectors).
var Module = fx.Module("mirror",
	fx.Provide(func(p params) (*Service, error) {
		cfg, err := kernel.Setting[*Config](p.Plan, "mirror")
		if err != nil {
			return nil, err
		}
		if len(cfg.Links) == 0 {
			return nil, nil
		}
		// A link without a source reads the cluster of this broker.
		if bc, err := kernel.Setting[*broker.Config](p.Plan, "broker"); err == nil && bc != nil {
			for i := range cfg.Links {
				if len(cfg.Links[i].Source.Namesrv) == 0 {
					cfg.Links[i].Source.Namesrv = bc.Namesrv
				}
			}
		}
		s, err := New(cfg, Deps{Dial: func(ctx context.Context, addr string) (transport.Conn, error) { return p.Transports.Dial(ctx, addr) }, Logger: p.Logger})
		if err != nil {
			return nil, err
		}
		p.Lifecycle.Append(fx.Hook{OnStart: s.Start, OnStop: s.Stop})
		return s, nil
	}),
	fx.Invoke(func(*Service) {}),
	// The metrics module serves it with the broker's series.
	fx.Provide(fx.Annotate(func(s *Service) prometheus.Collector { return s.Collector() }, fx.ResultTags(`group:"metrics.collectors"`))),
)
