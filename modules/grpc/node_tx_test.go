package grpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
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
	port := testserver.FreePort(t)
	endpoints := fmt.Sprintf("127.0.0.1:%d", port)
	p := testserver.StartDev(t, testserver.Options{Sets: []string{"grpc.listen=" + endpoints, "log.level=warn",
		"transaction.check_interval=1s", "transaction.timeout=1s"}})
	rc := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	defer rc.Close()
	invoke := func(code int32, ext map[string]string) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, p.Broker, remoting.NewRequest(code, ext, nil))
		require.NoError(t, err)
		return resp
	}
	const topic = "NodeTx"
	resp := invoke(remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	script, err := filepath.Abs("testdata/node_tx.js")
	require.NoError(t, err)
	nctx, ncancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer ncancel()
	cmd := exec.CommandContext(nctx, "node", script, endpoints, topic)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "HOME="+t.TempDir())
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	type view struct {
		ID, Tag, Body string
		Props         map[string]string
	}
	var out struct {
		Sent              struct{ Commit, Rollback, Undecided string }
		Checked, Received []view
		Times             map[string]int // ms since the script started
	}
	require.NoError(t, json.Unmarshal(raw, &out), "node output: %s", raw)
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
			resp := invoke(remoting.PullMessage, map[string]string{
				"consumerGroup": "g4x-reader", "topic": topic, "queueId": strconv.Itoa(q), "queueOffset": "0", "maxMsgNums": "32",
				"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
			})
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
