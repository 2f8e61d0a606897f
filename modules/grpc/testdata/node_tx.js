// Drives the official RocketMQ 5 Node.js client (rocketmq-client-nodejs)
// for modules/grpc TestNodeClientTransactions: node node_tx.js <endpoints>
// <topic> prints one JSON object on stdout. A transactional producer
// commits one message, rolls back another and leaves a third undecided;
// its transaction checker answers the broker's check-back (COMMIT for the
// undecided one); then a SimpleConsumer receives what the topic's tag 'N'
// holds. Every loop is bounded.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const [endpoints, topic] = process.argv.slice(2);
const base = { endpoints, namespace: '', requestTimeout: 10000 };
const sleep = ms => new Promise(r => setTimeout(r, ms));
const view = m => ({ id: m.messageId, tag: m.tag, body: m.body.toString(), props: Object.fromEntries(m.properties || []) });

(async () => {
  const t0 = Date.now();
  const times = {};
  const checked = [];
  const checker = {
    async check(m) {
      checked.push(view(m));
      return m.body.toString() === 'undecided' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    },
  };
  // One topic per producer: client 1.0.8 can hang at startup with several.
  const p = new Producer({ ...base, topics: [topic], checker });
  await p.startup();
  times.started = Date.now() - t0;
  const send = async (body, end) => {
    const tx = p.beginTransaction();
    const r = await p.send({ topic, tag: 'N', properties: new Map([['k', 'v']]), body: Buffer.from(body) }, tx);
    if (end === 'commit') await tx.commit();
    if (end === 'rollback') await tx.rollback();
    return r.messageId;
  };
  const sent = { commit: await send('committed', 'commit'), rollback: await send('rolled back', 'rollback'), undecided: await send('undecided', null) };

  times.sent = Date.now() - t0;
  // The broker checks the undecided one back over Telemetry; the checker
  // commits it.
  for (const end = Date.now() + 60000; checked.length === 0 && Date.now() < end;) await sleep(200);

  times.checked = Date.now() - t0;
  const c = new SimpleConsumer({ ...base, consumerGroup: 'GNodeTx', subscriptions: new Map([[topic, 'N']]), awaitDuration: 1000 });
  await c.startup();
  const received = [];
  for (const end = Date.now() + 30000; received.length < 2 && Date.now() < end;) {
    for (const m of await c.receive(16, 15000)) { received.push(view(m)); await c.ack(m); }
  }
  // One more round: a rolled-back or duplicate message would show here.
  for (const m of await c.receive(16, 15000)) { received.push(view(m)); await c.ack(m); }
  times.received = Date.now() - t0;
  console.log(JSON.stringify({ sent, checked, received, times }));
  await c.shutdown();
  await p.shutdown();
})().catch(e => { console.error(e); process.exit(1); });
