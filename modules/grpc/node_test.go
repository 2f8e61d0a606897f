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
)

// nodeScript drives the official RocketMQ 5 Node.js client: a Producer
// sends a tagged message with keys and a property and a FIFO message, then
// a SimpleConsumer receives the tagged one and acks it.
const nodeScript = `
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
(async () => {
  const [endpoints, topic] = process.argv.slice(2);
  const p = new Producer({ endpoints, namespace: '', topics: [topic] });
  await p.startup();
  const r = await p.send({ topic, tag: 'TagN', keys: ['nk1', 'nk2'], properties: new Map([['color', 'blue']]), body: Buffer.from('from node') });
  const f = await p.send({ topic, messageGroup: 'g1', body: Buffer.from('fifo node') });
  const c = new SimpleConsumer({ endpoints, namespace: '', consumerGroup: 'GNode', subscriptions: new Map([[topic, 'TagN']]), awaitDuration: 2000 });
  await c.startup();
  let got = [];
  for (let i = 0; i < 10 && got.length === 0; i++) got = await c.receive(16, 15000);
  for (const m of got) await c.ack(m);
  console.log(JSON.stringify({ sent: r.messageId, fifo: f.messageId,
    received: got.map(m => ({ id: m.messageId, tag: m.tag, body: m.body.toString(), keys: m.keys, props: Object.fromEntries(m.properties || []) })) }));
  await c.shutdown();
  await p.shutdown();
})().catch(e => { console.error(e); process.exit(1); });
`

// nodeClientDir finds or installs rocketmq-client-nodejs: the directory in
// QUIVER_NODE_CLIENT_DIR (holding node_modules/rocketmq-client-nodejs), or
// a fresh npm install outside -short mode.
func nodeClientDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the Node.js 5.x client interop test needs node and npm")
	}
	if dir := os.Getenv("QUIVER_NODE_CLIENT_DIR"); dir != "" {
		_, err := os.Stat(filepath.Join(dir, "node_modules", "rocketmq-client-nodejs"))
		require.NoError(t, err, "QUIVER_NODE_CLIENT_DIR has no node_modules/rocketmq-client-nodejs")
		return dir
	}
	if testing.Short() {
		t.Skip("-short: set QUIVER_NODE_CLIENT_DIR to a directory with rocketmq-client-nodejs installed (npm install takes about a minute)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: cannot install rocketmq-client-nodejs")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "rocketmq-client-nodejs@1.0.8")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm install: %s", out)
	return dir
}

func TestNodeClientInterop(t *testing.T) {
	dir := nodeClientDir(t)
	n := startNodeWith(t, true)
	n.topic("NodeT", 4)
	script := filepath.Join(t.TempDir(), "interop.js")
	require.NoError(t, os.WriteFile(script, []byte(nodeScript), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, n.srv.Addr().String(), "NodeT")
	// The client logs under $HOME/logs/rocketmq: keep that in the test's dir.
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "HOME="+t.TempDir())
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	var res struct {
		Sent, Fifo string
		Received   []struct {
			ID, Tag, Body string
			Keys          []string
			Props         map[string]string
		}
	}
	require.NoError(t, json.Unmarshal(out, &res), "node output: %s", out)
	require.NotEmpty(t, res.Sent)

	// A 4.x pull reads what the 5.x producer sent.
	var found bool
	for q := int32(0); q < 4; q++ {
		for _, m := range n.pull("NodeT", q, 0) {
			if m.MsgID != res.Sent {
				continue
			}
			found = true
			assert.Equal(t, "TagN", m.Tag())
			assert.Equal(t, []string{"nk1", "nk2"}, m.Keys())
			assert.Equal(t, "blue", m.Property("color"))
			assert.Equal(t, "from node", string(m.Body))
		}
	}
	assert.True(t, found, "message %s pulled by a 4.x pull", res.Sent)

	// The SimpleConsumer got it once, filtered by tag, and acked it.
	require.Len(t, res.Received, 1)
	assert.Equal(t, res.Sent, res.Received[0].ID)
	assert.Equal(t, "TagN", res.Received[0].Tag)
	assert.Equal(t, "from node", res.Received[0].Body)
	assert.Equal(t, map[string]string{"color": "blue"}, res.Received[0].Props, "only the user's properties")
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
