package grpc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// TestConfigLimits: the limits default to remoting's where it has one and
// bad values are refused naming the key.
func TestConfigLimits(t *testing.T) {
	c := grpcmod.NewConfig()
	require.NoError(t, c.Validate())
	assert.Equal(t, 1024, c.MaxConcurrentStreams)
	assert.Equal(t, 10000, c.MaxConnections)
	assert.Equal(t, 1000, c.MaxConnectionsPerIP)
	assert.EqualValues(t, 16<<20, c.MaxSendBytes)
	assert.Equal(t, 10000, c.MaxReceiveWaits)
	assert.EqualValues(t, 16<<20, c.ReceiveBuffer)
	assert.EqualValues(t, 4<<20, c.ReceiveStreamBuffer)

	tests := []struct {
		give func(*grpcmod.Config)
		want string
	}{
		{func(c *grpcmod.Config) { c.MaxConcurrentStreams = 0 }, "grpc.max_concurrent_streams"},
		{func(c *grpcmod.Config) { c.MaxConnectionsPerIP = -1 }, "grpc.max_connections_per_ip"},
		{func(c *grpcmod.Config) { c.IdleTimeout = 0 }, "grpc.idle_timeout"},
		{func(c *grpcmod.Config) { c.MaxSendBytes = 0 }, "grpc.max_send_bytes"},
		{func(c *grpcmod.Config) { c.ReceiveBuffer = 0 }, "grpc.receive_buffer"},
		{func(c *grpcmod.Config) { c.ReceiveStreamBuffer = -1 }, "grpc.receive_stream_buffer"},
		{func(c *grpcmod.Config) { c.MaxSettingsSize = 0 }, "grpc.max_settings_size"},
		{func(c *grpcmod.Config) { c.MaxReceiveWaits = 0 }, "grpc.max_receive_waits"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			c := grpcmod.NewConfig()
			tt.give(c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
