package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/modules/broker"
)

// TestEdgeGuideCommandLine is issue 42's report: the edge guide's
// `mq broker --config config.edge.yaml --set broker.namesrv=[10.0.0.1:9876]`
// passed --check-config with the name server "[10.0.0.1:9876]", which the
// broker could never reach. The guide's own line (read from the guide)
// now gives the list [10.0.0.1:9876].
func TestEdgeGuideCommandLine(t *testing.T) {
	raw, err := os.ReadFile("../../docs/guide/edge.md")
	require.NoError(t, err)
	line := regexp.MustCompile(`(?m)^mq broker --config config\.edge\.yaml .*$`).FindString(string(raw))
	require.NotEmpty(t, line, "the edge guide's command line")
	args := strings.Fields(line)[1:]
	for i, a := range args {
		a = strings.Trim(a, "'") // the shell's quotes
		args[i] = a
		if a == "config.edge.yaml" {
			args[i] = "../../config.edge.yaml"
		}
	}

	stderr, stdout, code := runMQ(t, append(args, "--check-config")...)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "configuration OK\n", stdout)

	require.Equal(t, "--set", args[len(args)-2])
	g := &globalFlags{configFile: "../../config.edge.yaml", sets: []string{args[len(args)-1]}}
	plan, err := planConfig(g, roleBroker)
	require.NoError(t, err)
	bc, ok := plan.Section("broker").(*broker.Config)
	require.True(t, ok, "broker section %T", plan.Section("broker"))
	assert.Equal(t, []string{"10.0.0.1:9876"}, bc.Namesrv)
}

// TestSetAndEnvLists: --set and QUIVER_* values give lists and maps as
// the file does, and --check-config refuses a name server without a port
// naming the key.
func TestSetAndEnvLists(t *testing.T) {
	namesrvOf := func(t *testing.T, sets ...string) []string {
		t.Helper()
		plan, err := planConfig(&globalFlags{sets: sets}, roleBroker)
		require.NoError(t, err)
		return plan.Section("broker").(*broker.Config).Namesrv
	}
	t.Run("set list", func(t *testing.T) {
		assert.Equal(t, []string{"10.0.0.1:9876", "10.0.0.2:9876"}, namesrvOf(t, "broker.namesrv=[10.0.0.1:9876, 10.0.0.2:9876]"))
	})
	t.Run("set commas", func(t *testing.T) {
		assert.Equal(t, []string{"10.0.0.1:9876", "10.0.0.2:9876"}, namesrvOf(t, "broker.namesrv=10.0.0.1:9876,10.0.0.2:9876"))
	})
	t.Run("env list", func(t *testing.T) {
		t.Setenv("QUIVER_BROKER__NAMESRV", "[10.0.0.1:9876, 10.0.0.3:9876]")
		assert.Equal(t, []string{"10.0.0.1:9876", "10.0.0.3:9876"}, namesrvOf(t))
	})
	t.Run("set map", func(t *testing.T) {
		plan, err := planConfig(&globalFlags{sets: []string{"broker.standalone=true", "broker.quota.topics={orders: {messages_per_sec: 100}}"}}, roleBroker)
		require.NoError(t, err)
		q := plan.Section("broker").(*broker.Config).Quota.Topics
		require.Contains(t, q, "orders")
		assert.InDelta(t, 100, q["orders"].MessagesPerSec, 0)
	})
	tests := []struct {
		name string
		give []string
		env  []string
		want string
	}{
		{name: "no port", give: []string{"--set", "broker.namesrv=10.0.0.1"},
			want: `mq: broker.namesrv: "10.0.0.1" is not host:port (from --set)`},
		{name: "no port in a list", give: []string{"--set", "broker.namesrv=[10.0.0.1:9876, 10.0.0.2]"},
			want: `mq: broker.namesrv: "10.0.0.2" is not host:port (from --set)`},
		{name: "port out of range", env: []string{"QUIVER_BROKER__NAMESRV=10.0.0.1:98760"},
			want: `mq: broker.namesrv: "10.0.0.1:98760": port 98760 is outside 1-65535 (from environment variable QUIVER_BROKER__NAMESRV)`},
		{name: "unclosed list", give: []string{"--set", "broker.namesrv=[10.0.0.1:9876"},
			want: `mq: config: --set broker.namesrv: "[10.0.0.1:9876" starts with [ but is not a YAML flow list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			stderr, stdout, code := runMQ(t, append([]string{"broker", "--check-config"}, tt.give...)...)
			assert.Equal(t, 1, code)
			assert.NotContains(t, stdout, "configuration OK")
			assert.Contains(t, stderr, tt.want)
		})
	}
}
