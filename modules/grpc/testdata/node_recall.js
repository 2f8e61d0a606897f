// Drives the official RocketMQ 5 Node.js client (rocketmq-client-nodejs)
// for modules/grpc TestNodeRecallNamespace: node node_recall.js <endpoints>
// prints one JSON object on stdout. Every loop is bounded.
//
// A Producer and a SimpleConsumer of namespace ns1 use topic NodeNsT and
// group GNodeNs (ns1%NodeNsT and ns1%GNodeNs on the broker): two delay
// messages are sent, one is recalled with the handle its send answered,
// and the consumer reports what arrives.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const [endpoints] = process.argv.slice(2);
const base = { endpoints, namespace: 'ns1', requestTimeout: 10000 };

(async () => {
  const p = new Producer({ ...base, topics: ['NodeNsT'] });
  await p.startup();
  const due = new Date(Date.now() + 3000);
  const recalled = await p.send({ topic: 'NodeNsT', tag: 'D', deliveryTimestamp: due, body: Buffer.from('recalled') });
  const kept = await p.send({ topic: 'NodeNsT', tag: 'D', deliveryTimestamp: due, body: Buffer.from('kept') });
  const now = await p.send({ topic: 'NodeNsT', tag: 'N', body: Buffer.from('now') });
  const out = { recalled: recalled.messageId, kept: kept.messageId, now: now.messageId, handle: recalled.recallHandle, due: due.getTime() };
  out.recallReceipt = (await p.recallMessage('NodeNsT', recalled.recallHandle)).messageId;
  try {
    await p.recallMessage('NodeNsT', Buffer.from('v1 NodeNsT nobroker 1 x').toString('base64url'));
    out.forged = 'accepted';
  } catch (e) {
    out.forged = String(e.message || e);
  }

  const c = new SimpleConsumer({ ...base, consumerGroup: 'GNodeNs', subscriptions: new Map([['NodeNsT', '*']]), awaitDuration: 1000 });
  await c.startup();
  out.received = [];
  const end = Date.now() + 9000; // past the delivery time, long enough for a recalled message to show
  while (Date.now() < end) {
    for (const m of await c.receive(16, 30000)) {
      out.received.push({ id: m.messageId, topic: m.topic, body: m.body.toString(), at: Date.now() });
      await c.ack(m);
    }
  }
  console.log(JSON.stringify(out));
  await c.shutdown();
  await p.shutdown();
})().catch(e => { console.error(e); process.exit(1); });
