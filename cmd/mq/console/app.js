"use strict";
// The Quiver console page. Routes: /overview (the start page), /cluster,
// /topics, /topics/<name>, /groups, /groups/<group>,
// /producers[/<group>] (or ?group=), /messages[/<id>], /dlq[/<group>],
// /trace[/<msgId>], /mirror, /offsets, /config, /acl. Actions send the session's
// CSRF token and ask for confirmation where they destroy or move data.
let info = {admin: false, auth: "", user: ""};
let csrf = "";
const $ = id => document.getElementById(id);
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmt = ms => ms > 0 ? new Date(ms).toISOString() : "-";
const enc = encodeURIComponent;

async function api(path, opts) {
  opts = opts || {};
  if (opts.method && opts.method !== "GET") opts.headers = Object.assign({"X-Quiver-CSRF": csrf}, opts.headers || {});
  const r = await fetch(path, opts);
  const v = await r.json();
  if (r.status === 401 && info.auth) { showLogin(); }
  if (!r.ok) throw new Error(v.error || r.statusText);
  return v;
}
const post = (path, data) => api(path, {method: "POST", body: new URLSearchParams(data)});
function formData(f) {
  const d = {};
  for (const [k, v] of new FormData(f)) d[k] = v;
  return d;
}
function show(err) { $("error").textContent = err ? String(err.message || err) : ""; }
function notice(s) { $("notice").textContent = s || ""; }
function table(el, head, rows) {
  el.innerHTML = "<tr>" + head.map(h => "<th>" + esc(h) + "</th>").join("") + "</tr>" +
    rows.map(r => "<tr>" + r.map(c => typeof c === "object" && c && c.html !== undefined ? "<td>" + c.html + "</td>" : "<td>" + esc(c) + "</td>").join("") + "</tr>").join("");
}
const link = (href, text) => ({html: `<a href="${esc(href)}">${esc(text)}</a>`});

// ask shows the confirmation dialog; with expect, the user must type it.
function ask(text, expect) {
  return new Promise(resolve => {
    const d = $("confirm"), input = $("confirm-input");
    $("confirm-text").textContent = text;
    $("confirm-expect").textContent = expect || "";
    $("confirm-expect-row").hidden = !expect;
    input.value = "";
    const done = ok => { d.close(); $("confirm-ok").onclick = $("confirm-cancel").onclick = null; resolve(ok); };
    $("confirm-ok").onclick = e => { e.preventDefault(); if (expect && input.value !== expect) { input.focus(); return; } done(true); };
    $("confirm-cancel").onclick = e => { e.preventDefault(); done(false); };
    d.oncancel = () => resolve(false);
    d.showModal();
  });
}

// pager draws page buttons for a paged answer; go(n) loads page n.
function pager(el, p, go) {
  const pages = Math.max(1, Math.ceil(p.total / p.size));
  el.innerHTML = `<button data-n="${p.page - 1}" ${p.page <= 1 ? "disabled" : ""}>‹ Prev</button>` +
    `<span>page ${p.page} of ${pages} (${p.total})</span> ` +
    `<button data-n="${p.page + 1}" ${p.page >= pages ? "disabled" : ""}>Next ›</button>`;
  el.querySelectorAll("button").forEach(b => b.onclick = () => go(+b.dataset.n));
}

// palette colours the lines of a chart, in order.
const palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const tps = v => v === null || v === undefined ? "-" : (v >= 100 ? v.toFixed(0) : v.toFixed(1));

