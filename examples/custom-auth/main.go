// Command custom-auth is a Quiver server with an auth plugin of its own,
// tokenauth, written against the declared auth.Authenticator and
// auth.Authorizer only: the stock name server and broker (package server),
// the stock plugins it wants (TCP, the commit log, TAG and SQL92 filters)
// and tokenauth, listed in the binary's kernel.Plugins beside the stock
// ACL plugin's place.
//
//	go build -o mq-token ./examples/custom-auth
//	./mq-token dev --set storage.dir=/tmp/q --set auth.token.enabled=true \
//		--set auth.token.tokens.alice=alice-token-1 --set auth.token.topics.alice=Orders \
//		--set auth.token.tokens.root=root-token-1 --set auth.token.admins=root
//
// and a producer of the official Go client sends with
//
//	producer.WithCredentials(primitive.Credentials{AccessKey: "alice", SecurityToken: "alice-token-1"})
//
// Subcommands are namesrv, broker and dev; --config and --set (repeatable)
// work as in mq, and so do QUIVER_ environment variables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/examples/custom-auth/tokenauth"
	"github.com/quivermq/quiver/plugins/filter/sql92"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/transport/tcp"
	"github.com/quivermq/quiver/server"
)

// plugins are what this binary carries: stock ones plus tokenauth.
func plugins() kernel.Plugins {
	return kernel.Plugins{Transport: []transport.Provider{tcp.NewProvider()}, Storage: []store.Provider{commitlog.NewProvider()},
		Filter: []filter.Provider{tag.NewProvider(), sql92.NewProvider()}, Auth: []auth.Provider{tokenauth.NewProvider()}}
}

var roles = map[string]server.Role{"namesrv": server.Namesrv, "broker": server.Broker, "dev": server.Dev}

// sets collects repeated --set flags.
type sets []string

func (s *sets) String() string     { return strings.Join(*s, ",") }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "custom-auth:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: custom-auth namesrv|broker|dev [--config file] [--set key=value ...]")
	}
	r, ok := roles[args[0]]
	if !ok {
		return fmt.Errorf("unknown subcommand %q (namesrv, broker, dev)", args[0])
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	file := fs.String("config", "", "YAML configuration file")
	var s sets
	fs.Var(&s, "set", "override a key: --set broker.listen=127.0.0.1:10911 (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// The plugin's section is auth.token, in the kernel's auth section:
	// the binary adds no top-level key of its own.
	cfg, err := server.Load(config.Options{File: *file, Env: os.Environ(), Sets: s}, r)
	if err != nil {
		return err
	}
	plan, err := kernel.NewPlan(cfg, server.Spec(r, plugins()))
	if err != nil {
		return err
	}
	return server.Run(ctx, plan)
}
