"use strict";
let info = {admin:false};
const $ = id => document.getElementById(id);
const esc = s => String(s ?? "").replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
const fmt = ms => ms > 0 ? new Date(ms).toISOString() : "-";
let csrf = "";
async function api(path, opts) {
  opts = opts || {};
  if (opts.method && opts.method !== "GET") opts.headers = Object.assign({"X-Quiver-CSRF": csrf}, opts.headers || {});
  const r = await fetch(path, opts);
  const v = await r.json();
  if (!r.ok) throw new Error(v.error || r.statusText);
  return v;
}
function show(err) { $("error").textContent = err ? String(err.message || err) : ""; }
function table(el, head, rows) {
  el.innerHTML = "<tr>" + head.map(h => "<th>" + esc(h) + "</th>").join("") + "</tr>" +
    rows.map(r => "<tr>" + r.map(c => typeof c === "object" && c && c.html ? "<td>" + c.html + "</td>" : "<td>" + esc(c) + "</td>").join("") + "</tr>").join("");
}
function chart(svg, series) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
  let all = series.flatMap(s => s.points.map(p => p[1])); const max = Math.max(1, ...all);
  const t0 = Date.now() - 3600e3;
  svg.innerHTML = series.map((s, i) => {
    const pts = s.points.map(([t, v]) => ((t - t0) / 3600e3 * w).toFixed(1) + "," + (h - 14 - v / max * (h - 24)).toFixed(1)).join(" ");
    const color = ["#1f77b4","#d62728","#2ca02c","#9467bd","#ff7f0e"][i % 5];
    return `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${pts}"/><text x="${6 + i * 140}" y="${h - 2}" fill="${color}" font-size="11">${esc(s.name)}</text>`;
  }).join("") + `<text x="${w - 70}" y="12" font-size="11">max ${max.toFixed(1)}</text>`;
}
const loaders = {
  async cluster() {
    const bs = await api("/api/cluster");
    table($("cluster-table"), ["Cluster","Broker","Id","Address","Version","In","Out","Connections","Held pulls","Busy (store)"],
      bs.map(b => [b.cluster, b.brokerName, b.brokerId, b.addr, b.runtime?.brokerVersionDesc, b.runtime?.msgPutTotalTodayNow,
        b.runtime?.msgGetTotalTodayNow, b.runtime?.quiverConnections, b.runtime?.quiverHeldPulls, b.runtime?.quiverFlowBusyStore]));
    const hist = await api("/api/history");
    const rate = k => hist.slice(1).map((s, i) => [s.time, Math.max(0, (s[k] - hist[i][k]) / ((s.time - hist[i].time) / 1000))]);
    chart($("chart-tput"), [{name: "in", points: rate("in")}, {name: "out", points: rate("out")}]);
    const groups = [...new Set(hist.flatMap(s => Object.keys(s.lag || {})))];
    chart($("chart-lag"), groups.map(g => ({name: g, points: hist.map(s => [s.time, (s.lag || {})[g] || 0])})));
  },
  async topics() {
    const ts = await api("/api/topics");
    table($("topics-table"), ["Topic","Queues","Messages","Last update"], ts.map(t => [
      {html: `<a href="#" data-topic="${esc(t.topic)}">${esc(t.topic)}</a>`}, t.queues.length, t.messages,
      fmt(Math.max(0, ...t.queues.map(q => q.lastUpdateTimestamp)))]));
    $("topics-table").querySelectorAll("a[data-topic]").forEach(a => a.onclick = e => { e.preventDefault(); topicDetail(ts.find(t => t.topic === a.dataset.topic)); });
  },
  async groups() {
    const gs = await api("/api/groups");
    table($("groups-table"), ["Group","Lag","Online clients"], gs.map(g => [{html: `<a href="#" data-group="${esc(g.group)}">${esc(g.group)}</a>`}, g.lag, g.clients]));
    $("groups-table").querySelectorAll("a[data-group]").forEach(a => a.onclick = e => { e.preventDefault(); groupDetail(a.dataset.group).catch(show); });
  },
  async messages() {}, async dlq() {}, async offsets() {},
};
function topicDetail(t) {
  $("topic-title").textContent = t.topic;
  table($("topic-queues"), ["Broker","Queue","Min offset","Max offset","Last update"], t.queues.map(q => [q.brokerName, q.queueId, q.minOffset, q.maxOffset, fmt(q.lastUpdateTimestamp)]));
}
async function groupDetail(g) {
  const st = await api("/api/group?group=" + encodeURIComponent(g));
  $("group-title").textContent = `${g}: lag ${st.lag}`;
  table($("group-queues"), ["Topic","Broker","Queue","Broker offset","Consumer offset","Lag","Last consumed"],
    st.queues.map(q => [q.topic, q.brokerName, q.queueId, q.brokerOffset, q.consumerOffset, q.lag, fmt(q.lastTimestamp)]));
  table($("group-clients"), ["Client id","Address","Language","Version"], st.clients.map(c => [c.clientId, c.clientAddr, c.language, c.version]));
}
function messageRows(ms) {
  table($("messages-table"), ["Topic","Queue","Offset","Msg id","Offset msg id","Tags","Keys","Stored","Body"],
    ms.map((m, i) => [m.topic, m.queueId, m.queueOffset, m.msgId, {html: `<a href="#" data-i="${i}">${esc(m.offsetMsgId)}</a>`}, m.tags, m.keys, fmt(m.storeTimestamp), m.body]));
  $("messages-table").querySelectorAll("a[data-i]").forEach(a => a.onclick = e => { e.preventDefault(); $("message-detail").textContent = JSON.stringify(ms[+a.dataset.i], null, 2); });
  $("message-detail").textContent = ms.length === 1 ? JSON.stringify(ms[0], null, 2) : "";
}
$("search").onsubmit = e => { e.preventDefault(); show();
  api("/api/messages?" + new URLSearchParams(new FormData(e.target))).then(messageRows).catch(show); };
