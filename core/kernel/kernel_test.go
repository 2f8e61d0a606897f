package kernel_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
)

func quietLog() map[string]any { return map[string]any{"log.level": "error"} }

func withQuietLog(m map[string]any) map[string]any {
	for k, v := range quietLog() {
		m[k] = v
	}
	return m
}

// fakePlugins carries the fake transport and, when given, engines.
func fakePlugins(eng ...store.Provider) kernel.Plugins {
	return kernel.Plugins{Transport: []transport.Provider{newFakeTransport()}, Storage: eng}
}

// planApp plans give with the fake plugins and builds its app.
func planApp(t *testing.T, give map[string]any, ps kernel.Plugins, opts ...fx.Option) (*fx.App, error) {
	t.Helper()
	spec := kernel.Spec{Plugins: ps, Components: []kernel.Component{{Module: kernel.StorageModule}}}
	if len(ps.Storage) == 0 {
		spec.Components = nil
	}
	p, err := kernel.NewPlan(config.FromMap(withQuietLog(give)), spec)
	if err != nil {
		return nil, err
	}
	return fx.New(append([]fx.Option{fx.NopLogger, p.Options()}, opts...)...), nil
}

func TestModuleTransports(t *testing.T) {
	tests := []struct {
		name string
		give map[string]any
		want []string
	}{
		{name: "list", give: map[string]any{"transports": []any{"fake"}}, want: []string{"fake"}},
		{name: "env string", give: map[string]any{"transports": "fake"}, want: []string{"fake"}},
		{name: "with section", give: map[string]any{"transports": "fake", "transport.fake.window": 3}, want: []string{"fake"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var set *transport.Set
			app, err := planApp(t, tt.give, fakePlugins(), fx.Populate(&set))
			require.NoError(t, err)
			require.NoError(t, app.Err())
			require.NoError(t, app.Start(context.Background()))
			require.NoError(t, app.Stop(context.Background()))
			require.NotNil(t, set)
			assert.Equal(t, tt.want, set.IDs())
		})
	}
}

