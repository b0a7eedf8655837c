// The cluster page: polls the daemon's read-only JSON API and redraws. Plain DOM, no dependencies;
// every string from the API goes in through textContent (job names are user input).
"use strict";

const EVERY_S = Math.max(1, Number(new URLSearchParams(location.search).get("every")) || 5);
const ROUNDS = 40;

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

function drawMap(c) {
  const map = document.getElementById("map");
  document.getElementById("map-title").textContent = c.round === null ? "(no round decided yet)"
    : `round ${c.round} (${c.policy}, ${c.round_status}): ${c.gpus_busy} of ${c.gpus_total} GPUs busy, `
      + `${c.packed.length} packed pair(s)`;
  const started = new Set(c.started), moved = new Set(c.migrated);
  const width = Math.max(0, ...c.nodes.map(n => n.gpus.length));
  const head = el("tr", {}, el("th", {}, "NODE"));
  for (let i = 0; i < width; i++) head.append(el("th", {}, `GPU${i}`));
  const table = el("table", {}, el("thead", {}, head));
  const body = el("tbody");
  for (const n of c.nodes) {
    const row = el("tr", { "data-node": n.name }, el("td", { class: "node" }, n.name));
    n.gpus.forEach((jobs, i) => {
      const cls = ["gpu"];
      if (!jobs.length) cls.push("free");
      else cls.push(jobs.length > 1 ? "pair" : "busy");
      if (jobs.some(j => moved.has(j))) cls.push("moved");
      else if (jobs.some(j => started.has(j))) cls.push("started");
      const td = el("td", { class: cls.join(" "), "data-gpu": `${n.name}:${i}`, "data-jobs": jobs.join("+") },
        jobs.length ? jobs.join("+") : "-");
      td.title = jobs.map(j => {
        const info = c.jobs[j] || {};
        return `${j} ${info.name || ""} (${info.user || "?"}) ${info.state || ""}`
          + (started.has(j) ? ", started this round" : "") + (moved.has(j) ? ", moved this round" : "");
      }).join("\n");
      row.append(td);
    });
    body.append(row);
  }
  table.append(body);
  map.replaceChildren(c.nodes.length ? table : el("p", {}, "no placement recorded yet"));
  document.getElementById("preempted").textContent = c.preempted.length
    ? `preempted this round: ${c.preempted.join(", ")}` : "";
}

function drawQueue(j) {
  const tbody = document.querySelector("#queue tbody");
  const jobs = j.jobs.slice().sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9)
    || Number(a.job_id) - Number(b.job_id));
  document.getElementById("queue-title").textContent =
    `${jobs.length} job(s)` + (j.round !== null ? `, ranks from round ${j.round}` : "")
    + (j.truncated ? " (truncated)" : "");
  tbody.replaceChildren(...jobs.map(r => {
    const placed = r.state === "RUNNING" || r.state === "STARTING";
    const where = placed ? (r.gpus || r.nodes) + (r.packed_with ? ` (packed with ${r.packed_with})` : "")
      : `(${r.reason || "None"})`;
    return el("tr", { class: placed ? "running" : "pending", "data-job": r.job_id },
      el("td", {}, r.rank ?? "-"), el("td", {}, r.job_id), el("td", {}, r.name), el("td", {}, r.user),
      el("td", { class: "state" }, r.state), el("td", {}, r.num_gpus),
      el("td", { class: "reason" }, where));
  }));
}

const SERIES = [
  ["utilization", "GPU utilization", r => r.utilization, v => v === null ? "-" : `${Math.round(v * 100)}%`, 1],
  ["packed_pairs", "packed pairs", r => r.packed_pairs, v => String(v)],
  ["migrated", "migrations", r => r.migrated, v => String(v)],
  ["decision_ms", "decision time", r => r.decision_ms, v => `${Number(v).toFixed(1)} ms`],
];

function drawTimeline(rs) {
  const rounds = rs.rounds;
  const box = document.getElementById("timeline");
  document.getElementById("timeline-title").textContent = rounds.length
    ? `rounds ${rounds[0].round}-${rounds[rounds.length - 1].round}` : "(none yet)";
  const ns = "http://www.w3.org/2000/svg";
  const parts = [];
  for (const [key, label, get, fmt, fixedMax] of SERIES) {
    const vals = rounds.map(r => Number(get(r) ?? 0));
    const max = fixedMax || Math.max(1e-9, ...vals);
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${Math.max(1, rounds.length) * 10} 40`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("data-series", key);
    rounds.forEach((r, i) => {
      const h = vals[i] > 0 ? Math.max(2, 38 * vals[i] / max) : 2;
      const rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", i * 10 + 1); rect.setAttribute("width", 8);
      rect.setAttribute("y", 40 - h); rect.setAttribute("height", h);
      if (!(vals[i] > 0)) rect.setAttribute("class", "zero");
      const t = document.createElementNS(ns, "title");
      t.textContent = `round ${r.round} (${r.status}): ${label} ${fmt(get(r) ?? 0)}`;
      rect.append(t);
      svg.append(rect);
    });
    const last = rounds.length ? get(rounds[rounds.length - 1]) : null;
    parts.push(el("span", { class: "label" }, label), svg,
      el("span", { class: "value" }, last === null || last === undefined ? "-"
        : `${fmt(last)} (max ${fmt(Math.max(...vals))})`));
  }
  box.replaceChildren(...parts);
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [c, j, rs] = await Promise.all([getJson("/api/cluster"), getJson("/api/jobs"),
      getJson(`/api/rounds?n=${ROUNDS}`)]);
    drawMap(c); drawQueue(j); drawTimeline(rs);
    status.className = "status";
    status.textContent = `updated ${new Date().toLocaleTimeString()}; refreshes every ${EVERY_S} s`;
    document.body.setAttribute("data-loaded", "1");
  } catch (e) {
    status.className = "status error";
    status.textContent = `cannot read the API: ${e.message} (retrying every ${EVERY_S} s)`;
  }
}

refresh();
setInterval(refresh, EVERY_S * 1000);
