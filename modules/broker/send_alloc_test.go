package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// maxSendAllocs bounds the heap allocations of one SEND_MESSAGE in its
// handler, from the decoded frame to the answer (issue 44: the broker's
// CPU per message on the ingest shapes). What they are (Go 1.26): the
// header's strings (topic, group, properties), the properties' map, the
// message and its store request, the offset message id, the answer and
// its queue offset, and the store's own. Counting a send's statistics,
// admitting it through the send gate and reading its topic allocate
// nothing (before: 4 more).
const maxSendAllocs = 11

// TestSendAllocations: a send of 1 KiB through handleSend, as decoded
// from the wire (the connection's RawSends), allocates at most
// maxSendAllocs times on average.
func TestSendAllocations(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	h.send("AllocT", 0, "warm", nil) // creates the topic
	req := remoting.NewRequest(remoting.SendMessage, sendExt("AllocT", 0, message.Properties{"TAGS": "T", "KEYS": "k1"}), make([]byte, 1024))
	frame := codec.Encode(req)
	const runs = 2000
	cmds := make([]*remoting.Command, runs+1)
	for i := range cmds {
		c, err := codec.DecodeWith(append([]byte(nil), frame...), codec.Options{RawSends: true})
		require.NoError(t, err)
		cmds[i] = c
	}
	ctx := context.Background()
	i := 0
	var failed *remoting.Command
	allocs := testing.AllocsPerRun(runs, func() {
		resp := h.b.handleSend(ctx, nil, cmds[i])
		if resp.Code != remoting.Success && failed == nil {
			failed = resp
		}
		i++
	})
	require.Nil(t, failed, "every send stored")
	t.Logf("allocations per send: %.1f", allocs)
	assert.LessOrEqual(t, allocs, float64(maxSendAllocs))
}
