package main

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/internal/testserver"
)

// koanfKeys lists the koanf keys of a config struct under prefix.
func koanfKeys(prefix string, v any) []string {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		k := f.Tag.Get("koanf")
		if k == "" || k == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			out = append(out, koanfKeys(prefix+k+".", reflect.New(f.Type).Interface())...)
			continue
		}
		out = append(out, prefix+k)
	}
	return out
}

// specKeys lists every key of spec s: the kernel's sections and every
// section and plugin of the spec.
func specKeys(t *testing.T, s kernel.Spec) []string {
	var want []string
	want = append(want, koanfKeys("log.", kernel.LogConfig{})...)
	want = append(want, koanfKeys("remoting.", kernel.RemotingConfig{})...)
	want = append(want, koanfKeys("storage.", kernel.StorageConfig{})...)
	want = append(want, "transports", "filter.property_filter")
	for _, sec := range s.AllSections() {
		v, err := sec.Decode(config.FromMap(nil))
		require.NoError(t, err, sec.Key)
		want = append(want, koanfKeys(sec.Key+".", v)...)
	}
	for _, p := range s.Plugins.Storage {
		want = append(want, koanfKeys("storage."+p.ID()+".", p.NewConfig())...)
	}
	for _, p := range s.Plugins.Transport {
		want = append(want, koanfKeys("transport."+p.ID()+".", p.NewConfig())...)
	}
	for _, p := range s.Plugins.Filter {
		want = append(want, koanfKeys("filter."+p.ID()+".", p.NewConfig())...)
	}
	for _, p := range s.Plugins.Auth {
		want = append(want, "auth."+p.ID()+".enabled", "auth."+p.ID()+"."+kernel.NamesrvKey)
		want = append(want, koanfKeys("auth."+p.ID()+".", p.NewConfig())...)
	}
	return want
}

// TestConfigExampleDocumentsEveryKey checks that config.example.yaml names
// every key of every section and plugin compiled into mq: the kernel's
// sections and every section and plugin of mq dev's spec (the spec every
// role's plan reads).
func TestConfigExampleDocumentsEveryKey(t *testing.T) {
	cfg, err := config.Load(config.Options{File: "../../config.example.yaml"})
	require.NoError(t, err)
	want := specKeys(t, spec(roleDev))
	have := map[string]bool{}
	for _, k := range cfg.Keys() {
		have[k] = true
	}
	var missing []string
	for _, k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "keys missing from config.example.yaml")
}

// TestConfigExampleStartsDev decodes the example strictly through the whole
// dev graph and starts it on free ports.
func TestConfigExampleStartsDev(t *testing.T) {
	dir := t.TempDir()
	g := &globalFlags{configFile: "../../config.example.yaml", sets: []string{
		// A real port: mq dev registers its broker at namesrv.listen,
		// and broker.namesrv refuses port 0.
		fmt.Sprintf("namesrv.listen=127.0.0.1:%d", testserver.FreePort(t)), "broker.listen=127.0.0.1:0", "broker.advertise=127.0.0.1:10911",
		"storage.dir=" + dir, "storage.commitlog.segment_size=4MiB", "log.level=error",
	}}
	plan, err := planConfig(g, roleDev)
	require.NoError(t, err)
	app := fxtest.New(t, plan.Options(), fx.NopLogger)
	app.RequireStart()
	app.RequireStop()
}

func TestGraphsValidate(t *testing.T) {
	for _, r := range []role{roleNamesrv, roleBroker, roleDev} {
		plan, err := kernel.NewPlan(config.FromMap(map[string]any{"broker.standalone": true}), spec(r))
		require.NoError(t, err)
		require.NoError(t, fx.ValidateApp(plan.Options()), "role %d", r)
	}
}

func TestUnknownEngineListsRegistered(t *testing.T) {
	g := &globalFlags{sets: []string{"storage.engine=pebel", "storage.dir=" + t.TempDir(), "broker.listen=127.0.0.1:0"}}
	_, err := planConfig(g, roleBroker)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown storage engine "pebel" (registered: commitlog, pebble)`)
}

func TestUnknownSectionRefused(t *testing.T) {
	_, err := planConfig(&globalFlags{sets: []string{"brokr.listen=x", "broker.standalone=true"}}, roleBroker)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "brokr")
}

func TestUnknownKeyRefused(t *testing.T) {
	g := &globalFlags{sets: []string{"broker.lisen=127.0.0.1:1", "storage.dir=" + t.TempDir()}}
	_, err := planConfig(g, roleBroker)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lisen")
}
