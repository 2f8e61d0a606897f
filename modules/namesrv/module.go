package namesrv

import (
	"context"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
)

// ConfigSection is the namesrv section, decoded by the kernel's plan.
var ConfigSection = kernel.Section{Key: "namesrv", Decode: func(c *config.Config) (any, error) { return NewConfigFrom(c) }}

func configFromPlan(p *kernel.Plan) (*Config, error) { return kernel.Setting[*Config](p, "namesrv") }

// Module runs a name server: it decodes the namesrv section, builds the
// Server from the kernel's transports and logger, starts it with the app
// and stops it on shutdown.
var Module = fx.Module("namesrv",
	fx.Provide(configFromPlan, New),
	fx.Invoke(registerLifecycle),
)

// Params are what the lifecycle hook needs.
type Params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Server    *Server
	Guard     *kernel.Guard         `optional:"true"`
	Remoting  kernel.RemotingConfig `optional:"true"`
}

func registerLifecycle(p Params) {
	// A 4.9 name server checks nothing: only plugins with
	// <id>.namesrv_enabled (auth.acl.namesrv_enabled) check here.
	p.Guard.ApplyNamesrv(p.Server.Router())
	p.Server.SetServerOptions(p.Remoting.ServerOptions())
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { return p.Server.Start(ctx) },
		OnStop:  func(ctx context.Context) error { return p.Server.Stop(ctx) },
	})
}
