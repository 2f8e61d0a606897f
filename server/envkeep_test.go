package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
)

func TestEnvKeep(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"broker.listen", true},
		{"storage.commitlog.segment_size", true},
		{"transports", true},
		{"namesrv", false}, // QUIVER_NAMESRV is mq admin's
		{"client_log", false},
		{"nosuch.key", true}, // QUIVER_NOSUCH__KEY: configuration, refused by the plan
		{"broker.", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, EnvKeep(tt.give), tt.give)
	}
}

func TestLoadIgnoresToolVariables(t *testing.T) {
	cfg, err := Load(config.Options{Env: []string{
		"QUIVER_NAMESRV=127.0.0.1:9876", "QUIVER_CLIENT_LOG=1", "QUIVER_BROKER__NAME=env-broker",
	}}, Broker)
	require.NoError(t, err)
	assert.Equal(t, "env-broker", cfg.String("broker.name"))
	assert.False(t, cfg.Exists("client_log"))
}
