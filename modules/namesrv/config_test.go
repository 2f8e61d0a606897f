package namesrv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
)

func TestNewConfigFrom(t *testing.T) {
	tests := []struct {
		name string
		give map[string]any
		want *Config
	}{
		{name: "absent section keeps defaults", give: map[string]any{}, want: NewConfig()},
		{
			name: "yaml-like values",
			give: map[string]any{"namesrv": map[string]any{"listen": "0.0.0.0:19876", "scan_interval": "5s", "broker_timeout": "1m"}},
			want: &Config{Listen: "0.0.0.0:19876", ScanInterval: 5 * time.Second, BrokerTimeout: time.Minute, KVConfigPath: "./namesrv/kvConfig.json", Controller: NewControllerConfig()},
		},
		{
			name: "partial section",
			give: map[string]any{"namesrv.broker_timeout": "30s"},
			want: &Config{Listen: "127.0.0.1:9876", ScanInterval: 10 * time.Second, BrokerTimeout: 30 * time.Second, KVConfigPath: "./namesrv/kvConfig.json", Controller: NewControllerConfig()},
		},
		{
			name: "kv config and order messages",
			give: map[string]any{"namesrv": map[string]any{"kv_config_path": "/var/lib/quiver/kv.json", "order_message_enable": "true"}},
			want: func() *Config {
				c := NewConfig()
				c.KVConfigPath, c.OrderMessageEnable = "/var/lib/quiver/kv.json", true
				return c
			}(),
		},
		{
			name: "controller",
			give: map[string]any{"namesrv.controller": map[string]any{"enabled": true, "listen": "127.0.0.1:19880", "peers": []any{"127.0.0.1:19880", "127.0.0.1:19881"}, "raft_timeout": "500ms"}},
			want: func() *Config {
				c := NewConfig()
				c.Controller.Enabled, c.Controller.Listen, c.Controller.Peers, c.Controller.RaftTimeout = true, "127.0.0.1:19880", []string{"127.0.0.1:19880", "127.0.0.1:19881"}, 500*time.Millisecond
				return c
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewConfigFrom(config.FromMap(tt.give))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNewConfigFromErrors(t *testing.T) {
	tests := []struct {
		name string
		give map[string]any
		want []string
	}{
		{name: "unknown key", give: map[string]any{"namesrv.listn": "x"}, want: []string{"namesrv", "listn"}},
		{name: "bad duration", give: map[string]any{"namesrv.scan_interval": "soon"}, want: []string{"scan_interval"}},
		{
			name: "every invalid value reported",
			give: map[string]any{"namesrv": map[string]any{"listen": "nocolon", "scan_interval": "0s", "broker_timeout": "-1s"}},
			want: []string{"namesrv.listen", "namesrv.scan_interval", "namesrv.broker_timeout"},
		},
		{
			name: "controller",
			give: map[string]any{"namesrv.controller": map[string]any{"enabled": true, "listen": "0.0.0.0:9880", "peers": []any{"127.0.0.1:1"}, "raft_timeout": "1ms"}},
			want: []string{"namesrv.controller.listen", "namesrv.controller.peers", "namesrv.controller.raft_timeout"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewConfigFrom(config.FromMap(tt.give))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigValidateAcceptsScheme(t *testing.T) {
	c := NewConfig()
	c.Listen = "quic://127.0.0.1:9876"
	assert.NoError(t, c.Validate())
}
