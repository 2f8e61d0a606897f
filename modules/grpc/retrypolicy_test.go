package grpc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/broker"
)

// TestSubscriberGetsGroupRetryPolicy: a subscriber's settings carry its
// group's retry policy — retryMaxTimes + 1 attempts and the group's
// delays (RocketMQ 5's default customized levels, or the group's
// exponential policy) — whatever the client sent.
func TestSubscriberGetsGroupRetryPolicy(t *testing.T) {
	n := startNode(t)
	stream, err := n.cli.Telemetry(n.ctx())
	require.NoError(t, err)
	ask := func(group string, clientPolicy *grpcapi.RetryPolicy) *grpcapi.RetryPolicy {
		t.Helper()
		sub := &grpcapi.Settings{ClientType: grpcapi.ClientType_PUSH_CONSUMER.Enum(), BackoffPolicy: clientPolicy,
			PubSub: &grpcapi.Settings_Subscription{Subscription: &grpcapi.Subscription{Group: res(group)}}}
		require.NoError(t, stream.Send(&grpcapi.TelemetryCommand{Command: &grpcapi.TelemetryCommand_Settings{Settings: sub}}))
		got, err := stream.Recv()
		require.NoError(t, err)
		return got.GetSettings().GetBackoffPolicy()
	}
	def := ask("RP1", &grpcapi.RetryPolicy{MaxAttempts: 99})
	assert.Equal(t, int32(17), def.GetMaxAttempts(), "the group's retryMaxTimes (16) + 1, not the client's 99")
	next := def.GetCustomizedBackoff().GetNext()
	require.Len(t, next, len(broker.DefaultRetryDelays))
	assert.Equal(t, time.Second, next[0].AsDuration())
	assert.Equal(t, 2*time.Hour, next[len(next)-1].AsDuration())

	gc, err := n.b.GroupConfig("RP2")
	require.NoError(t, err)
	gc.RetryMaxTimes = 4
	gc.GroupRetryPolicy = &broker.GroupRetryPolicy{Type: broker.RetryExponential,
		ExponentialRetryPolicy: &broker.ExponentialRetryPolicy{Initial: 500, Max: 60000, Multiplier: 3}}
	require.NoError(t, n.b.PutGroupConfig(gc))
	exp := ask("RP2", nil)
	assert.Equal(t, int32(5), exp.GetMaxAttempts())
	e := exp.GetExponentialBackoff()
	require.NotNil(t, e)
	assert.Equal(t, 500*time.Millisecond, e.GetInitial().AsDuration())
	assert.Equal(t, time.Minute, e.GetMax().AsDuration())
	assert.Equal(t, float32(3), e.GetMultiplier())
	require.NoError(t, stream.CloseSend())
}
