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
	assert.True(t, byName["SyncLiteSubscription"].Served, "lite.go")
	assert.Equal(t, "PUB on the topic", byName["RecallMessage"].Auth)
	assert.Equal(t, "SUB on the group; SUB on the topic", byName["AckMessage"].Auth)
	assert.Equal(t, "bidirectional streaming", byName["Telemetry"].Kind)

	ignored := func(rpc string) map[string]string {
		m := map[string]string{}
		for _, f := range byName[rpc].Ignored {
			m[f.Path] = f.Why
		}
		return m
	}
	send := ignored("SendMessage")
	assert.Contains(t, send, "messages[].system_properties.body_digest", "a nested field, by its path from the request")
	assert.Contains(t, send, "messages[].system_properties.queue_id")
	assert.NotContains(t, send, "messages[].system_properties.tag", "read")
	assert.NotContains(t, send, "messages[].topic.name", "read")
	assert.Contains(t, ignored("ReceiveMessage"), "message_queue.id", "pop: a per-RPC override")
	assert.NotContains(t, ignored("PullMessage"), "message_queue.id", "pull reads the queue id")
	assert.Contains(t, ignored("QueryRoute"), "endpoints")
	assert.NotContains(t, ignored("QueryRoute"), "endpoints.scheme", "not walked under an ignored field")
	assert.Contains(t, ignored("Telemetry"), "settings.user_agent")
	assert.Contains(t, ignored("SyncLiteSubscription"), "version")
	assert.NotContains(t, ignored("SyncLiteSubscription"), "offset_option.tail_n", "read")
}
