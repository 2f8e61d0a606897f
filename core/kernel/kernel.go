// Package kernel assembles a Quiver process: it decodes and checks the
// whole configuration of a role (a Spec: its plugins and components) into
// a Plan before anything is built, then turns the plan into an fx
// application that opens the plugins the plan selected. It is the only
// core package that imports fx.
package kernel

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/retention"
	"github.com/quivermq/quiver/core/transport"
)

// Registry aliases for the four seams.
type (
	StorageRegistry   = Registry[store.Provider]
	TransportRegistry = Registry[transport.Provider]
	FilterRegistry    = Registry[filter.Provider]
	AuthRegistry      = Registry[auth.Provider]
)

// LogConfig is the log section.
type LogConfig struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// RemotingConfig is the remoting section.
type RemotingConfig struct {
	MaxFrameSize config.ByteSize `koanf:"max_frame_size"`
	MaxInFlight  int             `koanf:"max_in_flight"`
	// MaxConnections and MaxConnectionsPerIP bound each server's open
	// connections (0 = unbounded).
	MaxConnections      int `koanf:"max_connections"`
	MaxConnectionsPerIP int `koanf:"max_connections_per_ip"`
}

// ServerOptions turns the remoting section into server options.
func (rc RemotingConfig) ServerOptions() remoting.ServerOptions {
	return remoting.ServerOptions{
		Peer:     remoting.PeerOptions{MaxInFlight: rc.MaxInFlight},
		MaxConns: rc.MaxConnections, MaxConnsPerHost: rc.MaxConnectionsPerIP,
	}
}

// StorageConfig is the engine-independent part of the storage section.
type StorageConfig struct {
	Engine         string          `koanf:"engine"`
	Dir            string          `koanf:"dir"`
	Flush          string          `koanf:"flush"`
	FlushInterval  time.Duration   `koanf:"flush_interval"`
	Retention      time.Duration   `koanf:"retention"`
	MaxMessageSize config.ByteSize `koanf:"max_message_size"`
	// CleanAt are the hours expired data is deleted at ("04", "04;16").
	CleanAt string `koanf:"clean_at"`
	// DiskMaxUsedRatio deletes oldest data first, at any hour, while the
	// store's disk is used above it (0 disables); used as df's Use% and
	// Java's diskMaxUsedSpaceRatio read it (retention.UsedRatio).
	DiskMaxUsedRatio float64 `koanf:"disk_max_used_ratio"`
}

// DefaultStorageConfig returns the storage defaults.
func DefaultStorageConfig() StorageConfig {
	return StorageConfig{Engine: "commitlog", Dir: "./data", Flush: "async", FlushInterval: 500 * time.Millisecond, Retention: 72 * time.Hour, MaxMessageSize: 4 << 20,
		CleanAt: "04", DiskMaxUsedRatio: 0.75}
}

// NewLogger builds the process logger from log.level and log.format (the
// plan's check of the log section, for tools that open no application).
func NewLogger(cfg *config.Config) (*slog.Logger, error) {
	pl := &planner{cfg: cfg}
	lc := pl.planLog()
	if len(pl.problems) > 0 {
		return nil, &PlanError{Problems: pl.problems}
	}
	return lc.Logger(), nil
}

// Logger is the process logger the (checked) log section describes.
func (lc LogConfig) Logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(lc.Level)) // checked by planLog
	opts := &slog.HandlerOptions{Level: lvl}
	if lc.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// NewRemotingConfig decodes the remoting section.
func NewRemotingConfig(cfg *config.Config) (RemotingConfig, error) {
	rc := RemotingConfig{MaxFrameSize: transport.DefaultMaxFrameSize, MaxInFlight: 1024, MaxConnections: 10000, MaxConnectionsPerIP: 1000}
	if err := cfg.Decode("remoting", &rc); err != nil {
		return rc, err
	}
	if rc.MaxConnections < 0 || rc.MaxConnectionsPerIP < 0 || rc.MaxInFlight < 1 {
		return rc, fmt.Errorf("config: remoting: max_connections and max_connections_per_ip must not be negative, max_in_flight must be positive")
	}
	if rc.MaxFrameSize < 1024 {
		return rc, fmt.Errorf("config: remoting.max_frame_size: %d is below 1KiB", rc.MaxFrameSize)
	}
	return rc, nil
}