func TestModuleTransportErrors(t *testing.T) {
	tests := []struct {
		name string
		give map[string]any
		want string
	}{
		{name: "unknown", give: map[string]any{"transports": []any{"nope"}},
			want: `transports: unknown transport "nope" (registered: fake)`},
		{name: "default tcp not registered", give: map[string]any{},
			want: `transports: unknown transport "tcp" (registered: fake)`},
		{name: "listed twice", give: map[string]any{"transports": "fake;fake"},
			want: `transports: "fake" is listed twice`},
		{name: "unknown key in section", give: map[string]any{"transports": "fake", "transport.fake.windw": 3},
			want: `unknown key transport.fake.windw`},
		{name: "invalid section", give: map[string]any{"transports": "fake", "transport.fake.window": 0},
			want: `transport.fake: window must be positive`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := planApp(t, tt.give, fakePlugins())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestPlanDuplicatePlugin(t *testing.T) {
	_, err := planApp(t, map[string]any{}, kernel.Plugins{Filter: []filter.Provider{fakeFilter{}, otherFilter{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `kernel: filter plugin "tag" registered twice`)
	assert.Contains(t, err.Error(), "kernel_test.fakeFilter")
	assert.Contains(t, err.Error(), "kernel_test.otherFilter")
}

func TestModuleValidates(t *testing.T) {
	p, err := kernel.NewPlan(config.FromMap(withQuietLog(map[string]any{"transports": "fake"})),
		kernel.Spec{Plugins: fakePlugins(&fakeEngine{id: "commitlog"}), Components: []kernel.Component{{Module: kernel.StorageModule}}})
	require.NoError(t, err)
	require.NoError(t, fx.ValidateApp(p.Options(), fx.Invoke(func(*transport.Set, store.Store, *kernel.Guard, *kernel.Plan) {})))
}

func TestStorageModuleClosesStore(t *testing.T) {
	eng := &fakeEngine{id: "commitlog"}
	var st store.Store
	app, err := planApp(t, map[string]any{"transports": "fake", "storage.dir": t.TempDir()}, fakePlugins(eng), fx.Populate(&st))
	require.NoError(t, err)
	require.NoError(t, app.Err())
	require.NoError(t, app.Start(context.Background()))
	require.NotNil(t, eng.opened)
	assert.Same(t, eng.opened, st)
	assert.Zero(t, eng.opened.closed)
	require.NoError(t, app.Stop(context.Background()))
	assert.Equal(t, 1, eng.opened.closed)
}

// storageSpec is a spec of the storage engines eng (the fake pebble and
// commitlog by default).
func storageSpec(eng ...store.Provider) kernel.Spec {
	if len(eng) == 0 {
		eng = engines("pebble", "commitlog")
	}
	return kernel.Spec{Plugins: kernel.Plugins{Storage: eng}}
}

func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	eng := &fakeEngine{id: "pebble"}
	spec := storageSpec(eng, &fakeEngine{id: "commitlog"})
	cfg := config.FromMap(map[string]any{"storage": map[string]any{
		"engine": "pebble", "dir": dir, "flush": "sync", "flush_interval": "250ms", "retention": "1h",
		"max_message_size": "1MiB", "pebble": map[string]any{"segment_size": "64MiB"},
		// Another engine's section is allowed (and ignored).
		"commitlog": map[string]any{"segment_size": "1GiB"},
	}})
	st, err := kernel.OpenStore(context.Background(), cfg, spec, discardLogger())
	require.NoError(t, err)
	require.Same(t, eng.opened, st)
	assert.Equal(t, config.ByteSize(64<<20), eng.opened.cfg.SegmentSize)
	assert.Equal(t, store.Settings{Dir: dir, Flush: store.FlushSync, FlushInterval: 250 * time.Millisecond,
		Retention: time.Hour, MaxMessageSize: 1<<20 + store.RecordReserve}, eng.opened.deps.Settings)
}

func TestOpenStoreDefaults(t *testing.T) {
	eng := &fakeEngine{id: "commitlog"}
	st, err := kernel.OpenStore(context.Background(), config.FromMap(nil), storageSpec(eng), discardLogger())
	require.NoError(t, err)
	require.NotNil(t, st)
	def := kernel.DefaultStorageConfig()
	abs, err := filepath.Abs(def.Dir)
	require.NoError(t, err)
	assert.Equal(t, store.Settings{Dir: abs, Flush: store.FlushAsync, FlushInterval: def.FlushInterval,
		Retention: def.Retention, MaxMessageSize: int(def.MaxMessageSize) + store.RecordReserve}, eng.opened.deps.Settings)
	assert.Equal(t, config.ByteSize(1<<30), eng.opened.cfg.SegmentSize, "engine defaults from NewConfig")
}

func TestOpenStoreErrors(t *testing.T) {
	// A directory of the test's own: a fixed path such as /tmp/x may be
	// anything on a shared machine.
	dir := filepath.Join(t.TempDir(), "x")
	tests := []struct {
		name string
		give map[string]any
		open error
		want string
	}{
		{name: "unknown engine", give: map[string]any{"storage.engine": "pebel"},
			want: `storage.engine: unknown storage engine "pebel" (registered: commitlog, pebble)`},
		{name: "unknown key under storage", give: map[string]any{"storage.bogus": 1},
			want: `unknown key storage.bogus`},
		{name: "section of an unknown engine", give: map[string]any{"storage.pebel.segment_size": "1MiB"},
			want: `unknown key storage.pebel; did you mean storage.pebble?`},
		{name: "unknown key in engine section", give: map[string]any{"storage.commitlog.segment_sise": "1MiB"},
			want: `unknown key storage.commitlog.segment_sise`},
		{name: "invalid engine section", give: map[string]any{"storage.commitlog.segment_size": "1"},
			want: `storage.commitlog: segment_size must be at least 1KiB`},
		{name: "bad flush", give: map[string]any{"storage.flush": "sometimes"},
			want: `storage.flush: "sometimes" is neither async nor sync`},
		{name: "bad duration", give: map[string]any{"storage.retention": "3 fortnights"},
			want: `storage.retention:`},
		{name: "bad size", give: map[string]any{"storage.max_message_size": "4XB"},
			want: `storage.max_message_size: bad size "4XB"`},
		{name: "unknown section", give: map[string]any{"storag.dir": dir},
			want: `unknown section storag; did you mean storage?`},
		{name: "unknown sections", give: map[string]any{"a": 1, "z.y": 2},
			want: "unknown section a (known: auth, filter, log, remoting, storage, transport, transports)\nunknown section z (known: auth, filter, log, remoting, storage, transport, transports)"},
		{name: "open fails", give: map[string]any{"storage.dir": dir}, open: errors.New("boom"),
			want: "storage commitlog: open " + dir + ": boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := storageSpec(&fakeEngine{id: "commitlog", openErr: tt.open}, &fakeEngine{id: "pebble"})
			st, err := kernel.OpenStore(context.Background(), config.FromMap(tt.give), spec, discardLogger())
			require.Error(t, err)
			assert.Nil(t, st)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name    string
		give    map[string]any
		wantErr string
	}{
		{name: "defaults", give: map[string]any{}},
		{name: "json debug", give: map[string]any{"log.level": "debug", "log.format": "json"}},
		{name: "bad level", give: map[string]any{"log.level": "loud"}, wantErr: `log.level: "loud" is none of debug, info, warn, error`},
		{name: "bad format", give: map[string]any{"log.format": "xml"}, wantErr: `log.format: "xml" is neither text nor json`},
		{name: "unknown key", give: map[string]any{"log.colour": "yes"}, wantErr: "unknown key log.colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := kernel.NewLogger(config.FromMap(tt.give))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, l)
		})
	}
}

func TestNewRemotingConfig(t *testing.T) {
	rc, err := kernel.NewRemotingConfig(config.FromMap(nil))
	require.NoError(t, err)
	assert.Equal(t, config.ByteSize(transport.DefaultMaxFrameSize), rc.MaxFrameSize)
	assert.Equal(t, 1024, rc.MaxInFlight)

	rc, err = kernel.NewRemotingConfig(config.FromMap(map[string]any{"remoting.max_frame_size": "32MiB", "remoting.max_in_flight": "16"}))
	require.NoError(t, err)
	assert.Equal(t, config.ByteSize(32<<20), rc.MaxFrameSize)
	assert.Equal(t, 16, rc.MaxInFlight)

	_, err = kernel.NewRemotingConfig(config.FromMap(map[string]any{"remoting.max_frame_size": "512B"}))
	assert.EqualError(t, err, "config: remoting.max_frame_size: 512 is below 1KiB")
}
