// Command outsidemq is a Quiver server built outside Quiver's module: the
// stock name server and broker (package server), TCP and QUIC, the commit
// log, the TAG filter, and the out-of-tree SUFFIX filter.
//
//	outsidemq dev|namesrv|broker [--config file.yaml]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"

	"example.com/quiver-outside/suffixfilter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outsidemq:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	roles := map[string]server.Role{"namesrv": server.Namesrv, "broker": server.Broker, "dev": server.Dev}
	if len(args) != 1 && (len(args) != 3 || args[1] != "--config") {
		return fmt.Errorf("usage: outsidemq dev|namesrv|broker [--config file.yaml]")
	}
	r, ok := roles[args[0]]
	if !ok {
		return fmt.Errorf("unknown role %q (dev, namesrv, broker)", args[0])
	}
	opts := config.Options{Env: os.Environ()}
	if len(args) == 3 {
		opts.File = args[2]
	}
	cfg, err := server.Load(opts, r)
	if err != nil {
		return err
	}
	plan, err := kernel.NewPlan(cfg, server.Spec(r, kernel.Plugins{
		Transport: []transport.Provider{tcp.NewProvider(), quictransport.NewProvider()},
		Storage:   []store.Provider{commitlog.NewProvider()},
		Filter:    []filter.Provider{tag.NewProvider(), suffixfilter.NewProvider()},
	}))
	if err != nil {
		return err
	}
	return server.Run(ctx, plan)
}
