package config_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
)

type addrSection struct {
	Listen  string   `koanf:"listen" addr:"listen"`
	Namesrv []string `koanf:"namesrv" addr:"dial"`
	Quota   struct {
		Topics map[string]int `koanf:"topics"`
	} `koanf:"quota"`
	Peer struct {
		Addr string `koanf:"addr" addr:"dial"`
	} `koanf:"peer"`
}

// TestFlowValues is issue 42's report: --set broker.namesrv=[10.0.0.1:9876]
// (docs/guide/edge.md) gave the string "[10.0.0.1:9876]"; environment and
// --set values that start with [ or { are YAML flow lists and maps now,
// as in the file.
func TestFlowValues(t *testing.T) {
	tests := []struct {
		name        string
		give        config.Options
		wantNamesrv []string
		wantTopics  map[string]int
	}{
		{name: "set list", give: config.Options{Sets: []string{"broker.namesrv=[10.0.0.1:9876]"}}, wantNamesrv: []string{"10.0.0.1:9876"}},
		{name: "set list of two", give: config.Options{Sets: []string{"broker.namesrv=[10.0.0.1:9876, 'quic://10.0.0.2:9876']"}}, wantNamesrv: []string{"10.0.0.1:9876", "quic://10.0.0.2:9876"}},
		{name: "set commas", give: config.Options{Sets: []string{"broker.namesrv=10.0.0.1:9876,10.0.0.2:9876"}}, wantNamesrv: []string{"10.0.0.1:9876", "10.0.0.2:9876"}},
		{name: "env list", give: config.Options{Env: []string{"QUIVER_BROKER__NAMESRV=[10.0.0.1:9876, 10.0.0.2:9876]"}}, wantNamesrv: []string{"10.0.0.1:9876", "10.0.0.2:9876"}},
		{name: "env commas", give: config.Options{Env: []string{"QUIVER_BROKER__NAMESRV=10.0.0.1:9876,10.0.0.2:9876"}}, wantNamesrv: []string{"10.0.0.1:9876", "10.0.0.2:9876"}},
		{name: "set map", give: config.Options{Sets: []string{"broker.quota.topics={a: 1, b: 2}"}}, wantTopics: map[string]int{"a": 1, "b": 2}},
		{name: "env map", give: config.Options{Env: []string{"QUIVER_BROKER__QUOTA__TOPICS={a: 3}"}}, wantTopics: map[string]int{"a": 3}},
		{name: "set empty list", give: config.Options{Sets: []string{"broker.namesrv=[]"}}, wantNamesrv: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(tt.give)
			require.NoError(t, err)
			var s addrSection
			require.NoError(t, cfg.Decode("broker", &s))
			assert.Equal(t, tt.wantNamesrv, s.Namesrv)
			assert.Equal(t, tt.wantTopics, s.Quota.Topics)
		})
	}
	t.Run("IPv6 host:port stays a string", func(t *testing.T) {
		cfg, err := config.Load(config.Options{Sets: []string{"broker.listen=[::1]:10911"}, Env: []string{"QUIVER_BROKER__PEER__ADDR=[::1]:9876"}})
		require.NoError(t, err)
		var s addrSection
		require.NoError(t, cfg.Decode("broker", &s))
		assert.Equal(t, "[::1]:10911", s.Listen)
		assert.Equal(t, "[::1]:9876", s.Peer.Addr)
	})
	t.Run("a list where a string goes is refused with its key", func(t *testing.T) {
		cfg, err := config.Load(config.Options{Sets: []string{"broker.listen=[a:1, b:2]"}})
		require.NoError(t, err)
		var s addrSection
		err = cfg.Decode("broker", &s)
		var ke *config.KeyError
		require.ErrorAs(t, err, &ke)
		assert.Equal(t, "broker.listen", ke.Key)
	})
}