// chart draws series of [epoch ms, value|null] over the last hour (or
// the time since the first sample, at least a minute, when the console is
// younger) with a time axis, a value axis and, under the chart, a legend
// with each line's colour; a null breaks a line.
function chart(svg, series) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
  const L = 50, R = 10, T = 10, B = 24, pw = w - L - R, ph = h - T - B;
  const now = Date.now(), first = Math.min(now, ...series.flatMap(s => s.points.filter(p => p[1] !== null).map(p => p[0])));
  const t0 = Math.min(now - 60e3, Math.max(now - 3600e3, first)), span = now - t0;
  const max = Math.max(1, ...series.flatMap(s => s.points.filter(p => p[1] !== null && p[0] >= t0).map(p => p[1])));
  const x = t => L + (t - t0) / span * pw, y = v => T + ph - v / max * ph;
  let out = "";
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4;
    out += `<line class="grid" x1="${L}" x2="${L + pw}" y1="${y(v)}" y2="${y(v)}"/><text class="ytick" x="${L - 4}" y="${y(v) + 4}" text-anchor="end">${v >= 100 ? v.toFixed(0) : v.toFixed(1)}</text>`;
  }
  const step = [5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3].find(st => span / st <= 8) || 600e3;
  const two = n => String(n).padStart(2, "0");
  for (let t = Math.ceil(t0 / step) * step; t <= now; t += step) {
    const d = new Date(t), lbl = two(d.getHours()) + ":" + two(d.getMinutes()) + (step < 60e3 ? ":" + two(d.getSeconds()) : "");
    out += `<line class="axis" x1="${x(t)}" x2="${x(t)}" y1="${T + ph}" y2="${T + ph + 4}"/><text class="xtick" x="${x(t)}" y="${T + ph + 16}" text-anchor="middle">${lbl}</text>`;
  }
  out += `<line class="axis" x1="${L}" x2="${L + pw}" y1="${T + ph}" y2="${T + ph}"/><line class="axis" x1="${L}" x2="${L}" y1="${T}" y2="${T + ph}"/>`;
  out += series.map((s, i) => {
    const color = palette[i % palette.length];
    const segs = [[]];
    for (const [t, v] of s.points) {
      if (t < t0) continue;
      if (v === null) { if (segs[segs.length - 1].length) segs.push([]); continue; }
      segs[segs.length - 1].push(x(t).toFixed(1) + "," + y(v).toFixed(1));
    }
    return segs.filter(g => g.length).map(g => g.length === 1
      ? `<circle class="line" data-i="${i}" r="1.5" fill="${color}" cx="${g[0].split(",")[0]}" cy="${g[0].split(",")[1]}"/>`
      : `<polyline class="line" data-i="${i}" fill="none" stroke="${color}" stroke-width="1.5" points="${g.join(" ")}"/>`).join("");
  }).join("");
  svg.innerHTML = out;
  let lg = svg.nextElementSibling;
  if (!lg || !lg.classList.contains("legend")) { lg = document.createElement("div"); lg.className = "legend"; svg.after(lg); }
  lg.innerHTML = series.length ? series.map((s, i) => `<span class="key" data-i="${i}"><svg class="swatch" width="18" height="8"><line x1="0" x2="18" y1="4" y2="4" stroke="${palette[i % palette.length]}" stroke-width="3"/></svg>${esc(s.name)}</span>`).join("")
    : `<span class="hint">no data yet</span>`;
}
// lines turns a history answer into chart series.
const lines = hv => hv.lines.map(l => ({name: l.name, points: hv.times.map((t, i) => [t, l.values[i]])}));

async function brokerOptions(sel) {
  if (sel.options.length) return;
  const bs = await api("/api/cluster");
  sel.innerHTML = bs.filter(b => b.brokerId === 0).map(b => `<option value="${esc(b.addr)}">${esc(b.brokerName)} (${esc(b.addr)})</option>`).join("");
}

