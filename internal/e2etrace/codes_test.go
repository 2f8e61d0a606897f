package e2etrace_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/e2etrace"
)

// The codes FrameRead records are remoting's send and pull codes.
func TestTracedCodesAreRemotings(t *testing.T) {
	for _, c := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage, remoting.PullMessage} {
		assert.True(t, e2etrace.Traced(c), remoting.RequestCodeName(c))
	}
	for _, c := range []int32{remoting.HeartBeat, remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset} {
		assert.False(t, e2etrace.Traced(c), remoting.RequestCodeName(c))
	}
}
