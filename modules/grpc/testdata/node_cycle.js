// Drives the official RocketMQ 5 Node.js client (rocketmq-client-nodejs)
// for modules/grpc TestNodeClientCycle: node node_cycle.js <phase> <endpoints>
// prints one JSON object on stdout. Every loop is bounded.
const { Producer, SimpleConsumer, PushConsumer, FilterExpression, ConsumeResult } = require('rocketmq-client-nodejs');

const [phase, endpoints] = process.argv.slice(2);
const base = { endpoints, namespace: '', requestTimeout: 10000 };
const sleep = ms => new Promise(r => setTimeout(r, ms));
const view = m => ({ id: m.messageId, tag: m.tag, body: m.body.toString(), keys: m.keys, group: m.messageGroup,
  attempt: m.deliveryAttempt, props: Object.fromEntries(m.properties || []) });

async function simple(group, topic, expr) {
  const c = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[topic, expr]]), awaitDuration: 1000 });
  await c.startup();
  return c;
}

// receiveUntil receives (and acks when ack is set) until want messages
// came or the deadline passed.
async function receiveUntil(c, want, ms, invisible, ack) {
  const got = [];
  const end = Date.now() + ms;
  while (got.length < want && Date.now() < end) {
    for (const m of await c.receive(16, invisible)) {
      got.push({ view: view(m), at: Date.now(), m });
      if (ack) await c.ack(m);
    }
  }
  return got;
}

const phases = {
  async produce() {
    // One topic up front (the others are routed on first send): with
    // several, client 1.0.8 can miss the settings it waits for at startup
    // (they arrive while it still fetches the routes) and hang.
    const p = new Producer({ ...base, topics: ['NodeFifo'] });
    await p.startup();
    const out = { fifo: [], sql: [], push: [], restart: [] };
    for (let i = 0; i < 5; i++) out.fifo.push((await p.send({ topic: 'NodeFifo', messageGroup: 'order-1', body: Buffer.from('f' + i) })).messageId);
    const due = new Date(Date.now() + 3000);
    out.delay = (await p.send({ topic: 'NodeDelay', deliveryTimestamp: due, body: Buffer.from('later') })).messageId;
    out.delayDue = due.getTime();
    for (let i = 1; i <= 10; i++) {
      out.sql.push((await p.send({ topic: 'NodeSql', tag: 'S', properties: new Map([['a', String(i)]]), body: Buffer.from('s' + i) })).messageId);
    }
    out.retry = (await p.send({ topic: 'NodeRetry', body: Buffer.from('retry me') })).messageId;
    for (let i = 0; i < 20; i++) out.push.push((await p.send({ topic: 'NodePush', body: Buffer.from('p' + i) })).messageId);
    for (let i = 0; i < 6; i++) out.restart.push((await p.send({ topic: 'NodeRestart', body: Buffer.from('r' + i) })).messageId);
    await p.shutdown();
    return out;
  },

  async consume() {
    const out = {};
    // FIFO: the group is orderly, so one message group comes in order.
    const f = await simple('GNodeFifo', 'NodeFifo', '*');
    out.fifo = (await receiveUntil(f, 5, 30000, 10000, true)).map(g => g.view.body);
    await f.shutdown();
    // Delay: not before its delivery time.
    const d = await simple('GNodeDelay', 'NodeDelay', '*');
    const dg = await receiveUntil(d, 1, 30000, 10000, true);
    out.delay = dg.map(g => ({ id: g.view.id, at: g.at }));
    await d.shutdown();
    // SQL92 filter through the filter plugin.
    const s = await simple('GNodeSql', 'NodeSql', new FilterExpression('a > 7', 2));
    const sg = await receiveUntil(s, 3, 20000, 10000, true);
    sg.push(...await receiveUntil(s, 1, 3000, 10000, true)); // nothing more may come
    out.sql = sg.map(g => g.view.props.a);
    await s.shutdown();
    // Redelivery after the invisible time, change of invisible duration,
    // and the dead-letter queue once the group's attempts (2) are used up.
    const r = await simple('GNodeRetry', 'NodeRetry', '*');
    const first = await receiveUntil(r, 1, 20000, 1000, false);
    const second = await receiveUntil(r, 1, 20000, 1000, false);
    if (second.length) await r.changeInvisibleDuration(second[0].m, 500);
    const third = await receiveUntil(r, 1, 4000, 1000, false);
    out.retry = { first: first.map(g => g.view), second: second.map(g => g.view), third: third.map(g => g.view) };
    await r.shutdown();
    // PushConsumer: p0 fails once and comes back; every message is consumed.
    const seen = {};
    let failed = false;
    const pc = new PushConsumer({ ...base, consumerGroup: 'GNodePush', subscriptions: new Map([['NodePush', '*']]),
      messageListener: { consume(m) {
        const b = m.body.toString();
        seen[b] = (seen[b] || 0) + 1;
        if (b === 'p0' && !failed) { failed = true; return ConsumeResult.FAILURE; }
        return ConsumeResult.SUCCESS;
      } } });
    await pc.startup();
    const end = Date.now() + 40000;
    while (Date.now() < end && (Object.keys(seen).length < 20 || (seen.p0 || 0) < 2)) await sleep(200);
    await sleep(1500); // nothing acked comes again
    out.push = seen;
    await pc.shutdown();
    return out;
  },

  // restart1 receives the six messages and acks three; the broker is then
  // restarted and restart2 must get exactly the other three.
  async restart1() {
    const c = await simple('GNodeRestart', 'NodeRestart', '*');
    const got = await receiveUntil(c, 6, 20000, 4000, false);
    const acked = [];
    for (const g of got.slice(0, 3)) { await c.ack(g.m); acked.push(g.view.id); }
    await c.shutdown();
    return { received: got.map(g => g.view.id), acked };
  },
  async restart2() {
    const c = await simple('GNodeRestart', 'NodeRestart', '*');
    const got = await receiveUntil(c, 3, 20000, 10000, true);
    got.push(...await receiveUntil(c, 1, 3000, 10000, true));
    await c.shutdown();
    return { received: got.map(g => ({ id: g.view.id, attempt: g.view.attempt })) };
  },
};

(async () => {
  const out = await phases[phase]();
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