const pages = {
  async overview() {
    const ov = await api("/api/overview");
    $("overview-since").textContent = ov.samples ? `Sampled since ${fmt(ov.since)} (${ov.samples} samples); TPS over the last minute. ` +
      `Tracking ${ov.tracked.topic} of at most ${ov.caps.topic} topics and ${ov.tracked.group} of at most ${ov.caps.group} groups.` : "No sample yet.";
    table($("overview-brokers"), ["Broker", "In TPS", "Out TPS"], ov.brokers.map(b => [b.broker, tps(b.inTps), tps(b.outTps)]));
    const trow = t => [link("/topics/" + enc(t.topic), t.topic), tps(t.inTps), tps(t.outTps)];
    table($("overview-topics-in"), ["Topic", "In TPS", "Out TPS"], ov.topicsIn.map(trow));
    table($("overview-topics-out"), ["Topic", "In TPS", "Out TPS"], ov.topicsOut.map(trow));
    table($("overview-groups"), ["Group", "Lag", "Consume TPS"], ov.groupsLag.map(g => [link("/groups/" + enc(g.group), g.group), g.lag, tps(g.consumeTps)]));
    chart($("chart-brokers"), lines(ov.brokerTrend));
    chart($("chart-topics"), lines(ov.topicTrend));
  },
  async mirror() {
    const m = await api("/api/mirror");
    const age = s => s < 60 ? s.toFixed(1) + " s ago" : Math.round(s / 60) + " min ago";
    const state = l => l.state + (l.down ? " (" + l.down + ")" : "");
    table($("mirror-links"), ["Link", "Source", "Target", "State", "Catch-up", "Mirrored", "Lag", "Rate (msg/s)", "Rate (KiB/s)", "Last checkpoint", "Reconnects", "Last error"],
      m.links.map(l => [l.link, (l.sourceCluster || "?") + (l.source ? " · " + l.source : ""), (l.targetCluster || "?") + (l.target ? " · " + l.target : ""),
        state(l), l.catchUp || "oldest_first", l.mirrored, l.lagMessages, tps(l.rate), tps(l.byteRate / 1024), fmt(l.checkpointTime) + " (" + age(l.checkpointAgeSeconds) + ")",
        l.reconnects, l.lastError || ""]));
    table($("mirror-topics"), ["Link", "Topic", "Messages", "Bytes", "Rate (msg/s)"],
      m.links.flatMap(l => (l.topics || []).map(t => [l.link, link("/topics/" + enc(t.topic), t.topic), t.messages, t.bytes, tps(t.rate)])));
    table($("mirror-queues"), ["Link", "Topic", "Broker", "Queue", "Position", "Max offset", "Lag", "Gap behind", "Target queue"],
      m.links.flatMap(l => (l.queues || []).map(q => [l.link, q.topic, q.broker, q.queue, q.next, q.maxOffset, q.lag,
        (q.gaps || []).reduce((n, g) => n + g.to - g.from, 0), q.dstBroker + ":" + q.dstQueue])));
    table($("mirror-dedup"), ["Broker", "Address", "Topics", "Ids held", "Capacity per topic", "Copies refused"],
      m.dedup.map(d => [d.broker, d.addr, d.windows, d.ids, d.capacity, d.refused]));
  },
  async cluster() {
    const bs = await api("/api/cluster");
    table($("cluster-table"), ["Cluster", "Broker", "Id", "Address", "Version", "In", "Out", "Connections", "Held pulls", "Busy (store)"],
      bs.map(b => [b.cluster, b.brokerName, b.brokerId, b.addr, b.runtime?.brokerVersionDesc, b.runtime?.msgPutTotalTodayNow,
        b.runtime?.msgGetTotalTodayNow, b.runtime?.quiverConnections, b.runtime?.quiverHeldPulls, b.runtime?.quiverFlowBusyStore]));
    chart($("chart-tput"), lines(await api("/api/history?kind=broker")));
    chart($("chart-lag"), lines(await api("/api/history?kind=lag")));
  },
  async topics(_, q) {
    const f = $("topic-search");
    f.q.value = q.get("q") || "";
    const size = q.get("size") || "20";
    const p = await api("/api/topics?" + new URLSearchParams({q: f.q.value, page: q.get("page") || "1", size}));
    table($("topics-table"), ["Topic", "Queues", "Messages", "In TPS", "Out TPS", "Last update"], p.items.map(t => [
      link("/topics/" + enc(t.topic), t.topic), t.queues.length, t.messages, tps(t.inTps), tps(t.outTps),
      fmt(Math.max(0, ...t.queues.map(q => q.lastUpdateTimestamp)))]));
    pager($("topics-pager"), p, n => nav("/topics?" + new URLSearchParams({q: f.q.value, page: n, size})));
  },
  async topic(name) {
    // Cleared before the first await: a send made while the page loads
    // keeps its result (cleared after it, the topic's data arriving late
    // wiped the answer of a send already made).
    $("send-result").textContent = "";
    $("topic-title").textContent = "Topic " + name;
    $("topic-messages").href = "/messages?" + new URLSearchParams({topic: name, begin: "-1h", end: "now"});
    const t = await api("/api/topics/" + enc(name));
    table($("topic-queues"), ["Broker", "Queue", "Min offset", "Max offset", "Last update"], t.queues.map(q => [q.brokerName, q.queueId, q.minOffset, q.maxOffset, fmt(q.lastUpdateTimestamp)]));
    const cs = Object.entries(t.configs || {});
    table($("topic-configs"), ["Broker", "Read queues", "Write queues", "Perm", "Order"], cs.map(([a, c]) => [a, c.readQueueNums, c.writeQueueNums, c.perm, c.order]));
    if (cs.length) { const f = $("topic-update"), c = cs[0][1]; f.readQueues.value = c.readQueueNums; f.writeQueues.value = c.writeQueueNums; f.perm.value = c.perm; f.order.checked = !!c.order; }
    const gs = await api("/api/topics/" + enc(name) + "/groups");
    table($("topic-groups"), ["Group", "Lag on this topic", "Last consumed", "Online clients", "Model", "Consume TPS (group)"], gs.map(g =>
      [link("/groups/" + enc(g.group), g.group), g.lag, fmt(g.lastConsumed), g.clients, g.messageModel, tps(g.consumeTps)]));
    chart($("chart-topic"), lines(await api("/api/history?" + new URLSearchParams({kind: "topic", name}))));
  },
  async groups() {
    const gs = await api("/api/groups");
    table($("groups-table"), ["Group", "Lag", "Online clients", "Consume TPS"], gs.map(g => [link("/groups/" + enc(g.group), g.group), g.lag, g.clients, tps(g.consumeTps)]));
  },
  async group(g) {
    $("group-dlq").href = "/dlq/" + enc(g);
    $("running-info").textContent = "";
    const st = await api("/api/group?group=" + enc(g));
    $("group-title").textContent = `${g}: lag ${st.lag}` + (st.consumeType ? ` (${st.consumeType}, ${st.messageModel})` : "");
    table($("group-queues"), ["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Last consumed"],
      st.queues.map(q => [q.topic, q.brokerName, q.queueId, q.brokerOffset, q.consumerOffset, q.lag, fmt(q.lastTimestamp)]));
    table($("group-clients"), ["Client id", "Address", "Language", "Version", "Broker", ""], st.clients.map(c =>
      [c.clientId, c.clientAddr, c.language, c.version, c.broker, {html: `<button data-client="${esc(c.clientId)}">Running info</button>`}]));
    $("group-clients").querySelectorAll("button[data-client]").forEach(b => b.onclick = () =>
      api("/api/consumers/running?" + new URLSearchParams({group: g, clientId: b.dataset.client}))
        .then(r => { $("running-info").textContent = r.runningInfo; }).catch(show));
    const cfg = await api("/api/groups/" + enc(g) + "/config");
    const cs = Object.entries(cfg.configs || {});
    table($("group-configs"), ["Broker", "Consume enabled", "Broadcast", "Orderly", "From min", "Retry queues", "Retry max", "Retry policy", "Broker id", "Slow broker id"], cs.map(([b, c]) =>
      [b, c.consumeEnable, c.consumeBroadcastEnable, c.consumeMessageOrderly, c.consumeFromMinEnable, c.retryQueueNums, c.retryMaxTimes,
        c.groupRetryPolicy ? JSON.stringify(c.groupRetryPolicy) : "-", c.brokerId, c.whichBrokerWhenConsumeSlowly]));
    $("group-manage").hidden = !cs.length;
    if (cs.length) fillGroupForm($("group-update"), cs[0][1]);
    chart($("chart-group"), lines(await api("/api/history?" + new URLSearchParams({kind: "group", name: g}))));
  },
  async producers(g, q) {
    g = g || q.get("group") || "";
    $("producer-form").group.value = g;
    if (!g) { $("producers-table").innerHTML = ""; return; }
    const cs = await api("/api/producers?group=" + enc(g));
    table($("producers-table"), ["Client id", "Address", "Language", "Version", "Broker"], cs.map(c => [c.clientId, c.clientAddr, c.language, c.version, c.broker]));
  },
  async messages(id, q) {
    const f = $("search");
    for (const k of ["topic", "key", "begin", "end"]) if (q.has(k)) f[k].value = q.get(k);
    f.id.value = id || "";
    $("message-tracks").innerHTML = "";
    if (id) { messageRows(await api("/api/messages?id=" + enc(id))); return showTracks(id); }
    if (!q.get("topic")) { $("messages-table").innerHTML = ""; $("messages-pager").innerHTML = ""; $("message-detail").textContent = ""; return; }
    const params = new URLSearchParams(q);
    if (!q.get("key")) { params.set("page", q.get("page") || "1"); params.set("size", q.get("size") || "50"); }
    const res = await api("/api/messages?" + params);
    if (Array.isArray(res)) { messageRows(res); $("messages-pager").innerHTML = ""; return; }
    messageRows(res.items);
    pager($("messages-pager"), res, n => { const p = new URLSearchParams(q); p.set("page", n); nav("/messages?" + p); });
  },
  async dlq(g) {
    $("dlq-form").group.value = g || "";
    $("dlq-resend-all").hidden = !g || !info.admin;
    if (!g) { $("dlq-table").innerHTML = ""; return; }
    await listDLQ(g);
  },
  async trace(id, q) {
    const f = $("trace-form");
    f.msgId.value = id || "";
    f.topic.value = q.get("topic") || "";
    for (const t of ["trace-pub", "trace-groups", "trace-records"]) $(t).innerHTML = "";
    $("trace-note").textContent = "";
    if (!id) return;
    const tr = await api("/api/trace?" + new URLSearchParams({msgId: id, topic: f.topic.value}));
    $("trace-note").textContent = tr.note || `${tr.records.length} trace record(s) in ${tr.traceTopic}`;
    table($("trace-pub"), ["Event", "Producer group", "Topic", "Tags", "Keys", "Client", "Store host", "At", "Cost (ms)", "Status"], tr.pub.map(r =>
      [r.type, r.group, r.topic, r.tags, r.keys, r.clientHost, r.storeHost, fmt(r.timestamp), r.costTime, r.status]));
    table($("trace-groups"), ["Consumer group", "Deliveries", "Failed", "Last status", "Last at", "Last cost (ms)", "Retry times"], tr.groups.map(g =>
      [link("/groups/" + enc(g.group), g.group), g.deliveries, g.failed, g.status, fmt(g.lastAt), g.costTime, g.retryTimes]));
    table($("trace-records"), ["Event", "Group", "Client", "At", "Cost (ms)", "Status", "Retry", "Request id"], tr.records.map(r =>
      [r.type, r.group, r.clientHost, fmt(r.timestamp), r.costTime, r.status, r.retryTimes || 0, r.requestId]));
  },
  async offsets() {},
  async config() {
    const sel = $("config-broker");
    await brokerOptions(sel);
    const c = await api("/api/broker/config?broker=" + enc(sel.value));
    table($("config-table"), ["Key", "Value"], Object.keys(c.config).sort().map(k => [k, c.config[k]]));
  },
  async acl() {
    const sel = $("acl-broker");
    await brokerOptions(sel);
    await Promise.all([acl2(sel.value), acl1(sel.value)]);
  },
  async login() {},
};