var storageSharedKeys = []string{"engine", "dir", "flush", "flush_interval", "retention", "max_message_size", "clean_at", "disk_max_used_ratio"}

// OpenStore opens the engine of spec named by storage.engine with its
// section storage.<engine>, for tools that open a store without an
// application (mq store verify, mq store migrate): it plans the storage
// section, where other engines' sections may be set too (migrate reads
// two), and refuses top-level keys spec does not own (a broker's file may
// hold any of its sections). It refuses a directory another engine wrote
// (EngineMismatchError).
func OpenStore(ctx context.Context, cfg *config.Config, spec Spec, log *slog.Logger) (store.Store, error) {
	regs, err := spec.Plugins.Registries()
	if err != nil {
		return nil, err
	}
	pl := &planner{cfg: cfg}
	p := &Plan{Config: cfg}
	pl.planStorage(p, regs.Storage, false)
	pl.checkTopLevel(spec.TopLevel())
	if len(pl.problems) > 0 {
		return nil, &PlanError{Problems: pl.problems}
	}
	return openStore(ctx, p.Storage, log)
}

// openStore checks the directory's engine, opens the store and records
// the engine in the directory.
func openStore(ctx context.Context, sc StorageSettings, log *slog.Logger) (store.Store, error) {
	id := sc.Engine.ID()
	if err := checkEngine(sc.Dir, id, sc.engines); err != nil {
		return nil, err
	}
	deps := store.Deps{
		Logger: log.With("component", "storage."+id),
		Settings: store.Settings{Dir: sc.Dir, Flush: store.FlushMode(sc.Flush), FlushInterval: sc.FlushInterval,
			Retention: sc.Retention, MaxMessageSize: int(sc.MaxMessageSize) + store.RecordReserve},
	}
	st, err := sc.Engine.Open(ctx, sc.EngineConfig, deps)
	if err != nil {
		return nil, fmt.Errorf("storage %s: open %s: %w", id, sc.Dir, err)
	}
	if err := markEngine(sc.Dir, id); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// Module provides, from the supplied plan, the logger, the remoting
// settings, the guard and the enabled transports. The store is provided
// by StorageModule so processes without one (mq namesrv) never open it.
var Module = fx.Module("kernel",
	fx.Provide(func(p *Plan) *slog.Logger { return p.Log.Logger() }, NewGuard,
		func(p *Plan) RemotingConfig { return p.Remoting },
		func(p *Plan, log *slog.Logger) *transport.Set {
			return transport.NewSet(p.Transports, p.TransportConfigs, transport.Deps{Logger: log.With("component", "transport"), MaxFrameSize: int(p.Remoting.MaxFrameSize)})
		}),
)

// StorageModule opens the configured store and closes it on stop. It
// locks storage.dir first (the lock file names this process, so a second
// one is told which process holds it) and refuses a directory another
// engine wrote.
var StorageModule = fx.Module("kernel.storage",
	fx.Provide(func(lc fx.Lifecycle, p *Plan, log *slog.Logger) (store.Store, *retention.Cleaner, error) {
		sc := p.Storage
		unlock, err := lockDir(sc.Dir)
		if err != nil {
			return nil, nil, err
		}
		st, err := openStore(context.Background(), sc, log)
		if err != nil {
			unlock()
			return nil, nil, err
		}
		lc.Append(fx.StopHook(func() error { defer unlock(); return st.Close() }))
		cl := retention.New(st, retention.Config{Retention: sc.Retention, CleanAt: sc.CleanHours, MaxUsedRatio: sc.DiskMaxUsedRatio, Dir: sc.Dir},
			log.With("component", "storage.retention"))
		// Appended after the store's hook, so it stops before the store closes.
		lc.Append(fx.StartStopHook(cl.Start, cl.Stop))
		return st, cl, nil
	}),
)
