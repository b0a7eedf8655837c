// The cluster page: draws the API answers the server embedded in the page (before the load event, so
// nothing catches it empty), then polls the API and redraws. Plain DOM, no dependencies; every string
// from the API goes in through textContent (job names are user input).
"use strict";

const params = new URLSearchParams(location.search);
const EVERY_S = Math.max(1, Number(params.get("every")) || 5);
const ROUNDS = 40;
let last = null;  // the newest answers: {cluster, jobs, rounds}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c === null || c === undefined ? "" : c);
  return e;
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(`${path}: ${body.error || r.status}`);
  return body;
}

function user() { return document.getElementById("user").value; }

function jobLink(id) { return el("a", { href: `#job-${id}`, class: "job-link" }, id); }

function clock(iso) { return iso ? new Date(iso).toLocaleTimeString() : "-"; }

function pct(v) { return v === null || v === undefined ? "-" : `${Math.round(v * 100)}%`; }

function drawFigures(c) {
  const f = c.last_finished;
  document.getElementById("figures").textContent = f === null || f === undefined
    ? "no round has finished yet"
    : `last finished round ${f.round} (${f.policy}, ${f.status}, ended ${clock(f.finished_at)}, took `
      + `${f.duration_s} s): GPUs placed ${f.gpus_busy} of ${f.gpus_total} (${pct(f.utilization)}), `
      + `${f.running} running, ${f.pending} pending, ${f.packed_pairs} packed pair(s), started ${f.started}, `
      + `migrated ${f.migrated}, preempted ${f.preempted}; decision ${Number(f.decision_ms).toFixed(1)} ms`;
}

function drawMap(c) {
  const who = user();
  const pendingCount = last.jobs.jobs.filter(r => r.state === "PENDING").length;
  document.getElementById("map-title").textContent =
    `${c.gpus_busy} of ${c.gpus_total} GPUs held by ${Object.values(c.jobs).filter(j => j.gpus).length} job(s), `
    + `${c.packed.length} packed pair(s); ${pendingCount} pending`;
  const incoming = {};  // "node:gpu" -> planned arrivals
  for (const p of c.planned) {
    for (const part of p.to ? p.to.split(";") : []) {
      const [node, spec] = part.split(":");
      for (const r of spec.split(",")) {
        const [lo, hi] = r.split("-").map(Number);
        for (let i = lo; i <= (hi === undefined || isNaN(hi) ? lo : hi); i++) {
          (incoming[`${node}:${i}`] ||= []).push(p);
        }
      }
    }
  }
  const leaving = new Map(c.planned.filter(p => p.from).map(p => [p.job, p]));
  const width = Math.max(0, ...c.nodes.map(n => n.gpus.length));
  const head = el("tr", {}, el("th", {}, "NODE"));
  for (let i = 0; i < width; i++) head.append(el("th", {}, `GPU${i}`));
  const table = el("table", {}, el("thead", {}, head));
  const body = el("tbody");
  for (const n of c.nodes) {
    const row = el("tr", { "data-node": n.name }, el("td", { class: "node" }, n.name));
    n.gpus.forEach((jobs, i) => {
      const cls = ["gpu", !jobs.length ? "free" : jobs.length > 1 ? "pair" : "busy"];
      const info = jobs.map(j => c.jobs[j] || {});
      if (info.some(j => j.state === "STARTING")) cls.push("starting");
      if (info.some(j => j.state === "PREEMPTING")) cls.push("stopping");
      if (who && jobs.length && !info.some(j => j.user === who)) cls.push("dim");
      const here = incoming[`${n.name}:${i}`] || [];
      if (here.length) cls.push("planned");
      const td = el("td", { class: cls.join(" "), "data-gpu": `${n.name}:${i}`, "data-jobs": jobs.join("+") });
      if (!jobs.length && !here.length) td.append("-");
      jobs.forEach((j, k) => {
        const line = el("div", { class: "occupant" }, jobLink(j), " ",
          el("span", { class: "name" }, info[k].name || ""), " ", el("span", { class: "who" }, info[k].user || "?"));
        const away = leaving.get(j);
        if (away) line.append(el("span", { class: "away" }, away.kind === "stop" ? " stops" : ` \u2192 ${away.to}`));
        td.append(line);
      });
      for (const p of here) {
        td.append(el("div", { class: "incoming" }, `\u2192 ${p.job} (${p.kind}`
          + (p.from ? ` from ${p.from})` : ")")));
      }
      td.title = jobs.map((j, k) => `${j} ${info[k].name || ""} (${info[k].user || "?"}) ${info[k].state || ""}`
        + (info[k].held ? `: ${info[k].held}` : "")).concat(
        here.map(p => `planned by round ${c.round}: ${p.kind} ${p.job} here`)).join("\n");
      row.append(td);
    });
    body.append(row);
  }
  table.append(body);
  document.getElementById("map").replaceChildren(c.nodes.length ? table : el("p", {}, "no GPUs known yet"));
  const planned = c.planned.filter(p => !who || (c.jobs[p.job] || {}).user === who);
  document.getElementById("planned").replaceChildren(...planned.map(p => el("li", { "data-planned": p.job },
    `planned by round ${c.round} (${c.round_status}): `, jobLink(p.job), ` ${p.kind} `
    + (p.kind === "start" ? `on ${p.to}` : p.kind === "move" ? `${p.from} \u2192 ${p.to}` : `(leaves ${p.from})`))));
}

