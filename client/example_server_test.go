package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

// startExampleServer runs what `mq dev` runs — a name server and a broker —
// in this process, on free loopback ports and a temporary data directory,
// so that the examples have something to talk to. It returns the name
// server's address and a function that stops everything. In your own
// code, use the address of your name servers instead.
func startExampleServer() (nameServer string, stop func()) {
	dir, err := os.MkdirTemp("", "quiver-example-")
	if err != nil {
		log.Fatal(err)
	}
	nameServer, brokerAddr, metricsAddr := freeAddr(), freeAddr(), freeAddr()
	cfg, err := server.Load(config.Options{Sets: []string{
		"namesrv.listen=" + nameServer, "broker.listen=" + brokerAddr, "metrics.listen=" + metricsAddr,
		"storage.dir=" + filepath.Join(dir, "store"), "namesrv.kv_config_path=" + filepath.Join(dir, "kv.json"),
		"log.level=error",
	}}, server.Dev)
	if err != nil {
		log.Fatal(err)
	}
	plan, err := kernel.NewPlan(cfg, server.Spec(server.Dev, kernel.Plugins{Transport: []transport.Provider{tcp.NewProvider()},
		Storage: []store.Provider{commitlog.NewProvider()}, Filter: []filter.Provider{tag.NewProvider()}}))
	if err != nil {
		log.Fatal(err)
	}
	app := fx.New(plan.Options(), fx.NopLogger)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		log.Fatal(err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Stop(ctx); err != nil {
			log.Print(err)
		}
		os.RemoveAll(dir)
	}
	// Ready once the broker has registered with the name server.
	c, err := client.New(client.WithNameServers(nameServer), transports.WithDialer())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for {
		ci, err := admin.New(c).ClusterInfo(ctx)
		if err == nil && len(ci.Brokers) > 0 {
			return nameServer, stop
		}
		if ctx.Err() != nil {
			stop()
			log.Fatal(fmt.Errorf("example server: broker not registered: %v", err))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
