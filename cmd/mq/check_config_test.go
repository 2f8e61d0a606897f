package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckConfigRefusesEveryMisspelledKey walks every top-level section
// and every plugin's section of mq, in every role, with a misspelled key:
// --check-config (planConfig) must refuse each one naming the key. The
// start runs on the same plan, so "configuration OK" is never followed by
// a start that fails on a key.
func TestCheckConfigRefusesEveryMisspelledKey(t *testing.T) {
	regs, err := plugins().Registries()
	require.NoError(t, err)
	for _, r := range []role{roleNamesrv, roleBroker, roleDev} {
		var sections []string
		for _, s := range spec(r).TopLevel() {
			if _, err := regs.Auth.Get(s); s != "transports" && err != nil { // a list; the old spelling of auth.<id>
				sections = append(sections, s)
			}
		}
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
		require.Subset(t, sections, []string{"grpc", "mirror", "console", "process", "log", "namesrv", "broker"})
		for _, sec := range sections {
			key := sec + ".listne"
			t.Run(fmt.Sprintf("role%d/%s", r, key), func(t *testing.T) {
				g := &globalFlags{sets: []string{key + "=x", "storage.dir=" + t.TempDir(), "broker.namesrv=[127.0.0.1:9876]"}}
				_, err := planConfig(g, r)
				require.Error(t, err, "--check-config accepted %s", key)
				assert.Contains(t, err.Error(), key)
			})
		}
	}
}
