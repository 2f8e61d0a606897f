package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
	"github.com/quivermq/quiver/plugins/filter/sql92"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

// sections are the top-level configuration keys some part of mq owns (acl
// is the old spelling of auth.acl).
var sections = []string{"acl", "auth", "broker", "console", "filter", "grpc", "log", "metrics", "namesrv", "process", "remoting", "retry", "schedule", "storage", "transaction", "transport", "transports"}

type globalFlags struct {
	configFile  string
	sets        []string
	checkConfig bool
}

func newRootCmd() *cobra.Command {
	// mqadmin finds a command whatever its case (MQAdminStartup compares
	// upper-cased names): mq admin updatetopic and UPDATETOPIC work. The
	// setting is cobra's, for the whole binary.
	cobra.EnableCaseInsensitive = true
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "mq",
		Short:         "Quiver: a RocketMQ-compatible message queue in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.configFile, "config", "", "YAML configuration file")
	root.PersistentFlags().StringArrayVar(&g.sets, "set", nil, "override a key: --set broker.listen=127.0.0.1:10911 (repeatable)")
	root.PersistentFlags().BoolVar(&g.checkConfig, "check-config", false, "validate the configuration and exit")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return refuseServerFlags(cmd) }
	root.AddCommand(
		serverCmd(g, "namesrv", "Run a name server", roleNamesrv),
		serverCmd(g, "broker", "Run a broker", roleBroker),
		serverCmd(g, "dev", "Run a name server and a broker in one process (data in ./data)", roleDev),
		pluginsCmd(),
		benchCmd(),
		adminCmd(),
		consoleCmd(),
		storeCmd(g),
		versionCmd(),
	)
	return root
}

// role is what a server subcommand runs. The composition lives in
// package server so that custom binaries (examples/custom-filter) reuse
// it; mq adds its plugins.
type role = server.Role

const (
	roleNamesrv = server.Namesrv
	roleBroker  = server.Broker
	roleDev     = server.Dev
)

// plugins are the stock plugins every mq binary carries.
func plugins() fx.Option {
	return fx.Options(tcp.Module, quictransport.Module, natstransport.Module, commitlog.Module, pebblestore.Module, tag.Module, sql92.Module, acl.Module, acl2.Module)
}

// loadConfig merges file, environment and --set, then applies role
// defaults that depend on other keys.
func loadConfig(g *globalFlags, r role) (*config.Config, error) {
	return server.LoadConfig(config.Options{File: g.configFile, Env: os.Environ(), Sets: g.sets}, r, sections...)
}

// planConfig loads the configuration of a server role and decodes and
// validates all of it (server.Plan) before anything is built: every
// problem comes back at once, one line each.
func planConfig(g *globalFlags, r role) (*config.Config, *kernel.Plan, error) {
	cfg, err := server.Load(config.Options{File: g.configFile, Env: os.Environ(), Sets: g.sets}, r)
	if err != nil {
		return nil, nil, err
	}
	plan, err := server.Plan(cfg, r, plugins(), consoleSection, processSection)
	if err != nil {
		return nil, nil, err
	}
	return cfg, plan, nil
}

// consoleSection is mq's own section (the console of mq dev).
var consoleSection = kernel.Section{Key: "console", Decode: func(c *config.Config) (any, error) {
	cc := &consoleConfig{Admin: true}
	if err := c.Decode("console", cc); err != nil {
		return cc, err
	}
	return cc, nil
}}

// serverFlags are the persistent flags only the commands that read the
// server configuration use (namesrv, broker, dev, store).
var serverFlags = []string{"config", "set", "check-config"}

// refuseServerFlags refuses --config, --set and --check-config given to a
// command that reads no configuration (mq admin, bench, plugins, console,
// version), which would otherwise ignore them.
func refuseServerFlags(cmd *cobra.Command) error {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	switch top.Name() {
	case "namesrv", "broker", "dev", "store", "help", "completion", "mq":
		return nil
	}
	for _, name := range serverFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return usagef("mq %s does not read --%s (it configures servers: mq namesrv, broker, dev and store); see mq %s --help for its own flags", top.Name(), name, top.Name())
		}
	}
	return nil
}

// appOptions composes the fx graph of a role (server.Options) with mq's
// plugins.
func appOptions(cfg *config.Config, r role, extra ...fx.Option) fx.Option {
	if r == roleDev {
		extra = append(extra, consoleOption(cfg)) // console.go
	}
	return server.Options(cfg, r, append([]fx.Option{plugins()}, extra...)...)
}

func serverCmd(g *globalFlags, use, short string, r role) *cobra.Command {
	var devTLS bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, plan, err := planConfig(g, r)
			if err != nil {
				return err
			}
			if g.checkConfig {
				// The plan decoded and validated every section; the graph
				// is checked without running a constructor. Nothing is
				// opened, bound or created.
				if err := fx.ValidateApp(appOptions(cfg, r)); err != nil {
					return rootCause(err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "configuration OK")
				return nil
			}
			if pc, ok := plan.Section("process").(*processConfig); ok && pc.MemoryLimit != 0 {
				log, err := kernel.NewLogger(cfg)
				if err != nil {
					return err
				}
				applyProcess(pc, log)
			}
			if devTLS {
				if err := setupDevTLS(cfg, plan.Storage.Dir, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			// The app plans cfg again inside the graph, once per run: --tls
			// changed cfg above, and a run restarted after a failover must
			// not see the module configs the previous run changed.
			return explainStart(run(cmd.Context(), appOptions(cfg, r)), plan)
		},
	}
	if r == roleDev {
		cmd.Flags().BoolVar(&devTLS, "tls", false, "serve TCP with TLS, using a development certificate kept in <storage.dir>/tls")
	}
	addPprofFlag(cmd)
	return cmd
}

// run starts the app, waits for ctx (SIGINT/SIGTERM) and stops it.
func run(ctx context.Context, opts fx.Option) error { return server.Run(ctx, opts) }

func pluginsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plugins",
		Short: "List the plugins compiled into this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st *kernel.StorageRegistry
			var tr *kernel.TransportRegistry
			var fl *kernel.FilterRegistry
			var au *kernel.AuthRegistry
			cfg := config.FromMap(map[string]any{})
			app := fx.New(kernel.Supply(cfg), kernel.Module, plugins(), fx.NopLogger, fx.Populate(&st, &tr, &fl, &au))
			if err := app.Err(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "storage:   %s\n", strings.Join(st.IDs(), ", "))
			fmt.Fprintf(out, "transport: %s\n", strings.Join(tr.IDs(), ", "))
			fmt.Fprintf(out, "filter:    %s\n", strings.Join(fl.IDs(), ", "))
			fmt.Fprintf(out, "auth:      %s\n", strings.Join(au.IDs(), ", "))
			return nil
		},
	}
}