async function listDLQ(group) {
  const ms = await api("/api/dlq?group=" + encodeURIComponent(group));
  const head = ["Queue","Offset","Msg id","Original topic","Reconsumes","Stored","Body"];
  if (info.admin) head.push("");
  table($("dlq-table"), head, ms.map(m => { const r = [m.queueId, m.queueOffset, m.msgId, m.properties?.RETRY_TOPIC, m.reconsumeTimes, fmt(m.storeTimestamp), m.body];
    if (info.admin) r.push({html: `<button data-id="${esc(m.msgId)}">Resend</button>`}); return r; }));
  $("dlq-table").querySelectorAll("button[data-id]").forEach(b => b.onclick = () => resend(group, b.dataset.id));
}
async function resend(group, id) {
  try { const r = await api("/api/dlq/resend", {method: "POST", body: new URLSearchParams({group, msgId: id})});
    $("dlq-result").textContent = `resent ${r.length} message(s) to %RETRY%${group}`; await listDLQ(group); } catch (e) { show(e); }
}
$("dlq-form").onsubmit = e => { e.preventDefault(); show(); listDLQ(new FormData(e.target).get("group")).catch(show); };
$("reset-form").onsubmit = e => { e.preventDefault(); show();
  api("/api/offset/reset", {method: "POST", body: new URLSearchParams(new FormData(e.target))})
    .then(rs => table($("reset-table"), ["Broker","Queue","New offset"], rs.map(r => [r.broker, r.queue, r.offset]))).catch(show); };
function go(p) {
  document.querySelectorAll("header a").forEach(a => a.classList.toggle("on", a.dataset.p === p));
  document.querySelectorAll("section").forEach(s => s.classList.toggle("on", s.id === p));
  show(); loaders[p]().catch(show);
}
document.querySelectorAll("header a[data-p]").forEach(a => a.onclick = () => go(a.dataset.p));
api("/api/session").then(i => { info = i; csrf = i.csrf; $("mode").textContent = (i.admin ? "admin" : "read-only") + " · " + i.namesrv;
  $("nav-offsets").hidden = !i.admin; go("cluster"); }).catch(show);
setInterval(() => { const on = document.querySelector("section.on"); if (on && (on.id === "cluster" || on.id === "topics" || on.id === "groups")) loaders[on.id]().catch(show); }, 10000);
