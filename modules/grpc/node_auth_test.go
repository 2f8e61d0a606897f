package grpc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodeAuthScript drives the official Node.js client with credentials: a
// producer with the publisher's keys sends, one with a wrong secret is
// refused, and a SimpleConsumer with the subscriber's keys receives and
// acks.
const nodeAuthScript = `
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const withTimeout = (p, ms) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), ms))]);
(async () => {
  const [endpoints, topic, pubAK, pubSK, subAK, subSK] = process.argv.slice(2);
  const out = {};
  const p = new Producer({ endpoints, namespace: '', topics: [topic], sessionCredentials: { accessKey: pubAK, accessSecret: pubSK } });
  await p.startup();
  out.sent = (await p.send({ topic, tag: 'TagA', body: Buffer.from('signed') })).messageId;
  const bad = new Producer({ endpoints, namespace: '', topics: [topic], sessionCredentials: { accessKey: pubAK, accessSecret: 'wrong-secret-123' } });
  try {
    await withTimeout(bad.startup().then(() => bad.send({ topic, body: Buffer.from('x') })), 20000);
    out.bad = 'accepted';
  } catch (e) { out.bad = String(e && e.message || e); }
  const c = new SimpleConsumer({ endpoints, namespace: '', consumerGroup: 'AuthG', subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
    sessionCredentials: { accessKey: subAK, accessSecret: subSK } });
  await c.startup();
  let got = [];
  for (let i = 0; i < 10 && got.length === 0; i++) got = await c.receive(16, 15000);
  for (const m of got) await c.ack(m);
  out.received = got.map(m => m.messageId);
  console.log(JSON.stringify(out));
  await c.shutdown();
  await p.shutdown();
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
`

func TestNodeClientWithCredentials(t *testing.T) {
	dir := nodeClientDir(t)
	n := startNodeWith(t, true, withACL(t, aclYAML))
	n.topic("AuthT", 1)
	var res struct {
		Sent, Bad string
		Received  []string
	}
	runInlineNodeScript(t, dir, nodeAuthScript, 2*time.Minute, &res, n.srv.Addr().String(), "AuthT", "pubuser", skPub, "subuser", skSub)
	require.NotEmpty(t, res.Sent)
	assert.NotEqual(t, "accepted", res.Bad, "a wrong secret is refused")
	assert.NotEqual(t, "timeout", res.Bad, "the refusal is an answer, not a hang")
	assert.Equal(t, []string{res.Sent}, res.Received)
}

// nodeForbiddenScript starts, with the official Node.js client, a
// producer with the subscriber's keys, a SimpleConsumer with the
// publisher's keys and one in a group the subscriber may not use; each
// startup() must fail with the endpoint's FORBIDDEN reason (a refusal
// answered by ending the stream with a gRPC error made it retry forever).
const nodeForbiddenScript = `
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const withTimeout = (p, ms) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), ms))]);
(async () => {
  const [endpoints, topic, pubAK, pubSK, subAK, subSK] = process.argv.slice(2);
  const out = {};
  const tryStart = async (name, client) => {
    const began = Date.now();
    try {
      await withTimeout(client.startup(), 15000);
      out[name] = { err: 'started' };
    } catch (e) { out[name] = { err: String(e && e.message || e) }; }
    out[name].ms = Date.now() - began;
    try { await withTimeout(client.shutdown(), 5000); } catch (e) {}
  };
  await tryStart('producer', new Producer({ endpoints, namespace: '', topics: [topic], sessionCredentials: { accessKey: subAK, accessSecret: subSK } }));
  await tryStart('consumer', new SimpleConsumer({ endpoints, namespace: '', consumerGroup: 'AuthG', subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
    sessionCredentials: { accessKey: pubAK, accessSecret: pubSK } }));
  await tryStart('group', new SimpleConsumer({ endpoints, namespace: '', consumerGroup: 'OtherG', subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
    sessionCredentials: { accessKey: subAK, accessSecret: subSK } }));
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
`

func TestNodeClientForbiddenStartup(t *testing.T) {
	dir := nodeClientDir(t)
	n := startNodeWith(t, true, withACL(t, aclYAML))
	n.topic("AuthT", 1)
	var res map[string]struct {
		Err string
		Ms  int
	}
	runInlineNodeScript(t, dir, nodeForbiddenScript, 2*time.Minute, &res, n.srv.Addr().String(), "AuthT", "pubuser", skPub, "subuser", skSub)
	for name, want := range map[string]string{"producer": "PUB on topic AuthT", "consumer": "AuthG", "group": "OtherG"} {
		got := res[name]
		t.Logf("%s: startup failed after %d ms: %s", name, got.Ms, got.Err)
		assert.Contains(t, got.Err, "ForbiddenException", name)
		assert.Contains(t, got.Err, "response-code=40300", name)
		assert.Contains(t, got.Err, want, name)
	}
}
