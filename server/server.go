// Package server composes Quiver processes: a name server, a broker with
// its modules (schedule, retry, transactions), or both in one process,
// from the kernel, the stock modules and whatever plugins a binary
// carries. cmd/mq is one such binary; a plugin author builds another by
// passing the stock plugins they want plus their own, without touching
// Quiver's code (see examples/custom-filter). A role is a value (Spec);
// the plan is built from it once per start, before fx:
//
//	cfg, err := server.Load(config.Options{File: path, Env: os.Environ()}, server.Dev)
//	...
//	plan, err := kernel.NewPlan(cfg, server.Spec(server.Dev, kernel.Plugins{
//		Transport: []transport.Provider{tcp.NewProvider()}, ...}))
//	...
//	err = server.Run(ctx, plan)
//
// The package holds no plugin: which ones a binary carries is its choice.
package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/controller"
	"github.com/quivermq/quiver/modules/ha"
	"github.com/quivermq/quiver/modules/metrics"
	"github.com/quivermq/quiver/modules/mirror"
	"github.com/quivermq/quiver/modules/namesrv"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/modules/retry"
	"github.com/quivermq/quiver/modules/schedule"
	"github.com/quivermq/quiver/modules/transaction"
)

// Role is what a process serves.
type Role int

const (
	// Namesrv is a name server.
	Namesrv Role = iota
	// Broker is a broker with its modules.
	Broker
	// Dev is a name server and a broker in one process.
	Dev
)

// parts is the composition of role r, in start order: the one place that
// says which stock modules a role runs and which section each one reads.
func parts(r Role) []kernel.Component {
	names := []kernel.Component{{Section: &namesrv.ConfigSection, Module: namesrv.Module}, {Module: controller.Module}}
	brokers := func(metricsModule, grpcModule fx.Option) []kernel.Component {
		return []kernel.Component{{Module: kernel.StorageModule}, {Section: &broker.ConfigSection, Module: broker.Module},
			{Section: &ha.ConfigSection, Module: ha.Module}, {Section: &schedule.ConfigSection, Module: schedule.Module},
			{Section: &retry.ConfigSection, Module: retry.Module}, {Section: &transaction.ConfigSection, Module: transaction.Module},
			{Section: &metrics.ConfigSection, Module: metricsModule}, {Module: pop.Module},
			{Section: grpcSection, Module: grpcModule}, {Section: &mirror.ConfigSection, Module: mirror.Module}}
	}
	switch r {
	case Namesrv:
		return append(names, kernel.Component{Section: &metrics.ConfigSection, Module: metrics.Module})
	case Broker:
		return brokers(metrics.Module, grpcBrokerModule)
	case Dev:
		return append(names, brokers(metrics.DevModule, grpcDevModule)...)
	}
	return nil
}

// Spec is role r of a binary that carries plugins. Every role decodes the
// sections of every stock module and the binary's own (sections), so that
// one file serves every process; a broker needs broker.namesrv unless
// broker.standalone is true. A broker's storage engines apply a
// truncation a failover recorded before their store opens (ha.Truncating).
// Add a binary's own modules to the spec's Components.
func Spec(r Role, plugins kernel.Plugins, sections ...kernel.Section) kernel.Spec {
	for _, o := range []Role{Namesrv, Broker, Dev} {
		for _, c := range parts(o) {
			if c.Section != nil {
				sections = append(sections, *c.Section)
			}
		}
	}
	spec := kernel.Spec{Plugins: plugins, Components: parts(r), Sections: sections}
	if r != Namesrv {
		spec.Plugins.Storage = ha.Truncating(plugins.Storage)
	}
	if r == Broker {
		spec.Check = needNamesrv
	}
	return spec
}

// needNamesrv refuses a broker that would register with no name server.
func needNamesrv(p *kernel.Plan) []kernel.Problem {
	if bc, ok := p.Section("broker").(*broker.Config); ok && bc != nil && len(bc.Namesrv) == 0 && !bc.Standalone {
		return []kernel.Problem{{Key: "broker.namesrv", Subject: true,
			Msg: "is empty: the broker would register with no name server and no client could find it (list the name servers, or set broker.standalone: true)"}}
	}
	return nil
}

// EnvKeep says whether an environment key (QUIVER_BROKER__LISTEN read as
// broker.listen) is server configuration: any key with a section (a
// variable with __; one in an unknown section is then refused with the
// rest of the configuration), or the top-level list transports. Other
// QUIVER_ variables, such as QUIVER_NAMESRV for mq admin, are left to the
// tools that read them.
func EnvKeep(key string) bool {
	top, rest, nested := strings.Cut(key, ".")
	if !nested {
		return top == "transports"
	}
	return top != "" && rest != ""
}

// Load merges file, environment and --set values (config.Load) and
// applies the defaults of role r that depend on other keys (a Dev broker
// registers with its own name server). kernel.NewPlan checks the result.
func Load(o config.Options, r Role) (*config.Config, error) {
	if o.EnvKeep == nil {
		o.EnvKeep = EnvKeep
	}
	cfg, err := config.Load(o)
	if err != nil {
		return nil, err
	}
	if r == Dev && len(cfg.Strings("broker.namesrv")) == 0 {
		ns := cfg.String("namesrv.listen")
		if ns == "" {
			ns = namesrv.NewConfig().Listen
		}
		cfg.Set("broker.namesrv", []any{ns})
	}
	if r == Dev && !cfg.Exists("namesrv.kv_config_path") {
		// mq dev keeps everything under storage.dir (./data), the name
		// server's KV config included, not in ./namesrv beside it.
		dir := cfg.String("storage.dir")
		if dir == "" {
			dir = kernel.DefaultStorageConfig().Dir
		}
		cfg.Set("namesrv.kv_config_path", filepath.Join(dir, "namesrv", "kvConfig.json"))
	}
	return cfg, nil
}

// Run starts the application of plan, waits for ctx (cancel it on SIGINT
// and SIGTERM) and stops it; opts are added to the app (fx.NopLogger). An
// app that shuts itself down with ha.RestartExitCode (automatic failover:
// its commit log must be truncated, which happens before the store opens)
// is stopped and started again from a new plan of the same configuration
// and spec, so that nothing the previous run changed in its modules'
// settings carries over; another shutdown from inside stops Run.
func Run(ctx context.Context, plan *kernel.Plan, opts ...fx.Option) error {
	for {
		restart, err := runOnce(ctx, fx.Options(append([]fx.Option{plan.Options()}, opts...)...))
		if err != nil || !restart || ctx.Err() != nil {
			return err
		}
		if plan, err = kernel.NewPlan(plan.Config, plan.Spec); err != nil {
			return err
		}
	}
}

func runOnce(ctx context.Context, opts fx.Option) (restart bool, err error) {
	app := fx.New(opts)
	if err := app.Err(); err != nil {
		return false, err
	}
	startCtx, cancel := context.WithTimeout(ctx, app.StartTimeout())
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return false, err
	}
	var code int
	select {
	case <-ctx.Done():
	case sig := <-app.Wait():
		code = sig.ExitCode
	}
	stopCtx, cancel2 := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancel2()
	if err := app.Stop(stopCtx); err != nil {
		return false, err
	}
	switch {
	case ctx.Err() != nil, code == 0:
		return false, nil
	case code == ha.RestartExitCode:
		return true, nil
	}
	return false, fmt.Errorf("server: the app shut down with code %d", code)
}
