// Package server composes Quiver processes: a name server, a broker with
// its modules (schedule, retry, transactions), or both in one process,
// from the kernel, the stock modules and whatever plugins a binary
// carries. cmd/mq is one such binary; a plugin author builds another by
// passing the stock plugins they want plus their own fx.Module, without
// touching Quiver's code (see examples/custom-filter):
//
//	cfg, err := server.LoadConfig(config.Options{File: path, Env: os.Environ()}, server.Dev)
//	...
//	err = server.Run(ctx, server.Options(cfg, server.Dev,
//		tcp.Module, commitlog.Module, tag.Module, sql92.Module, myfilter.Module))
//
// The package holds no plugin: which ones a binary carries is its choice.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

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

// Sections returns the top-level configuration keys the kernel and the
// stock modules own. Plugins configure themselves under them
// (transport.<id>, storage.<id>, filter.<id>, auth.<id>).
func Sections() []string {
	keys := kernel.Sections()
	for _, sec := range ModuleSections() {
		keys = append(keys, sec.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// part is one stock module of a role and the configuration section it
// owns (nil when it owns none).
type part struct {
	section *kernel.Section
	module  fx.Option
}

// parts is the composition of role r, in start order: the one place that
// says which stock modules a role runs and which section each one reads.
// Sections, ModuleSections, Plan and Options all derive from it.
func parts(r Role) []part {
	names := []part{{&namesrv.ConfigSection, namesrv.Module}, {nil, controller.Module}}
	brokers := func(metricsModule, grpcModule fx.Option) []part {
		return []part{{nil, kernel.StorageModule}, {nil, ha.StorageDecorator}, {&broker.ConfigSection, broker.Module},
			{&ha.ConfigSection, ha.Module}, {&schedule.ConfigSection, schedule.Module}, {&retry.ConfigSection, retry.Module},
			{&transaction.ConfigSection, transaction.Module}, {&metrics.ConfigSection, metricsModule}, {nil, pop.Module},
			{grpcSection, grpcModule}, {&mirror.ConfigSection, mirror.Module}}
	}
	switch r {
	case Namesrv:
		return append(names, part{&metrics.ConfigSection, metrics.Module})
	case Broker:
		return brokers(metrics.Module, grpcBrokerModule)
	case Dev:
		return append(names, brokers(metrics.DevModule, grpcDevModule)...)
	}
	return nil
}

// EnvKeep says whether an environment key (QUIVER_BROKER__LISTEN read as
// broker.listen) is server configuration: any key with a section (a
// variable with __; one in an unknown section is then refused with the
// rest of the configuration), or the top-level list transports. Other
// QUIVER_ variables, such as QUIVER_NAMESRV for mq admin, are left to the
// tools that read them.
func EnvKeep(key string, sections []string) bool {
	top, rest, nested := strings.Cut(key, ".")
	if !nested {
		return top == "transports"
	}
	return top != "" && rest != ""
}

// LoadConfig merges file, environment and --set values (config.Load),
// applies the defaults of role r that depend on other keys (a Dev broker
// registers with its own name server), and refuses top-level keys that
// are neither Sections nor one of extra (sections a binary's plugins own).
func LoadConfig(o config.Options, r Role, extra ...string) (*config.Config, error) {
	cfg, err := Load(o, r)
	if err != nil {
		return nil, err
	}
	if err := kernel.CheckTopLevel(cfg, append(Sections(), extra...)); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Load is LoadConfig without the check of top-level keys: Plan makes it,
// with every other check, at once.
func Load(o config.Options, r Role) (*config.Config, error) {
	if o.EnvKeep == nil {
		o.EnvKeep = func(key string) bool { return EnvKeep(key, Sections()) }
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

// ModuleSections are the configuration sections of every stock module,
// whichever role runs them (one file may serve every process): every
// process decodes and checks all of them, before fx (Plan) and inside it
// (Options), so --check-config refuses what a start would.
func ModuleSections() []kernel.Section {
	var out []kernel.Section
	seen := map[string]bool{}
	for _, r := range []Role{Namesrv, Broker, Dev} {
		for _, p := range parts(r) {
			if p.section != nil && !seen[p.section.Key] {
				seen[p.section.Key] = true
				out = append(out, *p.section)
			}
		}
	}
	slices.SortFunc(out, func(a, b kernel.Section) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Plan decodes and validates the whole configuration of role r before
// anything is built or opened (mq --check-config, and every start): the
// kernel's sections, every section of the plugins that plugins provide
// and of every stock module, and the top-level keys (Sections, plus extra
// for a binary's own). A broker needs broker.namesrv unless
// broker.standalone is true. It returns every problem at once, in a
// *kernel.PlanError.
func Plan(cfg *config.Config, r Role, plugins fx.Option, extra ...kernel.Section) (*kernel.Plan, error) {
	regs, err := kernel.LoadRegistries(cfg, plugins)
	if err != nil {
		return nil, err
	}
	secs := append(ModuleSections(), extra...)
	known := kernel.KnownSections(Sections())
	p, err := kernel.NewPlan(cfg, regs, secs, known)
	var pe *kernel.PlanError
	if err != nil && !errors.As(err, &pe) {
		return nil, err
	}
	if r == Broker && p != nil {
		if bc, ok := p.Section("broker").(*broker.Config); ok && bc != nil && len(bc.Namesrv) == 0 && !bc.Standalone {
			if pe == nil {
				pe = &kernel.PlanError{}
			}
			pe.Problems = append(pe.Problems, kernel.Problem{Key: "broker.namesrv",
				Msg: "is empty: the broker would register with no name server and no client could find it (list the name servers, or set broker.standalone: true)"})
		}
	}
	if pe != nil {
		return p, pe
	}
	return p, nil
}

// Options composes the fx graph of role r on cfg. extra carries the
// binary's plugins (each plugin's Module) and any other options; a broker
// needs at least one transport and one storage engine, a name server one
// transport.
func Options(cfg *config.Config, r Role, extra ...fx.Option) fx.Option {
	opts := []fx.Option{
		kernel.Supply(cfg),
		kernel.Module,
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log.With("component", "fx")}
			l.UseLogLevel(slog.LevelDebug)
			// fx's failures are the caller's to report (mq prints one
			// line per problem); their chain is for debugging.
			l.UseErrorLevel(slog.LevelDebug)
			return l
		}),
		fx.StartTimeout(30 * time.Second),
		fx.StopTimeout(30 * time.Second),
	}
	for _, sec := range ModuleSections() {
		opts = append(opts, kernel.AsSection(sec))
	}
	for _, p := range parts(r) {
		opts = append(opts, p.module)
	}
	return fx.Options(append(opts, extra...)...)
}

// Run starts the app opts describes, waits for ctx (cancel it on SIGINT
// and SIGTERM) and stops it. An app that shuts itself down with
// ha.RestartExitCode (automatic failover: its commit log must be
// truncated, which happens before the store opens) is stopped and started
// again; another shutdown from inside stops Run.
func Run(ctx context.Context, opts fx.Option) error {
	for {
		restart, err := runOnce(ctx, opts)
		if err != nil || !restart || ctx.Err() != nil {
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
