package main

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/modules/ha"
	"github.com/quivermq/quiver/modules/metrics"
	"github.com/quivermq/quiver/modules/namesrv"
	"github.com/quivermq/quiver/modules/retry"
	"github.com/quivermq/quiver/modules/schedule"
	"github.com/quivermq/quiver/modules/transaction"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/filter/sql92"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
	"github.com/quivermq/quiver/plugins/transport/natstransport"
	"github.com/quivermq/quiver/plugins/transport/quictransport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
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

// TestConfigExampleDocumentsEveryKey checks that config.example.yaml names
// every key of every section and plugin compiled into mq, and nothing else.
func TestConfigExampleDocumentsEveryKey(t *testing.T) {
	cfg, err := config.Load(config.Options{File: "../../config.example.yaml"})
	require.NoError(t, err)
	var want []string
	want = append(want, koanfKeys("log.", kernel.LogConfig{})...)
	want = append(want, koanfKeys("remoting.", kernel.RemotingConfig{})...)
	want = append(want, koanfKeys("storage.", kernel.StorageConfig{})...)
	want = append(want, koanfKeys("storage.commitlog.", commitlog.NewConfig())...)
	want = append(want, koanfKeys("storage.pebble.", pebblestore.NewConfig())...)
	want = append(want, koanfKeys("transport.tcp.", tcp.NewConfig())...)
	want = append(want, koanfKeys("transport.quic.", quictransport.NewConfig())...)
	want = append(want, koanfKeys("transport.nats.", natstransport.NewConfig())...)
	want = append(want, koanfKeys("namesrv.", namesrv.NewConfig())...)
	want = append(want, koanfKeys("broker.", broker.NewConfig())...)
	want = append(want, koanfKeys("ha.", ha.NewConfig())...)
	want = append(want, koanfKeys("schedule.", schedule.NewConfig())...)
	want = append(want, koanfKeys("retry.", retry.NewConfig())...)
	want = append(want, koanfKeys("transaction.", transaction.NewConfig())...)
	want = append(want, koanfKeys("metrics.", metrics.NewConfig())...)
	want = append(want, koanfKeys("console.", &consoleConfig{})...)
	want = append(want, koanfKeys("process.", &processConfig{})...)
	want = append(want, "filter.property_filter")
	want = append(want, koanfKeys("filter.sql92.", sql92.NewConfig())...)
	want = append(want, "transports", "auth.acl.enabled", "auth.acl.namesrv_enabled")
	want = append(want, koanfKeys("auth.acl.", acl.NewConfig())...)
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
	// Every registered filter plugin has its section too.
	assert.True(t, cfg.Exists("filter.tag") || strings.Contains(readExample(t), "tag:"), "filter.tag section")
	_ = tag.NewConfig
}

func readExample(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load(config.Options{File: "../../config.example.yaml"})
	require.NoError(t, err)
	var b bytes.Buffer
	for _, k := range cfg.TopLevel() {
		b.WriteString(k + "\n")
	}
	return b.String()
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
	cfg, err := loadConfig(g, roleDev)
	require.NoError(t, err)
	app := fxtest.New(t, appOptions(cfg, roleDev), fx.NopLogger)
	app.RequireStart()
	app.RequireStop()
}

func TestGraphsValidate(t *testing.T) {
	for _, r := range []role{roleNamesrv, roleBroker, roleDev} {
		cfg := config.FromMap(map[string]any{})
		require.NoError(t, fx.ValidateApp(appOptions(cfg, r)), "role %d", r)
	}
}

func TestUnknownEngineListsRegistered(t *testing.T) {
	g := &globalFlags{sets: []string{"storage.engine=pebel", "storage.dir=" + t.TempDir(), "broker.listen=127.0.0.1:0"}}
	cfg, err := loadConfig(g, roleBroker)
	require.NoError(t, err)
	app := fx.New(appOptions(cfg, roleBroker), fx.NopLogger)
	require.Error(t, app.Err())
	assert.Contains(t, app.Err().Error(), `unknown storage engine "pebel" (registered: commitlog, pebble)`)
}

func TestUnknownSectionRefused(t *testing.T) {
	_, err := loadConfig(&globalFlags{sets: []string{"brokr.listen=x"}}, roleBroker)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "brokr")
}

func TestUnknownKeyRefused(t *testing.T) {
	g := &globalFlags{sets: []string{"broker.lisen=127.0.0.1:1", "storage.dir=" + t.TempDir()}}
	cfg, err := loadConfig(g, roleBroker)
	require.NoError(t, err)
	app := fx.New(appOptions(cfg, roleBroker), fx.NopLogger)
	require.Error(t, app.Err())
	assert.Contains(t, app.Err().Error(), "lisen")
}