func TestFlowValueErrors(t *testing.T) {
	tests := []struct {
		name string
		give config.Options
		want []string
	}{
		{name: "set unclosed list", give: config.Options{Sets: []string{"broker.namesrv=[10.0.0.1:9876"}}, want: []string{"--set broker.namesrv", "not a YAML flow list"}},
		{name: "set unclosed map", give: config.Options{Sets: []string{"broker.quota.topics={a: 1"}}, want: []string{"--set broker.quota.topics", "not a YAML flow map"}},
		{name: "env unclosed list", give: config.Options{Env: []string{"QUIVER_BROKER__NAMESRV=[x"}}, want: []string{"QUIVER_BROKER__NAMESRV (broker.namesrv)", "not a YAML flow list"}},
		{name: "set list then text", give: config.Options{Sets: []string{"broker.namesrv=[a] b"}}, want: []string{"--set broker.namesrv"}},
		{name: "env list then a key", give: config.Options{Env: []string{"QUIVER_BROKER__NAMESRV=[a]\nb: 1"}}, want: []string{"QUIVER_BROKER__NAMESRV", "not a YAML flow list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(tt.give)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestAddrTag: fields tagged addr are checked by Decode, with the key.
func TestAddrTag(t *testing.T) {
	tests := []struct {
		name    string
		give    []string
		wantKey string
		want    string
	}{
		{name: "no port", give: []string{"broker.namesrv=10.0.0.1"}, wantKey: "broker.namesrv", want: `"10.0.0.1" is not host:port`},
		{name: "no port in a list", give: []string{"broker.namesrv=[10.0.0.1:9876, 10.0.0.2]"}, wantKey: "broker.namesrv", want: `"10.0.0.2" is not host:port`},
		{name: "brackets kept by the old --set", give: []string{"broker.namesrv=['[10.0.0.1:9876]']"}, wantKey: "broker.namesrv", want: "is not host:port"},
		{name: "port too large", give: []string{"broker.namesrv=10.0.0.1:98760"}, wantKey: "broker.namesrv", want: "port 98760 is outside 1-65535"},
		{name: "port zero to dial", give: []string{"broker.namesrv=10.0.0.1:0"}, wantKey: "broker.namesrv", want: "outside 1-65535"},
		{name: "port not a number", give: []string{"broker.namesrv=h:http"}, wantKey: "broker.namesrv", want: `port "http" is not a number`},
		{name: "no host to dial", give: []string{"broker.namesrv=:9876"}, wantKey: "broker.namesrv", want: "has no host"},
		{name: "nested", give: []string{"broker.peer.addr=quic://h"}, wantKey: "broker.peer.addr", want: "is not host:port"},
		{name: "listen", give: []string{"broker.listen=0.0.0.0:70000"}, wantKey: "broker.listen", want: "outside 0-65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(config.Options{Sets: tt.give})
			require.NoError(t, err)
			var s addrSection
			err = cfg.Decode("broker", &s)
			var ke *config.KeyError
			require.ErrorAs(t, err, &ke)
			assert.Equal(t, tt.wantKey, ke.Key)
			assert.Contains(t, ke.Msg, tt.want)
		})
	}
	t.Run("good", func(t *testing.T) {
		cfg, err := config.Load(config.Options{Sets: []string{
			"broker.listen=:0", "broker.namesrv=[10.0.0.1:9876, 'quic://ns.example:9876', '[::1]:9876']", "broker.peer.addr=h:1",
		}})
		require.NoError(t, err)
		var s addrSection
		require.NoError(t, cfg.Decode("broker", &s))
	})
	t.Run("every bad address is reported", func(t *testing.T) {
		cfg, err := config.Load(config.Options{Sets: []string{"broker.listen=x", "broker.namesrv=[a, b]"}})
		require.NoError(t, err)
		var s addrSection
		err = cfg.Decode("broker", &s)
		var bad *config.AddrErrors
		require.True(t, errors.As(err, &bad), "%v", err)
		assert.Len(t, bad.Errors, 3)
		assert.Equal(t, "x", s.Listen, "the section is decoded all the same")
	})
}

func TestCheckAddr(t *testing.T) {
	assert.NoError(t, config.CheckAddr("127.0.0.1:9876", config.AddrDial))
	assert.NoError(t, config.CheckAddr(":0", config.AddrListen))
	assert.Error(t, config.CheckAddr(":0", config.AddrDial))
	assert.Error(t, config.CheckAddr("[::1]", config.AddrListen))
}

// TestParseIPPrefix: an IP is its full-length prefix (a mapped IPv4 as
// IPv4, so it matches a peer's unmapped address), a CIDR loses its host
// bits, and anything else is refused.
func TestParseIPPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3":        "10.1.2.3/32",
		"::ffff:10.1.2.3": "10.1.2.3/32",
		"10.1.2.3/8":      "10.0.0.0/8",
		"fd00::1":         "fd00::1/128",
		"fd00::1234/16":   "fd00::/16",
		"192.168.0.0/16":  "192.168.0.0/16",
	} {
		p, err := config.ParseIPPrefix(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, p.String(), in)
		assert.True(t, p.Contains(p.Addr()), in)
	}
	for _, in := range []string{"", "host.example", "10.1.2.3/33", "10.1.2/8", "10.1.2.3:80", " 10.1.2.3"} {
		_, err := config.ParseIPPrefix(in)
		assert.Error(t, err, "%q", in)
	}
}
