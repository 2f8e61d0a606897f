package grpc_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
)

// nodeMsgTypeScript sends to a FIFO-typed topic with the official Node.js
// client: a FIFO message is stored, a normal one refused (the client
// checks the route's accept types, which the settings ask it to, as the
// proxy's do); to an untyped topic both go.
const nodeMsgTypeScript = `
const { Producer } = require('rocketmq-client-nodejs');
(async () => {
  const [endpoints, typed, untyped] = process.argv.slice(2);
  const out = {};
  // One topic at startup: the client (1.0.8) waits for the server's
  // first settings only after fetching every listed topic's route, and
  // misses settings that arrive in between (startup then hangs until
  // its 5-minute sync); untyped's route is fetched at its first send.
  const p = new Producer({ endpoints, namespace: '', topics: [typed] });
  // Each step says it is done on stderr, which the test prints when the
  // script fails or is killed: a hang names its step.
  const step = s => console.error(new Date().toISOString(), s);
  await p.startup();
  step('started');
  out.fifo = (await p.send({ topic: typed, messageGroup: 'g1', body: Buffer.from('f') })).messageId;
  step('fifo to the FIFO topic sent');
  try {
    await p.send({ topic: typed, body: Buffer.from('n') });
    out.normal = 'accepted';
  } catch (e) { out.normal = String(e && e.message || e); }
  step('normal to the FIFO topic tried');
  out.untypedNormal = (await p.send({ topic: untyped, body: Buffer.from('n') })).messageId;
  out.untypedFifo = (await p.send({ topic: untyped, messageGroup: 'g1', body: Buffer.from('f') })).messageId;
  step('both to the untyped topic sent');
  console.log(JSON.stringify(out));
  await p.shutdown();
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
`

func TestNodeClientTopicMessageType(t *testing.T) {
	dir := nodeClientDir(t)
	n := startNodeWith(t, true)
	_, err := n.b.EnsureTopic(&protocol.TopicConfig{TopicName: "FifoOnly", ReadQueueNums: 2, WriteQueueNums: 2, Perm: protocol.PermRead | protocol.PermWrite,
		Attributes: map[string]string{protocol.AttrMessageType: protocol.MessageTypeFIFO}})
	require.NoError(t, err)
	n.topic("AnyType", 2)
	script := filepath.Join(t.TempDir(), "msgtype.js")
	require.NoError(t, os.WriteFile(script, []byte(nodeMsgTypeScript), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, n.srv.Addr().String(), "FifoOnly", "AnyType")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "HOME="+t.TempDir())
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	var res struct{ Fifo, Normal, UntypedNormal, UntypedFifo string }
	require.NoError(t, json.Unmarshal(out, &res), "node output: %s", out)
	t.Logf("normal message to the FIFO topic: %s", res.Normal)
	assert.NotEmpty(t, res.Fifo)
	assert.NotEqual(t, "accepted", res.Normal)
	assert.Contains(t, res.Normal, "message type")
	assert.NotEmpty(t, res.UntypedNormal)
	assert.NotEmpty(t, res.UntypedFifo)
}
