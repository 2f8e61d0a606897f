package kernel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
)

type moduleConfig struct {
	Listen string `koanf:"listen"`
	Limit  int    `koanf:"limit"`
}

var moduleSection = kernel.Section{Key: "mod", Decode: func(c *config.Config) (any, error) {
	mc := &moduleConfig{Listen: "127.0.0.1:1", Limit: 1}
	if err := c.Decode("mod", mc); err != nil {
		return mc, err
	}
	var errs config.Errors
	if mc.Limit < 1 {
		errs.Add("mod.limit", "%d must be positive", mc.Limit)
	}
	return mc, errs.Err()
}}

// planSpec is a spec of the fake engines and moduleSection.
func planSpec() kernel.Spec {
	return kernel.Spec{Plugins: kernel.Plugins{Storage: engines("pebble", "commitlog"), Transport: []transport.Provider{fakeTransport{id: "tcp"}}}, Sections: []kernel.Section{moduleSection}}
}

// TestPlanReportsEveryProblem: one pass collects the problems of every
// section, each with its key, a suggestion for typos and the layer that
// set it; a module section's known keys are checked even when a typo
// made its strict decode fail.
func TestPlanReportsEveryProblem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "q.yaml")
	require.NoError(t, os.WriteFile(file, []byte("mod:\n  limt: 3\n  limit: 0\nstorage:\n  flush: sometimes\n"), 0o600))
	cfg, err := config.Load(config.Options{File: file,
		Env:  []string{"QUIVER_STORAGE__RETENTION=-1h", "QUIVER_MDO__X=1"},
		Sets: []string{"storage.pebble.segment_size=1MiB", "storage.dirr=x"}})
	require.NoError(t, err)
	_, err = kernel.NewPlan(cfg, planSpec())
	var pe *kernel.PlanError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, strings.Join([]string{
		"unknown section mdo; did you mean mod? (from environment variable QUIVER_MDO__X)",
		"mod.limit: 0 must be positive (in " + file + ")",
		"unknown key mod.limt; did you mean mod.limit? (in " + file + ")",
		"unknown key storage.dirr; did you mean storage.dir? (from --set)",
		`storage.flush: "sometimes" is neither async nor sync (in ` + file + ")",
		"storage.pebble is set but storage.engine is commitlog: its keys do nothing (remove them, or set storage.engine: pebble) (from --set)",
		"storage.retention: -1h must not be negative (from environment variable QUIVER_STORAGE__RETENTION)",
	}, "\n"), pe.Error())
}

func TestPlanSettings(t *testing.T) {
	cfg := config.FromMap(map[string]any{"mod.limit": 5, "storage.dir": "rel", "storage.retention": "1h"})
	p, err := kernel.NewPlan(cfg, planSpec())
	require.NoError(t, err)
	mc, err := kernel.Setting[*moduleConfig](p, "mod")
	require.NoError(t, err)
	assert.Equal(t, 5, mc.Limit)
	abs, _ := filepath.Abs("rel")
	assert.Equal(t, abs, p.Storage.Dir, "storage.dir is absolute, once")
	assert.Equal(t, "commitlog", p.Storage.Engine.ID())
	assert.Equal(t, "mod.listen", p.AddrKey("127.0.0.1:1"))
	assert.Equal(t, "", p.AddrKey("127.0.0.1:2"))
	_, err = kernel.Setting[*moduleConfig](p, "other")
	assert.Error(t, err)
}

// TestEngineGuard: a directory one engine wrote is refused by the other,
// whether the engine file says so or only the engine's directory does.
func TestEngineGuard(t *testing.T) {
	dir := t.TempDir()
	spec := storageSpec(&fakeEngine{id: "commitlog"}, &fakeEngine{id: "pebble"})
	open := func(engine string) error {
		cfg := config.FromMap(map[string]any{"storage.dir": dir, "storage.engine": engine})
		st, err := kernel.OpenStore(context.Background(), cfg, spec, discardLogger())
		if err == nil {
			require.NoError(t, st.Close())
		}
		return err
	}
	require.NoError(t, open("commitlog"))
	b, err := os.ReadFile(filepath.Join(dir, kernel.EngineFile))
	require.NoError(t, err)
	assert.Equal(t, "commitlog\n", string(b))
	var me *kernel.EngineMismatchError
	require.ErrorAs(t, open("pebble"), &me)
	assert.Equal(t, "commitlog", me.Found)
	require.NoError(t, open("commitlog"))

	// Without the engine file, the engine's directory tells.
	old := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(old, "pebble"), 0o755))
	cfg := config.FromMap(map[string]any{"storage.dir": old, "storage.engine": "commitlog"})
	_, err = kernel.OpenStore(context.Background(), cfg, spec, discardLogger())
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "pebble", me.Found)
	assert.Contains(t, err.Error(), "mq store migrate --from-engine pebble --from "+old+" --to-engine commitlog")
	assert.False(t, errors.Is(err, store.ErrBadArgument))
}

// TestProblemString: a problem's producer says its form (Unknown,
// Subject, no key); the words of its message decide nothing.
func TestProblemString(t *testing.T) {
	tests := []struct {
		give kernel.Problem
		want string
	}{
		{kernel.Problem{Key: "storage.dir", Msg: "must be set"}, "storage.dir: must be set"},
		{kernel.Problem{Key: "mod.limit", Msg: "is 0 but must be positive"}, "mod.limit: is 0 but must be positive"},
		{kernel.Problem{Key: "broker.namesrv", Msg: "is empty: list them", Subject: true, Source: "--set"}, "broker.namesrv is empty: list them (from --set)"},
		{kernel.Problem{Key: "a.b", Msg: "and c.b are both set", Subject: true}, "a.b and c.b are both set"},
		{kernel.Problem{Key: "mod.limt", Unknown: true, Msg: "did you mean mod.limit?", Source: "q.yaml"}, "unknown key mod.limt; did you mean mod.limit? (in q.yaml)"},
		{kernel.Problem{Key: "mod.x", Unknown: true}, "unknown key mod.x"},
		{kernel.Problem{Msg: "unknown section mdo", Source: "QUIVER_MDO__X"}, "unknown section mdo (from environment variable QUIVER_MDO__X)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.give.String())
		})
	}
}

// TestPlanSeamNotASection: a seam's key set to a value instead of a
// section is refused, naming the plugins' sections.
func TestPlanSeamNotASection(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"storage=1", "storage: must be a section, one key per storage engine (storage.<id>.<key>; registered: commitlog, pebble) (from --set)"},
		{"transport=1", "transport: must be a section, one key per transport (transport.<id>.<key>; registered: tcp) (from --set)"},
		{"filter=1", "filter: must be a section, one key per filter (filter.<id>.<key>; registered: none) (from --set)"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			cfg, err := config.Load(config.Options{Sets: []string{tt.give}})
			require.NoError(t, err)
			_, err = kernel.NewPlan(cfg, planSpec())
			var pe *kernel.PlanError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.want, pe.Error())
		})
	}
}
