package grpc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/grpcapi"
	grpcmod "github.com/quivermq/quiver/modules/grpc"
)

// TestRPCTable: the table has every RPC of the service, finds which the
// endpoint serves, and renders the auth rules of auth.go.
func TestRPCTable(t *testing.T) {
	rows, err := grpcmod.RPCTable()
	require.NoError(t, err)
	byName := map[string]grpcmod.RPCRow{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	sd := grpcapi.MessagingService_ServiceDesc
	assert.Len(t, rows, len(sd.Methods)+len(sd.Streams), "one row per RPC")
	assert.True(t, byName["RecallMessage"].Served)
	assert.True(t, byName["ReceiveMessage"].Served)
	assert.False(t, byName["SyncLiteSubscription"].Served, "not defined by the Server: gRPC UNIMPLEMENTED")
	assert.Equal(t, "PUB on the topic", byName["RecallMessage"].Auth)
	assert.Equal(t, "SUB on the group; SUB on the topic", byName["AckMessage"].Auth)
	assert.Equal(t, "bidirectional streaming", byName["Telemetry"].Kind)
}
