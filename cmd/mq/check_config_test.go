package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/server"
)

// TestCheckConfigRefusesEveryMisspelledKey walks every top-level section
// and every plugin's section of mq, in every role, with a misspelled key:
// --check-config (planConfig) must refuse each one naming the key, and so
// must the start (the plan inside fx), so that "configuration OK" is never
// followed by a start that fails on a key.
func TestCheckConfigRefusesEveryMisspelledKey(t *testing.T) {
	regs, err := kernel.LoadRegistries(config.FromMap(map[string]any{}), plugins())
	require.NoError(t, err)
	var sections []string
	for _, s := range server.Sections() {
		if s != "transports" { // a list, not a section
			sections = append(sections, s)
		}
	}
	sections = append(sections, consoleSection.Key, processSection.Key)
	for _, id := range regs.Storage.IDs() {
		sections = append(sections, "storage."+id)
	}
	for _, id := range regs.Transport.IDs() {
		sections = append(sections, "transport."+id)
	}
	for _, id := range regs.Filter.IDs() {
		sections = append(sections, "filter."+id)
	}
	for _, id := range regs.Auth.IDs() {
		sections = append(sections, "auth."+id)
	}
	require.Contains(t, sections, "grpc")
	for _, r := range []role{roleNamesrv, roleBroker, roleDev} {
		for _, sec := range sections {
			key := sec + ".listne"
			t.Run(fmt.Sprintf("role%d/%s", r, key), func(t *testing.T) {
				g := &globalFlags{sets: []string{key + "=x", "storage.dir=" + t.TempDir(), "broker.namesrv=[127.0.0.1:9876]"}}
				_, _, err := planConfig(g, r)
				require.Error(t, err, "--check-config accepted %s", key)
				assert.Contains(t, err.Error(), key)

				if sec == consoleSection.Key || sec == processSection.Key {
					return // mq's own sections: decoded by planConfig only
				}
				cfg, err := server.Load(config.Options{Sets: g.sets}, r)
				require.NoError(t, err)
				app := fx.New(appOptions(cfg, r), fx.NopLogger)
				require.Error(t, app.Err(), "the start accepted %s", key)
				assert.Contains(t, app.Err().Error(), key)
			})
		}
	}
}
