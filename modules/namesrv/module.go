package namesrv

import (
	"context"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/kernel"
)

// Module runs a name server: it decodes the namesrv section, builds the
// Server from the kernel's transports and logger, starts it with the app
// and stops it on shutdown.
var Module = fx.Module("namesrv",
	fx.Provide(NewConfigFrom, New),
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
	// <id>.namesrv_enabled (acl.namesrv_enabled) check here.
	p.Guard.ApplyNamesrv(p.Server.Router())
	p.Server.SetServerOptions(p.Remoting.ServerOptions())
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { return p.Server.Start(ctx) },
		OnStop:  func(ctx context.Context) error { return p.Server.Stop(ctx) },
	})
}