// acl2 shows a broker's ACL 2.0 users and policy entries (or that ACL 2.0
// is off), with the filter of the form above them.
async function acl2(broker) {
  $("acl2-error").textContent = "";
  $("acl2-users").innerHTML = $("acl2-acls").innerHTML = "";
  const f = formData($("acl2-filter"));
  let v;
  try { v = await api(`/api/acl2?broker=${enc(broker)}&user=${enc(f.user)}&subject=${enc(f.subject)}&resource=${enc(f.resource)}`); } catch (e) { $("acl2-error").textContent = e.message; return; }
  $("acl2-note").textContent = v.note || "";
  $("acl2").hidden = !v.enabled;
  if (!v.enabled) return;
  const uhead = ["Username", "Type", "Status", "Policies"];
  if (info.admin) uhead.push("");
  table($("acl2-users"), uhead, v.users.map(u => {
    const r = [u.username, u.userType, u.userStatus, {html: `<a href="#" data-subject="User:${esc(u.username)}">show</a>`}];
    if (info.admin) r.push({html: `<button class="danger" data-user="${esc(u.username)}">Delete…</button>`});
    return r;
  }));
  const ahead = ["Subject", "Policy type", "Resource", "Actions", "Source IPs", "Decision"];
  if (info.admin) ahead.push("");
  table($("acl2-acls"), ahead, v.acls.map(a => {
    const r = [a.subject, a.policyType, a.resource, (a.actions || []).join(", "), (a.sourceIps || []).join(", ") || "any", a.decision];
    if (info.admin) r.push({html: `<button class="danger" data-subject="${esc(a.subject)}" data-resource="${esc(a.resource)}" data-type="${esc(a.policyType)}">Delete…</button>`});
    return r;
  }));
  $("acl2-users").querySelectorAll("a[data-subject]").forEach(a => a.onclick = e => {
    e.preventDefault(); e.stopPropagation();
    $("acl2-filter").subject.value = a.dataset.subject; acl2(broker).catch(show);
  });
  $("acl2-users").querySelectorAll("button[data-user]").forEach(b => b.onclick = async () => {
    const u = b.dataset.user;
    if (!await ask(`Delete the user ${u} and its policies on every master broker? Clients signing as ${u} are refused from then on.`, u)) return;
    try { await post(`/api/acl2/users/${enc(u)}/delete`, {confirm: u}); notice(`deleted user ${u}`); await acl2(broker); } catch (e) { show(e); }
  });
  $("acl2-acls").querySelectorAll("button[data-resource]").forEach(b => b.onclick = async () => {
    const d = b.dataset;
    if (!await ask(`Delete the ${d.type} policy entry of ${d.subject} on ${d.resource} on every master broker?`, d.resource)) return;
    try {
      await post("/api/acl2/acls/delete", {subject: d.subject, resource: d.resource, policyType: d.type, confirm: d.resource});
      notice(`deleted ${d.resource} of ${d.subject}`); await acl2(broker);
    } catch (e) { show(e); }
  });
}

