// Drives the official RocketMQ 5 Node.js client (rocketmq-client-nodejs)
// for bench/peers' gRPC rows (issue 28):
//
//   node grpc_bench.js '<spec JSON>'
//
// spec: { mode: "send" | "receive" | "e2e", endpoints, topic, ... } (see
// grpc.go, grpcSpec). The script sets its clients up (routes, warm-up),
// prints {"event":"ready"} and waits for a line "go" on stdin, so that the
// harness reads the broker's CPU time right at the start of the timed
// window; it then prints {"event":"result", ...} and the harness reads it
// again. Every loop is bounded in count and in time; the whole process
// exits after spec.deadlineMs whatever happens.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { performance } = require('node:perf_hooks');

const spec = JSON.parse(process.argv[2]);
const base = { endpoints: spec.endpoints, namespace: '', requestTimeout: spec.requestTimeoutMs || 10000, logger: quietLogger() };
const sleep = ms => new Promise(r => setTimeout(r, ms));
// nowMs is wall-clock milliseconds with sub-millisecond resolution; the
// producer and the consumer of the e2e run share this process, so they
// share the clock.
const nowMs = () => performance.timeOrigin + performance.now();

setTimeout(() => {
  console.error(`grpc_bench: deadline of ${spec.deadlineMs} ms passed`);
  process.exit(3);
}, spec.deadlineMs || 120000).unref();

// quietLogger drops the client's info lines (it logs every connection and
// route) and writes the first warnings and errors to stderr, which the
// harness shows when a run fails.
function quietLogger() {
  let left = 5;
  const out = (lvl, args) => {
    if (left-- > 0) console.error(lvl, ...args.map(a => (a instanceof Error ? a.message : typeof a === 'object' ? JSON.stringify(a) : a)));
  };
  return { info() {}, debug() {}, warn(...a) { out('WARN', a); }, error(...a) { out('ERROR', a); } };
}

