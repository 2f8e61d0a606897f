package grpc_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// TestNodeClientTransactions: the official Node.js 5.x client's
// transactional producer against a real `mq dev` — one message committed,
// one rolled back, one left undecided until the broker's check-back
// (RecoverOrphanedTransactionCommand over Telemetry) reaches the client's
// transaction checker, which commits it; a SimpleConsumer receives exactly
// the two committed, with only the user's properties; a 4.x pull of the
// topic holds the same two. (A 4.x Go client's half message beside 5.x
// producers: interop TestTransaction4xBeside5x.)
func TestNodeClientTransactions(t *testing.T) {
	dir := nodeClientDir(t)
	e := startNodeDev(t, "transaction.check_interval=1s", "transaction.timeout=1s")
	const topic = "NodeTx"
	e.createTopic(t, topic, 2)

	type view struct {
		ID, Tag, Body string
		Props         map[string]string
	}
	var out struct {
		Sent              struct{ Commit, Rollback, Undecided string }
		Checked, Received []view
		Times             map[string]int // ms since the script started
	}
	runNodeScript(t, dir, "node_tx.js", 3*time.Minute, &out, e.endpoints, topic)
	t.Logf("node: producer started at %d ms, sent at %d, checked back at %d, received at %d", out.Times["started"], out.Times["sent"], out.Times["checked"], out.Times["received"])

	require.NotEmpty(t, out.Checked, "the check-back reached the Node client's checker")
	for _, c := range out.Checked {
		assert.Equal(t, out.Sent.Undecided, c.ID, "only the undecided 5.x message is checked back to the 5.x client")
		assert.Equal(t, "undecided", c.Body)
		assert.Equal(t, map[string]string{"k": "v"}, c.Props)
	}
	var ids []string
	for _, r := range out.Received {
		ids = append(ids, r.ID)
		assert.Equal(t, map[string]string{"k": "v"}, r.Props, "only the user's properties: no PGROUP, TRAN_MSG, ...")
	}
	slices.Sort(ids)
	want := []string{out.Sent.Commit, out.Sent.Undecided}
	slices.Sort(want)
	assert.Equal(t, want, ids, "exactly the committed message and the one committed by the checker, once each")

	// A 4.x pull of the topic holds the two commits, not the rolled-back
	// message.
	var bodies []string
	eventually(t, 30*time.Second, func() bool {
		bodies = bodies[:0]
		for q := range 2 {
			resp := e.invoke(t, remoting.PullMessage, map[string]string{
				"consumerGroup": "g4x-reader", "topic": topic, "queueId": strconv.Itoa(q), "queueOffset": "0", "maxMsgNums": "32",
				"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
			}, nil)
			if resp.Code != remoting.Success {
				continue
			}
			msgs, err := client.DecodeMessages(resp.Body, "")
			require.NoError(t, err)
			for _, m := range msgs {
				bodies = append(bodies, string(m.Body))
			}
		}
		return len(bodies) >= 2
	}, "two committed messages on the topic")
	slices.Sort(bodies)
	assert.Equal(t, []string{"committed", "undecided"}, bodies)
}