// acl1 shows a broker's ACL 1.0 accounts (plain_acl.yml).
async function acl1(broker) {
  $("acl1-error").textContent = "";
  $("acl-table").innerHTML = "";
  let c;
  try { c = await api("/api/acl?broker=" + enc(broker)); } catch (e) { $("acl1-error").textContent = e.message; return; }
  $("acl-white").textContent = "Global white addresses: " + ((c.acl.globalWhiteAddrs || []).join(", ") || "none");
  const head = ["Access key", "Admin", "White address", "Default topic perm", "Default group perm", "Topic perms", "Group perms"];
  if (info.admin) head.push("");
  table($("acl-table"), head, (c.acl.plainAccessConfigs || []).map(a => {
    const r = [a.accessKey, a.admin, a.whiteRemoteAddress, a.defaultTopicPerm, a.defaultGroupPerm, (a.topicPerms || []).join(", "), (a.groupPerms || []).join(", ")];
    if (info.admin) r.push({html: `<button class="danger" data-ak="${esc(a.accessKey)}">Delete…</button>`});
    return r;
  }));
  $("acl-table").querySelectorAll("button[data-ak]").forEach(b => b.onclick = async () => {
    if (!await ask(`Delete the ACL account ${b.dataset.ak} on every master broker?`, b.dataset.ak)) return;
    try { await post("/api/acl/delete", {accessKey: b.dataset.ak}); notice(`deleted account ${b.dataset.ak}`); await acl1(broker); } catch (e) { show(e); }
  });
}