function emit(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

// waitGo resolves when the harness writes "go" (or rejects after ms).
function waitGo(ms) {
  return new Promise((resolve, reject) => {
    let buf = '';
    const t = setTimeout(() => reject(new Error(`no "go" from the harness within ${ms} ms`)), ms);
    process.stdin.on('data', d => {
      buf += d;
      if (buf.includes('go\n')) { clearTimeout(t); process.stdin.pause(); resolve(); }
    });
  });
}

function cpuUs(since) {
  const u = process.cpuUsage(since);
  return u.user + u.system;
}

function quantiles(a) {
  if (a.length === 0) return { p50Us: 0, p99Us: 0, p999Us: 0 };
  a.sort((x, y) => x - y);
  const q = f => Math.round(a[Math.min(a.length - 1, Math.floor(f * a.length))] * 1000);
  return { p50Us: q(0.5), p99Us: q(0.99), p999Us: q(0.999) };
}

// withTimeout bounds a shutdown: the client's shutdown waits for its
// streams, and the harness must not hang on it.
const withTimeout = (p, ms) => Promise.race([p, sleep(ms)]);

async function simpleConsumer(group, awaitMs) {
  const c = new SimpleConsumer({ ...base, consumerGroup: group, subscriptions: new Map([[spec.topic, '*']]), awaitDuration: awaitMs });
  await c.startup();
  return c;
}

const modes = {
  // send: `await producer.send` from spec.concurrency loops sharing one
  // Producer (1: one at a time, with the send latency), until spec.n
  // messages or spec.durMs.
  async send() {
    const p = new Producer({ ...base, topics: [spec.topic] });
    await p.startup();
    const body = Buffer.alloc(spec.size);
    await p.send({ topic: spec.topic, body }); // warm-up: route, connection
    emit({ event: 'ready' });
    await waitGo(60000);
    const cpu0 = process.cpuUsage();
    const start = nowMs();
    const end = start + spec.durMs;
    let claimed = 0, acked = 0, errs = 0, firstErr = '';
    const lats = [];
    const loop = async () => {
      while (claimed < spec.n && nowMs() < end) {
        claimed++;
        const t0 = nowMs();
        try {
          await p.send({ topic: spec.topic, body });
          acked++;
          if (spec.concurrency === 1) lats.push(nowMs() - t0);
        } catch (e) {
          errs++;
          if (!firstErr) firstErr = String(e && e.message || e);
        }
      }
    };
    await Promise.all(Array.from({ length: spec.concurrency }, loop));
    const elapsedMs = nowMs() - start;
    const cpu = cpuUs(cpu0);
    emit({ event: 'result', msgs: acked, errs, firstErr, elapsedMs, cpuUs: cpu, ...quantiles(lats) });
    await withTimeout(p.shutdown(), 5000);
  },

  // receive: a backlog of spec.want messages (already stored) received by
  // one SimpleConsumer from spec.loops concurrent loops, batches of
  // spec.batch, each message acked (the acks of a batch in parallel), until
  // spec.want or spec.durMs.
  async receive() {
    const c = await simpleConsumer(spec.group, spec.awaitMs);
    emit({ event: 'ready' });
    await waitGo(60000);
    const cpu0 = process.cpuUsage();
    const start = nowMs();
    const end = start + spec.durMs;
    let got = 0, acked = 0, errs = 0, firstErr = '', firstAt = 0;
    const seen = new Set();
    let dups = 0;
    const loop = async () => {
      while (got < spec.want && nowMs() < end) {
        let msgs;
        try {
          msgs = await c.receive(spec.batch, spec.invisibleMs);
        } catch (e) {
          errs++;
          if (!firstErr) firstErr = String(e && e.message || e);
          await sleep(10);
          continue;
        }
        if (msgs.length && !firstAt) firstAt = nowMs();
        got += msgs.length;
        for (const m of msgs) {
          if (seen.has(m.messageId)) dups++; else seen.add(m.messageId);
        }
        await Promise.all(msgs.map(m => c.ack(m).then(() => { acked++; }, e => {
          errs++;
          if (!firstErr) firstErr = String(e && e.message || e);
        })));
      }
    };
    await Promise.all(Array.from({ length: spec.loops }, loop));
    const elapsedMs = nowMs() - start;
    const cpu = cpuUs(cpu0);
    emit({ event: 'result', msgs: got, acked, unique: seen.size, dups, errs, firstErr, elapsedMs,
      firstMs: firstAt ? firstAt - start : 0, cpuUs: cpu });
    await withTimeout(c.shutdown(), 5000);
  },

  // e2e: one Producer sends spec.rate messages a second for spec.durMs
  // (not awaiting each send, so the rate holds), each stamped with its
  // send time in its first 8 bytes (float64 LE, ms); one SimpleConsumer
  // in the same process receives them from spec.loops long-polling loops
  // and records receive − send before acking. A warm-up message (stamp 0)
  // must reach the consumer before "ready": it is then long-polling.
  async e2e() {
    const p = new Producer({ ...base, topics: [spec.topic] });
    await p.startup();
    const c = await simpleConsumer(spec.group, spec.awaitMs);
    const total = Math.round(spec.rate * spec.durMs / 1000);
    const lats = [];
    let got = 0, warm = false, stop = false, errs = 0, firstErr = '';
    const seen = new Set();
    const loop = async () => {
      while (!stop) {
        let msgs;
        try {
          msgs = await c.receive(spec.batch, spec.invisibleMs);
        } catch (e) {
          if (stop) break;
          errs++;
          if (!firstErr) firstErr = String(e && e.message || e);
          await sleep(10);
          continue;
        }
        const at = nowMs();
        for (const m of msgs) {
          const sent = m.body.readDoubleLE(0);
          if (sent === 0) { warm = true; continue; }
          if (seen.has(m.messageId)) continue;
          seen.add(m.messageId);
          got++;
          if (lats.length < total) lats.push(at - sent);
        }
        for (const m of msgs) c.ack(m).catch(() => {});
      }
    };
    const loops = Array.from({ length: spec.loops }, loop);
    const warmBody = Buffer.alloc(spec.size);
    await p.send({ topic: spec.topic, body: warmBody });
    const settle = nowMs() + 60000;
    while (!warm && nowMs() < settle) await sleep(10);
    if (!warm) throw new Error('warm-up message not received within 60 s');
    await sleep(200); // every loop is back in a long poll
    emit({ event: 'ready' });
    await waitGo(60000);
    const cpu0 = process.cpuUsage();
    const start = nowMs();
    let sent = 0, inflight = 0, sendErrs = 0, firstSendErr = '';
    while (sent < total && nowMs() < start + spec.durMs + 5000) {
      const due = Math.min(total, Math.floor((nowMs() - start) * spec.rate / 1000));
      for (; sent < due && inflight < 10000; sent++) {
        const b = Buffer.alloc(spec.size);
        b.writeDoubleLE(nowMs(), 0);
        inflight++;
        p.send({ topic: spec.topic, body: b }).then(() => { inflight--; }, e => {
          inflight--;
          sendErrs++;
          if (!firstSendErr) firstSendErr = String(e && e.message || e);
        });
      }
      await sleep(1);
    }
    const sendEnd = nowMs();
    const drainEnd = sendEnd + 10000;
    while ((got < sent || inflight > 0) && nowMs() < drainEnd) await sleep(5);
    const cpu = cpuUs(cpu0);
    stop = true;
    emit({ event: 'result', msgs: got, sent, errs: sendErrs + errs, firstErr: firstSendErr || firstErr,
      elapsedMs: nowMs() - start, sendMs: sendEnd - start, cpuUs: cpu, ...quantiles(lats) });
    await withTimeout(Promise.all([c.shutdown(), p.shutdown()]), 5000);
    await withTimeout(Promise.all(loops), 2000);
  },
};

(async () => {
  const run = modes[spec.mode];
  if (!run) throw new Error(`unknown mode ${spec.mode}`);
  await run();
  process.exit(0);
})().catch(e => {
  console.error('grpc_bench:', e && e.stack || e);
  process.exit(1);
});
