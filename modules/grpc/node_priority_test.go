package grpc_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// nodePriorityScript drives the official Node.js client on a PRIORITY
// topic: node script <phase> <endpoints> <topic> <group>.
//   - live: a SimpleConsumer takes (and acks) 100 messages of the low
//     backlog, a Producer sends "high-1" with priority 3, and the
//     consumer's next receive is reported;
//   - send: a Producer sends "high-2" with priority 2;
//   - first: a SimpleConsumer's first receive is reported.
//
// Every message received is acked. Loops are bounded.
const nodePriorityScript = `
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const [phase, endpoints, topic, group] = process.argv.slice(2);
const base = { endpoints, namespace: '', requestTimeout: 10000 };
const view = m => ({ body: m.body.toString(), priority: m.priority === undefined ? null : m.priority });
async function consumer() {
  const c = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 2000 });
  await c.startup();
  return c;
}
async function send(body, priority) {
  const p = new Producer({ ...base, topics: [topic] });
  await p.startup();
  const r = await p.send({ topic, body: Buffer.from(body), priority });
  await p.shutdown();
  return r.messageId;
}
async function receiveSome(c) {
  for (let i = 0; i < 20; i++) {
    const ms = await c.receive(16, 30000);
    if (ms.length > 0) {
      for (const m of ms) await c.ack(m);
      return ms.map(view);
    }
  }
  return [];
}
(async () => {
  const out = {};
  if (phase === 'live') {
    const c = await consumer();
    let taken = 0;
    for (let i = 0; i < 100 && taken < 100; i++) taken += (await receiveSome(c)).length;
    out.taken = taken;
    out.sent = await send('high-1', 3);
    out.next = await receiveSome(c);
    await c.shutdown();
  } else if (phase === 'send') {
    out.sent = await send('high-2', 2);
  } else {
    const c = await consumer();
    out.next = await receiveSome(c);
    await c.shutdown();
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
`

type nodePriorityOut struct {
	Taken int
	Sent  string
	Next  []struct {
		Body     string
		Priority *int32
	}
}

// TestNodeClientPriority: the official Node.js 5.x client's
// SimpleConsumer on a PRIORITY topic (mqadmin's +message.type=PRIORITY)
// holding a backlog of 10,000 priority-0 messages: after it has taken
// some, a priority-3 message sent by the Node.js Producer is the first of
// its next receive, before any further low one, with its priority; one
// sent before the server is killed (SIGKILL) and started again is the
// first a consumer receives after the restart.
func TestNodeClientPriority(t *testing.T) {
	dir := nodeClientDir(t)
	e := startNodeDev(t)
	const topic, group = "NodePrioT", "GNodePrio"
	resp := e.invoke(t, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
		"attributes": "+message.type=" + protocol.MessageTypePriority}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	// The backlog: 10,000 messages of priority 0, sent over 4.x.
	const backlog = 10000
	for i := range backlog {
		props := message.Properties{message.PropertyPriority: "0", message.PropertyUniqKey: fmt.Sprintf("LOW%08d", i)}
		resp := e.invoke(t, remoting.SendMessage, map[string]string{
			"producerGroup": "PG", "topic": topic, "defaultTopic": protocol.AutoCreateTopic, "defaultTopicQueueNums": "4",
			"queueId": strconv.Itoa(i % 4), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
			"properties": props.Encode(), "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false",
		}, []byte(fmt.Sprintf("low-%d", i)))
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
		require.Equal(t, "0", resp.Ext("queueId"), "priority 0 is queue 0, whatever the producer picked")
	}

	var live nodePriorityOut
	runInlineNodeScript(t, dir, nodePriorityScript, 2*time.Minute, &live, "live", e.endpoints, topic, group)
	require.GreaterOrEqual(t, live.Taken, 100)
	require.NotEmpty(t, live.Sent)
	require.NotEmpty(t, live.Next)
	assert.Equal(t, "high-1", live.Next[0].Body, "the receive after high-1 was sent")
	require.NotNil(t, live.Next[0].Priority)
	assert.Equal(t, int32(3), *live.Next[0].Priority)
	for _, m := range live.Next[1:] {
		assert.Regexp(t, "^low-", m.Body)
	}

	var sent nodePriorityOut
	runInlineNodeScript(t, dir, nodePriorityScript, time.Minute, &sent, "send", e.endpoints, topic, group)
	require.NotEmpty(t, sent.Sent)
	e.dev.Kill()
	e.dev.Start()
	var first nodePriorityOut
	runInlineNodeScript(t, dir, nodePriorityScript, 2*time.Minute, &first, "first", e.endpoints, topic, group)
	require.NotEmpty(t, first.Next)
	assert.Equal(t, "high-2", first.Next[0].Body, "the first receive after the restart")
}
