package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckConfigRefusesEveryMisspelledKey walks every section of mq, in
// every role, with a misspelled key: the top-level sections (and the old
// spelling of each auth plugin's, acl.*), every plugin's section (one
// without keys too, filter.tag) and every section nested in one
// (grpc.tls, namesrv.controller, transport.nats.tls: the parents of the
// keys config.example.yaml must document). --check-config
// (planConfig) must refuse each one naming the key. The start runs on the
// same plan, so "configuration OK" is never followed by a start that fails
// on a key.
func TestCheckConfigRefusesEveryMisspelledKey(t *testing.T) {
	for _, r := range []role{roleNamesrv, roleBroker, roleDev} {
		s := spec(r)
		seen := map[string]bool{"transports": true} // a list, not a section
		var sections []string
		add := func(sec string) {
			if !seen[sec] {
				seen[sec] = true
				sections = append(sections, sec)
			}
		}
		for _, sec := range s.TopLevel() {
			add(sec)
		}
		for _, p := range s.Plugins.Storage {
			add("storage." + p.ID()) // a plugin without keys too (filter.tag)
		}
		for _, p := range s.Plugins.Transport {
			add("transport." + p.ID())
		}
		for _, p := range s.Plugins.Filter {
			add("filter." + p.ID())
		}
		for _, p := range s.Plugins.Auth {
			add("auth." + p.ID())
		}
		for _, k := range specKeys(t, s) {
			for i := range k {
				if k[i] == '.' {
					add(k[:i])
				}
			}
		}
		require.Subset(t, sections, []string{"grpc", "mirror", "console", "process", "log", "namesrv", "broker", "acl",
			"storage.pebble", "transport.quic", "filter.sql92", "filter.tag", "auth.acl", "namesrv.controller", "grpc.tls"})
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

// TestCheckConfigRefusesMisspelledListEntryKey: a misspelled key inside a
// list entry (a mirror link's) is refused, once: the planner's second
// decode without the unknown keys cannot drop a key inside a list and
// used to report it twice.
func TestCheckConfigRefusesMisspelledListEntryKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mq.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`mirror:
  links:
    - name: a
      topics: ["T"]
      target: {namesrv: ["127.0.0.1:9876"]}
      batch_sise: 64
`), 0o600))
	for _, r := range []role{roleNamesrv, roleBroker, roleDev} {
		g := &globalFlags{configFile: file, sets: []string{"storage.dir=" + dir, "broker.namesrv=[127.0.0.1:9876]"}}
		_, err := planConfig(g, r)
		require.Error(t, err, "role %d accepted mirror.links[0].batch_sise", r)
		assert.Equal(t, 1, strings.Count(err.Error(), "unknown key mirror.links[0].batch_sise"), "role %d: %s", r, err)
	}
}
