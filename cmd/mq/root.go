package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
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
func plugins() kernel.Plugins {
	return kernel.Plugins{
		Storage:   []store.Provider{commitlog.NewProvider(), pebblestore.NewProvider()},
		Transport: []transport.Provider{tcp.NewProvider(), quictransport.NewProvider(), natstransport.NewProvider()},
		Filter:    []filter.Provider{tag.NewProvider(), sql92.NewProvider()},
		Auth:      []auth.Provider{acl.NewProvider(), acl2.NewProvider()},
	}
}

// spec is role r of mq: the stock composition (server.Spec) with mq's
// plugins, mq's own sections (console, process) and, in mq dev, the
// console.
func spec(r role) kernel.Spec {
	s := server.Spec(r, plugins(), consoleSection, processSection)
	if r == roleDev {
		s.Components = append(s.Components, kernel.Component{Module: consoleModule}) // console.go
	}
	return s
}

// loadConfig merges file, environment and --set, then applies role
// defaults that depend on other keys; the plan (planConfig) checks it.
func loadConfig(g *globalFlags, r role) (*config.Config, error) {
	return server.Load(config.Options{File: g.configFile, Env: os.Environ(), Sets: g.sets}, r)
}

// planConfig loads the configuration of a server role and decodes and
// validates all of it (kernel.NewPlan) before anything is built: every
// problem comes back at once, one line each.
func planConfig(g *globalFlags, r role) (*kernel.Plan, error) {
	cfg, err := loadConfig(g, r)
	if err != nil {
		return nil, err
	}
	return kernel.NewPlan(cfg, spec(r))
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

func serverCmd(g *globalFlags, use, short string, r role) *cobra.Command {
	var devTLS bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(g, r)
			if err != nil {
				return err
			}
			if devTLS && !g.checkConfig {
				// Part of the configuration the plan checks (a check
				// creates nothing, so it plans without the certificate).
				if err := setupDevTLS(cfg, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			plan, err := kernel.NewPlan(cfg, spec(r))
			if err != nil {
				return err
			}
			if g.checkConfig {
				// The plan decoded and validated every section; the graph
				// is checked without running a constructor. Nothing is
				// opened, bound or created.
				if err := fx.ValidateApp(plan.Options()); err != nil {
					return rootCause(err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "configuration OK")
				return nil
			}
			if pc, ok := plan.Section("process").(*processConfig); ok && pc.MemoryLimit != 0 {
				applyProcess(pc, plan.Log.Logger())
			}
			// The app runs on this plan; a run restarted after a failover
			// plans the same configuration anew (server.Run).
			return explainStart(server.Run(cmd.Context(), plan), plan)
		},
	}
	if r == roleDev {
		cmd.Flags().BoolVar(&devTLS, "tls", false, "serve TCP with TLS, using a development certificate kept in <storage.dir>/tls")
	}
	addPprofFlag(cmd)
	return cmd
}

func pluginsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plugins",
		Short: "List the plugins compiled into this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			regs, err := plugins().Registries()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "storage:   %s\n", strings.Join(regs.Storage.IDs(), ", "))
			fmt.Fprintf(out, "transport: %s\n", strings.Join(regs.Transport.IDs(), ", "))
			fmt.Fprintf(out, "filter:    %s\n", strings.Join(regs.Filter.IDs(), ", "))
			fmt.Fprintf(out, "auth:      %s\n", strings.Join(regs.Auth.IDs(), ", "))
			return nil
		},
	}
}