// showTracks shows which groups have consumed message id.
async function showTracks(id) {
  const t = await api("/api/messages/track?id=" + enc(id));
  const head = ["Consumer group", "Status", ""];
  if (info.admin) head.push("");
  table($("message-tracks"), head, t.tracks.map(k => {
    const r = [link("/groups/" + enc(k.consumerGroup), k.consumerGroup), k.trackType, k.detail];
    if (info.admin) r.push(k.trackType === "NOT_ONLINE" ? "" : {html: `<button data-group="${esc(k.consumerGroup)}">Resend to group…</button>`});
    return r;
  }));
  $("consume-result").textContent = "";
  $("message-tracks").querySelectorAll("button[data-group]").forEach(b => b.onclick = async () => {
    const g = b.dataset.group;
    if (!await ask(`Have a consumer of ${g} consume message ${id} again now? Its handler runs once more.`)) return;
    try {
      const r = await post("/api/messages/consume", {id, group: g});
      $("consume-result").textContent = `consumed again by ${r.clientId}: ` + JSON.stringify(r.result);
    } catch (err) { show(err); }
  });
}
function messageRows(ms) {
  table($("messages-table"), ["Topic", "Queue", "Offset", "Msg id", "Offset msg id", "Tags", "Keys", "Stored", "Body", ""],
    ms.map((m, i) => [m.topic, m.queueId, m.queueOffset, m.msgId, {html: `<a href="/messages/${enc(m.offsetMsgId)}" data-i="${i}">${esc(m.offsetMsgId)}</a>`}, m.tags, m.keys, fmt(m.storeTimestamp), m.body,
      link("/trace/" + enc(m.msgId), "Trace")]));
  $("messages-table").querySelectorAll("a[data-i]").forEach(a => a.onclick = e => {
    e.preventDefault(); e.stopPropagation(); history.pushState(null, "", a.getAttribute("href"));
    $("message-detail").textContent = JSON.stringify(ms[+a.dataset.i], null, 2);
    showTracks(ms[+a.dataset.i].offsetMsgId).catch(show);
  });
  $("message-detail").textContent = ms.length === 1 ? JSON.stringify(ms[0], null, 2) : "";
}

async function listDLQ(group) {
  const ms = await api("/api/dlq?group=" + enc(group));
  const head = ["Queue", "Offset", "Msg id", "Original topic", "Reconsumes", "Stored", "Body"];
  if (info.admin) head.push("");
  table($("dlq-table"), head, ms.map(m => {
    const r = [m.queueId, m.queueOffset, m.msgId, m.properties?.RETRY_TOPIC, m.reconsumeTimes, fmt(m.storeTimestamp), m.body];
    if (info.admin) r.push({html: `<button data-id="${esc(m.msgId)}">Resend</button>`});
    return r;
  }));
  $("dlq-table").querySelectorAll("button[data-id]").forEach(b => b.onclick = () => resend(group, {msgId: b.dataset.id}));
}
async function resend(group, what) {
  try {
    const r = await post("/api/dlq/resend", Object.assign({group}, what));
    $("dlq-result").textContent = `resent ${r.length} message(s) to %RETRY%${group}`;
    await listDLQ(group);
  } catch (e) { show(e); }
}