function drawQueue(j, c) {
  const who = user();
  const tbody = document.querySelector("#queue tbody");
  const jobs = j.jobs.filter(r => !who || r.user === who).sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9)
    || Number(a.job_id) - Number(b.job_id));
  document.getElementById("queue-title").textContent =
    `${jobs.length} job(s)` + (who ? ` of ${who}` : "") + (j.round !== null ? `, ranks from round ${j.round}` : "")
    + (j.truncated ? " (truncated)" : "");
  tbody.replaceChildren(...jobs.map(r => {
    const placed = r.state === "RUNNING" || r.state === "STARTING";
    const held = (c.jobs[r.job_id] || {}).held;
    const where = held ? `(${held})` : placed ? (r.gpus || r.nodes) + (r.packed_with ? ` (packed with ${r.packed_with})` : "")
      : `(${r.reason || "None"})`;
    return el("tr", { class: held ? "held" : placed ? "running" : "pending", "data-job": r.job_id },
      el("td", {}, r.rank ?? "-"), el("td", {}, jobLink(r.job_id)), el("td", {}, r.name), el("td", {}, r.user),
      el("td", { class: "state" }, held ? "HELD" : r.state), el("td", {}, r.num_gpus),
      el("td", { class: "reason" }, where));
  }));
}

async function drawJob() {
  const box = document.getElementById("job");
  const m = location.hash.match(/^#job-(\d+)$/);
  if (!m) { box.hidden = true; return; }
  let e;
  try { e = await getJson(`/api/jobs/${m[1]}`); } catch (err) {
    box.hidden = false;
    box.replaceChildren(el("h2", {}, `Job ${m[1]}`), el("p", { class: "error" }, err.message));
    return;
  }
  const rows = [];
  for (const h of e.history) {
    rows.push([`round ${h.round}`, `${h.kind}${h.between_rounds ? " (between rounds)" : ""}`, h.status,
      [h.from, h.to].filter(Boolean).join(" \u2192 ") + (h.error ? ` (${h.error})` : "")]);
  }
  for (const a of e.admin) rows.push([clock(a.time), `${a.command} by ${a.user}`, a.status, a.note || a.nodes || ""]);
  for (const v of e.events) rows.push([clock(v.time), v.kind, "", v.message]);
  box.hidden = false;
  box.replaceChildren(
    el("h2", {}, `Job ${e.job} `, el("span", { class: "sub" }, `${e.name} (${e.user}), ${e.state}`
      + (e.reason ? `: ${e.reason}` : ""))),
    el("p", {}, `${e.gpus} GPU(s)` + (e.placement ? ` on ${e.placement}` : "")
      + (e.last_round ? `; rank ${e.last_round.rank} of ${e.last_round.of} in round ${e.last_round.round}` : "")
      + `; ${e.preemptions} preemption(s), ${e.migrations} migration(s); submitted ${clock(e.submitted)}. `,
      el("a", { href: `/api/jobs/${e.job}`, class: "json" }, `/api/jobs/${e.job}`), " ",
      el("a", { href: "#" }, "close")),
    rows.length ? el("table", { class: "history" },
      el("thead", {}, el("tr", {}, ...["WHEN", "WHAT", "STATUS", "DETAIL"].map(h => el("th", {}, h)))),
      el("tbody", {}, ...rows.map(r => el("tr", {}, ...r.map(x => el("td", {}, x))))))
      : el("p", {}, "nothing recorded for this job yet"));
}

const SERIES = [
  ["utilization", "GPUs placed", r => r.utilization, v => pct(v), 1],
  ["running", "running jobs", r => r.running, v => String(v)],
  ["packed_pairs", "packed pairs", r => r.packed_pairs, v => String(v)],
  ["migrated", "migrations", r => r.migrated, v => String(v)],
  ["preempted", "preemptions", r => r.preempted, v => String(v)],
  ["decision_ms", "decision time", r => r.decision_ms, v => `${Number(v).toFixed(1)} ms`],
];
const W = 600;  // the SVGs' time axis in viewBox units

function drawTimeline(rs) {
  const rounds = rs.rounds;
  const ns = "http://www.w3.org/2000/svg";
  const box = document.getElementById("timeline");
  const times = rounds.map(r => Date.parse(r.started_at));
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1000);
  const x = t => 4 + (W - 8) * (t - t0) / (t1 - t0);
  const bar = Math.max(2, Math.min(10, (W - 8) / Math.max(1, rounds.length) - 1));
  document.getElementById("timeline-title").textContent = rounds.length
    ? `rounds ${rounds[0].round}-${rounds[rounds.length - 1].round}, ${clock(rounds[0].started_at)} to `
      + `${clock(rounds[rounds.length - 1].started_at)}` : "(none yet)";
  const svgOf = (key, h) => {
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${h}`);
    svg.setAttribute("preserveAspectRatio", "none");
    if (key) svg.setAttribute("data-series", key);
    return svg;
  };
  const parts = [];
  for (const [key, label, get, fmt, fixedMax] of SERIES) {
    const vals = rounds.map(r => Number(get(r) ?? 0));
    const max = fixedMax || Math.max(1e-9, ...vals);
    const svg = svgOf(key, 40);
    rounds.forEach((r, i) => {
      const h = vals[i] > 0 ? Math.max(2, 38 * vals[i] / max) : 1;
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", x(times[i]) - bar / 2); rect.setAttribute("width", bar);
      rect.setAttribute("y", 40 - h); rect.setAttribute("height", h);
      rect.setAttribute("class", (vals[i] > 0 ? "" : "zero ") + (r.finished_at === null ? "open" : key));
      const t = document.createElementNS(ns, "title");
      t.textContent = `round ${r.round} at ${clock(r.started_at)} (${r.status}): ${label} ${fmt(get(r) ?? 0)}`;
      rect.append(t);
      svg.append(rect);
    });
    const done = rounds.filter(r => r.finished_at !== null);
    const lastDone = done.length ? get(done[done.length - 1]) : null;
    parts.push(el("span", { class: "label" }, label), svg,
      el("span", { class: "value" }, lastDone === null || lastDone === undefined ? "-"
        : `${fmt(lastDone)} (max ${fmt(Math.max(...vals))})`));
  }
  // the time axis: HTML labels placed by percentage (text in a stretched SVG would be distorted)
  const axis = el("div", { class: "axis", "data-axis": "time" });
  const ticks = 6;
  for (let k = 0; k <= ticks && rounds.length; k++) {
    const t = t0 + (t1 - t0) * k / ticks;
    const tick = el("span", { class: k === 0 ? "first" : k === ticks ? "last" : "" }, new Date(t).toLocaleTimeString());
    tick.style.left = `${100 * x(t) / W}%`;
    axis.append(tick);
  }
  parts.push(el("span", { class: "label" }, "time"), axis, el("span", {}, ""));
  box.replaceChildren(...parts);
}

function fillUsers(j) {
  const sel = document.getElementById("user");
  const have = new Set([...sel.options].map(o => o.value));
  const wanted = params.get("user") || "";
  for (const u of [...new Set(j.jobs.map(r => r.user).concat(wanted ? [wanted] : []))].sort()) {
    if (!have.has(u)) sel.append(el("option", { value: u }, u));
  }
  if (!sel.dataset.set) { sel.value = wanted; sel.dataset.set = "1"; }
}

function draw() {
  const { cluster, jobs, rounds } = last;
  fillUsers(jobs);
  drawFigures(cluster); drawMap(cluster); drawQueue(jobs, cluster); drawTimeline(rounds);
  document.body.setAttribute("data-loaded", "1");
}

function shown(when) {
  const status = document.getElementById("status");
  status.className = "status";
  status.textContent = `as of ${when}; refreshes every ${EVERY_S} s`;
}

async function refresh() {
  try {
    const [c, j, rs] = await Promise.all([getJson("/api/cluster"), getJson("/api/jobs"),
      getJson(`/api/rounds?n=${ROUNDS}`)]);
    last = { cluster: c, jobs: j, rounds: rs };
    draw();
    shown(new Date().toLocaleTimeString());
  } catch (e) {
    const status = document.getElementById("status");
    status.className = "status error";
    status.textContent = `cannot read the API: ${e.message} (retrying every ${EVERY_S} s)`;
  }
  drawJob();
}

const initial = document.getElementById("initial").textContent.trim();
if (initial) {
  last = JSON.parse(initial);
  draw();
  shown(clock(last.cluster.meta.generated_at));
}
document.getElementById("user").addEventListener("change", () => {
  const u = user();
  const q = new URLSearchParams(location.search);
  if (u) q.set("user", u); else q.delete("user");
  history.replaceState(null, "", `${location.pathname}${q.toString() ? "?" + q : ""}${location.hash}`);
  if (last) draw();
});
window.addEventListener("hashchange", drawJob);
if (initial) drawJob(); else refresh();
setInterval(refresh, EVERY_S * 1000);
