package controller

import (
	"context"
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/modules/namesrv"
)

type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Namesrv   *namesrv.Config
	Server    *namesrv.Server
	Logger    *slog.Logger
}

func register(p params) error {
	cfg := &p.Namesrv.Controller
	if !cfg.Enabled {
		return nil
	}
	c, err := New(cfg, p.Logger, DropOnChange(p.Server.Routes, p.Logger.With("component", "controller")))
	if err != nil {
		return err
	}
	c.Attach(p.Server)
	p.Lifecycle.Append(fx.Hook{OnStart: c.Start, OnStop: func(ctx context.Context) error { return c.Stop(ctx) }})
	return nil
}

// Module is the failover controller (compose it with namesrv.Module);
// it does nothing unless namesrv.controller.enabled.
var Module = fx.Module("controller",
	fx.Invoke(register),
)