// Forms.
$("topic-search").onsubmit = e => { e.preventDefault(); nav("/topics?" + new URLSearchParams({q: e.target.q.value})); };
$("topic-create").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target); d.mode = "create";
  try { await post("/api/topics", d); nav("/topics/" + enc(d.topic), `created topic ${d.topic}`); } catch (err) { show(err); }
};
$("topic-update").onsubmit = async e => {
  e.preventDefault(); show();
  const name = current().arg, d = formData(e.target); d.mode = "update"; d.topic = name;
  try { await post("/api/topics", d); notice(`updated topic ${name}`); await pages.topic(name); } catch (err) { show(err); }
};
$("topic-delete").onclick = async () => {
  const name = current().arg;
  if (!await ask(`Delete topic ${name} and its messages on every broker?`, name)) return;
  try { await post("/api/topics/" + enc(name) + "/delete", {confirm: name}); nav("/topics", `deleted topic ${name}`); } catch (err) { show(err); }
};
$("send-form").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target); d.topic = current().arg;
  try { const r = await post("/api/messages/send", d); $("send-result").textContent = "sent " + JSON.stringify(r, null, 2); } catch (err) { show(err); }
};
// Group forms: checkboxes are sent as true/false, so an update sets them.
const groupBools = ["consumeEnable", "consumeBroadcastEnable", "consumeMessageOrderly", "consumeFromMinEnable"];
function groupData(f) {
  const d = formData(f);
  for (const k of groupBools) d[k] = f[k].checked ? "true" : "false";
  return d;
}
function fillGroupForm(f, c) {
  for (const k of groupBools) f[k].checked = !!c[k];
  for (const k of ["retryQueueNums", "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly"]) f[k].value = c[k] ?? "";
  f.groupRetryPolicy.value = c.groupRetryPolicy ? JSON.stringify(c.groupRetryPolicy) : "";
}
$("group-create").onsubmit = async e => {
  e.preventDefault(); show();
  const d = groupData(e.target); d.mode = "create";
  if (!await ask(`Create consumer group ${d.group} on every master broker?`)) return;
  try { await post("/api/groups", d); nav("/groups/" + enc(d.group), `created group ${d.group}`); } catch (err) { show(err); }
};
$("group-update").onsubmit = async e => {
  e.preventDefault(); show();
  const g = current().arg, d = groupData(e.target); d.mode = "update"; d.group = g;
  if (!await ask(`Update consumer group ${g} on the brokers holding it? Its consumers see the change at once.`)) return;
  try { await post("/api/groups", d); notice(`updated group ${g}`); await pages.group(g); } catch (err) { show(err); }
};
$("group-delete").onclick = async () => {
  const g = current().arg;
  if (!await ask(`Delete consumer group ${g}'s subscription config on every broker? Its committed offsets stay; online consumers are not stopped.`, g)) return;
  try { await post("/api/groups/" + enc(g) + "/delete", {confirm: g}); nav("/groups", `deleted group ${g}`); } catch (err) { show(err); }
};
$("producer-form").onsubmit = e => { e.preventDefault(); nav("/producers/" + enc(e.target.group.value)); };
$("search").onsubmit = e => {
  e.preventDefault();
  const d = formData(e.target);
  if (d.id.trim()) { nav("/messages/" + enc(d.id.trim())); return; }
  delete d.id; if (!d.key) delete d.key;
  nav("/messages?" + new URLSearchParams(d));
};
$("trace-form").onsubmit = e => {
  e.preventDefault();
  const d = formData(e.target), p = d.topic.trim() ? "?" + new URLSearchParams({topic: d.topic.trim()}) : "";
  nav("/trace/" + enc(d.msgId.trim()) + p);
};
$("dlq-form").onsubmit = e => { e.preventDefault(); nav("/dlq/" + enc(e.target.group.value)); };
$("dlq-resend-all").onclick = async () => {
  const g = current().arg;
  if (!await ask(`Resend every dead letter of ${g} to %RETRY%${g}?`)) return;
  await resend(g, {all: "true"});
};
$("reset-form").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target);
  if (!await ask(`Reset the offsets of group ${d.group} on topic ${d.topic} to ${d.timestamp}? Its consumers will re-read or skip messages.`)) return;
  try {
    const rs = await post("/api/offset/reset", d);
    table($("reset-table"), ["Broker", "Queue", "New offset"], rs.map(r => [r.broker, r.queue, r.offset]));
  } catch (err) { show(err); }
};
$("config-form").onsubmit = e => { e.preventDefault(); show(); pages.config().catch(show); };
$("config-edit").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target); d.broker = $("config-broker").value;
  if (!await ask(`Set ${d.key} = ${d.value} on broker ${d.broker}?`)) return;
  try { await post("/api/broker/config", d); notice(`set ${d.key} on ${d.broker}`); await pages.config(); } catch (err) { show(err); }
};
$("acl-form").onsubmit = e => { e.preventDefault(); show(); pages.acl().catch(show); };
$("acl-edit").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target); d.admin = e.target.admin.checked ? "true" : "false";
  if (!await ask(`Save the ACL account ${d.accessKey} on every master broker?`)) return;
  try { await post("/api/acl", d); notice(`saved account ${d.accessKey}`); e.target.secretKey.value = ""; await acl1($("acl-broker").value); } catch (err) { show(err); }
};
$("acl2-filter").onsubmit = e => { e.preventDefault(); show(); acl2($("acl-broker").value).catch(show); };
$("acl2-user").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target);
  if (d.mode === "update") for (const k of ["password", "userType", "userStatus"]) if (!d[k]) delete d[k];
  if (!await ask(`${d.mode === "create" ? "Create" : "Update"} the user ${d.username} on every master broker?`)) return;
  try { await post("/api/acl2/users", d); notice(`${d.mode}d user ${d.username}`); e.target.password.value = ""; await acl2($("acl-broker").value); } catch (err) { show(err); }
};
$("acl2-acl").onsubmit = async e => {
  e.preventDefault(); show();
  const d = formData(e.target);
  if (!await ask(`${d.mode === "create" ? "Create" : "Update"}: ${d.decision} ${d.actions} on ${d.resources} for ${d.subject}${d.sourceIps ? " from " + d.sourceIps : ""}, on every master broker?`)) return;
  try { await post("/api/acl2/acls", d); notice(`saved the policy of ${d.subject}`); await acl2($("acl-broker").value); } catch (err) { show(err); }
};
$("login-form").onsubmit = async e => {
  e.preventDefault(); show();
  try { setInfo(await post("/api/login", formData(e.target))); e.target.reset(); route(); } catch (err) { show(err); }
};
$("logout").onclick = async () => { try { setInfo(await post("/api/logout", {})); showLogin(); } catch (err) { show(err); } };

