package grpc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/quivermq/quiver/core/grpcapi"
)

// TestTelemetryBadSettings: settings RocketMQ's proxy refuses in
// ClientActivity.processAndWriteClientSettings end the stream with its
// gRPC error, not an answer inside the stream, and are not kept.
func TestTelemetryBadSettings(t *testing.T) {
	n := startNode(t)
	consumer := func(ct grpcapi.ClientType, group string) *grpcapi.Settings {
		return &grpcapi.Settings{ClientType: ct.Enum(), PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res(group)}}}
	}
	tests := []struct {
		name     string
		give     *grpcapi.Settings
		wantCode codes.Code
		wantMsg  string
	}{
		{"no publishing or subscription", &grpcapi.Settings{ClientType: grpcapi.ClientType_PRODUCER.Enum()}, codes.InvalidArgument, "there is no publishing or subscription data in settings"},
		{"empty topic", pubSettings(""), codes.InvalidArgument, "topic name is empty"},
		{"bad topic", pubSettings("a b"), codes.InvalidArgument, "process client telemetryCommand failed"},
		{"empty group", consumer(grpcapi.ClientType_SIMPLE_CONSUMER, ""), codes.InvalidArgument, "consumer group is empty"},
		{"bad group", consumer(grpcapi.ClientType_PUSH_CONSUMER, "g/h"), codes.InvalidArgument, "process client telemetryCommand failed"},
		{"subscription of a producer", consumer(grpcapi.ClientType_PRODUCER, "G"), codes.Internal, "Client type is not consumer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := n.openTelemetry(n.ctxAs("bad@1"), tt.give)
			require.Error(t, err, "answered %v", got)
			assert.Equal(t, tt.wantCode, grpcstatus.Code(err), err.Error())
			assert.Contains(t, err.Error(), tt.wantMsg)
			assert.Zero(t, n.srv.HeldSettings())
		})
	}
	_, got, err := n.openTelemetry(n.ctxAs("good@1"), consumer(grpcapi.ClientType_SIMPLE_CONSUMER, "G"))
	require.NoError(t, err)
	assert.Equal(t, grpcapi.Code_OK, got.GetStatus().GetCode())
}