// Routing.
function current() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  const p = parts[0] || "overview", arg = parts.slice(1).join("/");
  const detail = {topics: "topic", groups: "group"};
  return {nav: p, page: arg && detail[p] ? detail[p] : p, arg};
}
// nav goes to url; msg is a notice shown there.
function nav(url, msg) { history.pushState(null, "", url); route(); notice(msg); }
function activate(id, navp) {
  document.querySelectorAll("header a[data-p]").forEach(a => a.classList.toggle("on", a.dataset.p === navp));
  document.querySelectorAll("main section").forEach(s => s.classList.toggle("on", s.id === id));
}
function showLogin() { activate("login", ""); }
function route() {
  show(); notice();
  if (info.auth && !info.user) { showLogin(); return; }
  const c = current();
  if (!pages[c.page]) { show("no page " + location.pathname); return; }
  activate(c.page, c.nav);
  pages[c.page](c.arg, new URLSearchParams(location.search)).catch(show);
}
function setInfo(i) {
  info = i; csrf = i.csrf;
  $("mode").textContent = (i.admin ? "admin" : "read-only") + " · " + i.namesrv + (i.user ? " · " + i.user : "");
  $("nav-offsets").hidden = !i.admin;
  $("logout").hidden = !i.user;
  document.body.classList.toggle("admin", !!i.admin);
  document.body.classList.toggle("auth-password", i.auth === "password");
  document.body.classList.toggle("auth-acl", i.auth === "acl");
}
document.addEventListener("click", e => {
  const a = e.target.closest("a[href^='/']");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault(); nav(a.getAttribute("href"));
});
window.onpopstate = route;
api("/api/session").then(i => { setInfo(i); route(); }).catch(show);
setInterval(() => { const c = current(); if (document.querySelector("section.on") && ["overview", "cluster", "groups", "mirror"].includes(c.page)) pages[c.page](c.arg, new URLSearchParams(location.search)).catch(show); }, 10000);
