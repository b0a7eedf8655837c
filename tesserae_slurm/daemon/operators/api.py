"""The read-only JSON API's answers, built from the state database by the admin commands' own readers
(daemon/operators/readers.py).

`tesserae jobs`, `explain`, `rounds` and `round show` and the web page (daemon/operators/web.py) read the same
records through the same functions, so the page, the API and the CLI cannot disagree. What any user may
read: job ids, names, users, states, GPUs, reasons, ranks and the daemon's actions; never the job's
Comment as submitted, its AdminComment encoding or anything of its command line or environment (the
store holds no command line or environment at all; readers.JOB_FIELDS is the whole list of job fields).
"""

from __future__ import annotations

import json
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ...model import InputError
from .readers import (
    ROUND_COLUMNS,
    FirstLook,
    JobView,
    add_stop_reasons,
    explain,
    first_look_rows,
    in_force,
    iso,
    job_ids,
    job_record,
    job_views,
    largest_node,
    round_details,
    select_rows,
    unknown_users,
)

if TYPE_CHECKING:  # SQLAlchemy loads only where a database is read (the CLI's API client does without)
    from sqlalchemy import Row

    from ...slurm import SlurmJob
    from ..state.database import Database
    from ..state.store import RoundRow, Store

MAX_JOBS = 5000  # one answer's job list; more sets "truncated" (filter with states, user or jobs)
MAX_ROUNDS = 500


def _latest_decision(db: Database) -> tuple[Row[Any] | None, dict[str, Any]]:
    """The newest round that recorded a decision (skipped and failed rounds record none): its id, status,
    policy, start and decision."""
    for r in db.round_columns(("round_id", "status", "policy", "started_at", "decision_json"), limit=20):
        if r.decision_json and r.decision_json != "{}":
            return r, json.loads(r.decision_json)
    return None, {}


def ranks(decision: dict[str, Any]) -> dict[str, int]:
    return {j: i + 1 for i, j in enumerate(decision.get("order", []))}


class Reads:
    """What the answers to one request read from the database, each read once when first asked: every
    job row and the newest decision. The page embeds /api/cluster and /api/jobs, which both need them."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @cached_property
    def rows(self) -> list[JobView]:
        return job_views(self.db)

    @cached_property
    def latest(self) -> tuple[Row[Any] | None, dict[str, Any]]:
        return _latest_decision(self.db)


def with_first_look(rows: list[JobView], look: FirstLook | None) -> tuple[list[JobView], str]:
    """The job rows, and the managed jobs Slurm lists that the daemon has not looked at yet; the second
    item says why those could not be listed ("" when they could, or when nobody asked Slurm)."""
    if look is None:
        return rows, ""
    try:
        return rows + first_look_rows(look.jobs(), {r.job_id for r in rows}), ""
    except InputError as exc:
        return rows, str(exc)


def jobs(store: Database, *, states: str | None = None, all_jobs: bool = False, ids: str | None = None,
         user: str | None = None, look: FirstLook | None = None, now: float | None = None,
         limit: int | None = None, reads: Reads | None = None) -> dict[str, Any]:
    """``tesserae jobs`` filters (squeue's -t, -a, -j, -u), each job with its rank in the newest round;
    with ``look``, also the jobs Slurm lists that the daemon has not looked at yet; ``unknown_jobs`` and
    ``unknown_users`` name what -j and -u asked for that no job has (squeue's "Invalid job id specified",
    "Invalid user"); ``limit``: the API's bound (the CLI reads all); ``reads``: what the request read already."""
    from ..state.job_states import TERMINAL_STATES

    reads = reads or Reads(store)
    every, slurm_error = with_first_look(reads.rows, look)
    rows = select_rows(every, states=states, all_jobs=all_jobs, ids=ids, user=user)
    known = {r.job_id for r in every}
    truncated = limit is not None and len(rows) > limit
    if truncated:  # keep the unfinished jobs and the newest finished ones
        assert limit is not None
        active = [r for r in rows if r.state not in TERMINAL_STATES]
        done = [r for r in rows if r.state in TERMINAL_STATES]
        room = limit - len(active)
        rows = active[-limit:] if room <= 0 else sorted(
            active + done[len(done) - room:], key=lambda r: int(r.job_id) if r.job_id.isdigit() else 0)
    add_stop_reasons(store, rows)
    rnd, decision = reads.latest
    rank = ranks(decision)
    node_gpus = largest_node(decision)
    at = time.time() if now is None else now
    out: dict[str, Any] = {
        "round": rnd.round_id if rnd else None,
        "jobs": [job_record(r, at, rank.get(r.job_id), node_gpus) for r in rows],
        "truncated": truncated, "unknown_jobs": [j for j in job_ids(ids or "") if j not in known],
        "unknown_users": unknown_users(every, user) if user else []}
    if slurm_error:
        out["slurm_error"] = slurm_error
    return out


def job(store: Store, job_id: str, look: FirstLook | None = None) -> dict[str, Any]:
    """`tesserae explain JOB`'s record: reason, rank, why pending/packed/moved, history of actions; with
    ``look``, a job Slurm lists that the daemon has not looked at yet is shown as waiting for that look."""
    if not job_id.isdigit():
        raise InputError(f"job id must be a number, got {job_id!r}")
    row = next(iter(job_views(store, ids=[job_id])), None)
    if row is None and look is not None:
        try:
            found = first_look_rows(look.jobs(), set())
        except InputError as exc:
            raise LookupError(f"job {job_id} is not in the state database, and {exc}") from None
        row = next((r for r in found if r.job_id == job_id), None)
        if row is None:
            raise LookupError(f"job {job_id} is neither in the state database nor a tesserae job in partition "
                              f"{look.cfg.slurm.partition} (not submitted with tsbatch, or ended)")
    if row is None:
        raise LookupError(f"job {job_id} is not in the state database (not submitted with tsbatch, or not seen "
                          "by the daemon yet)")
    add_stop_reasons(store, [row])
    return explain(store, row, _in_slurm(look, job_id))


def _in_slurm(look: FirstLook | None, job_id: str) -> SlurmJob | None:
    """The job as Slurm lists it now (explain names a hold set in Slurm from it); None when not asked or
    Slurm cannot be asked: the records alone still explain the job."""
    if look is None:
        return None
    try:
        return next((j for j in look.jobs() if str(j.job_id) == job_id), None)
    except InputError:
        return None


def _gpu_use(decision: dict[str, Any]) -> tuple[int, int]:
    nodes = (decision.get("placement") or {}).get("nodes") or {}
    total = sum(len(g) for g in nodes.values())
    return total, sum(1 for g in nodes.values() for slot in g if slot)


def rounds(store: Store, last: int = 50) -> dict[str, Any]:
    """`tesserae rounds --json`'s records, oldest first, each with its GPU utilization."""
    if not 0 < last <= MAX_ROUNDS:
        raise InputError(f"n must be in 1..{MAX_ROUNDS}, got {last}")
    out = []
    for r in reversed(store.rounds(limit=last)):
        rec = {c.key: c.json_value(r) for c in ROUND_COLUMNS}
        total, busy = _gpu_use(json.loads(r.decision_json or "{}"))
        rec.update(dry_run=r.dry_run, finished_at=iso(r.finished_at), gpus_total=total, gpus_busy=busy,
                   utilization=round(busy / total, 4) if total else None)
        out.append(rec)
    return {"rounds": out}


def round_(store: Store, which: str) -> dict[str, Any]:
    """`tesserae round show N|last --json`'s record."""
    which = which.strip().lower()
    if which == "last":
        newest = store.rounds(limit=1)
        row = newest[0] if newest else None
    elif which.isdigit():
        row = store.round(int(which))
    else:
        raise InputError(f"expected a round number or last, got {which!r}")
    if row is None:
        raise LookupError(f"no round {which} in the state database")
    return round_details(store, row)


def _last_finished(store: Store) -> RoundRow | None:
    """The newest round that finished with a decision: the page's headline figures (a round in progress
    has no figures yet)."""
    for r in store.rounds(limit=20):
        if r.finished_at is not None and r.decision_json and r.decision_json != "{}":
            return r
    return None


def _shape(d: dict[str, Any], held: dict[str, dict[str, tuple[int, ...]]]) -> dict[str, int]:
    """node -> GPU count: the newest decision's nodes, and any node a job holds GPUs on beyond them."""
    nodes = {n: len(g) for n, g in ((d.get("placement") or {}).get("nodes") or {}).items()}
    for gpus in held.values():
        for n, idx in gpus.items():
            nodes[n] = max(nodes.get(n, 0), max(idx, default=-1) + 1)
    return dict(sorted(nodes.items(), key=lambda kv: (len(kv[0]), kv[0])))


def cluster(store: Store, reads: Reads | None = None) -> dict[str, Any]:
    """Where jobs run now: nodes x GPUs from the GPUs the unfinished jobs hold (job ids per GPU; two = a
    packed pair), what the newest decision plans that has not happened yet (starts, moves, stops), the
    holds in force, and the headline figures of the newest finished round; ``reads``: what the request
    read already."""
    from ..state.gpuset import format_gpus, parse_gpus
    from ..state.job_states import PLACED_STATES, PREEMPTING, TERMINAL_STATES
    from .admin import hold_reason, standing

    reads = reads or Reads(store)
    rnd, d = reads.latest
    everyone = {r.job_id: r for r in reads.rows}
    active = [r for r in everyone.values() if r.state in (*PLACED_STATES, PREEMPTING)]
    held = {}
    for r in active:
        try:
            held[r.job_id] = parse_gpus(r.gpus)
        except InputError:  # a hand-edited row: left off the map rather than failing the page
            held[r.job_id] = {}
    shape = _shape(d, held)
    grid: dict[str, list[list[str]]] = {n: [[] for _ in range(k)] for n, k in shape.items()}
    for j, gpus in held.items():
        for n, idx in gpus.items():
            for i in idx:
                grid[n][i].append(j)
    target: dict[str, dict[str, list[int]]] = {}
    for n, g in ((d.get("placement") or {}).get("nodes") or {}).items():
        for i, slot in enumerate(g):
            for j in slot:
                target.setdefault(j, {}).setdefault(n, []).append(i)
    now = {j: format_gpus(g) for j, g in held.items()}
    planned = []
    if rnd is not None:  # what the newest decision wants that the jobs do not hold (yet)
        for j in d.get("order", []):
            if j not in everyone or everyone[j].state in TERMINAL_STATES:
                continue  # finished since: nothing of the plan is left for it
            to = format_gpus({n: tuple(i) for n, i in target.get(j, {}).items()})
            at = now.get(j, "")
            if to == at:
                continue
            if not to and at and j in d.get("preempted", []):
                planned.append({"job": j, "kind": "stop", "from": at, "to": ""})
            elif to and at:
                planned.append({"job": j, "kind": "move", "from": at, "to": to})
            elif to:
                planned.append({"job": j, "kind": "start", "from": "", "to": to})
    holds = standing(store).holds
    shown = sorted(set(held) | {p["job"] for p in planned} | (set(holds) & set(everyone)),
                   key=lambda j: int(j) if j.isdigit() else 0)
    rows = {j: everyone[j] for j in shown}
    last = _last_finished(store)
    figures = None
    if last is not None:
        total, busy = _gpu_use(json.loads(last.decision_json))
        figures = {**{c.key: c.json_value(last) for c in ROUND_COLUMNS}, "finished_at": iso(last.finished_at),
                   "duration_s": round(last.finished_at - last.started_at, 2) if last.finished_at else None,
                   "gpus_total": total, "gpus_busy": busy, "utilization": round(busy / total, 4) if total else None}
    total = sum(shape.values())
    busy = sum(1 for g in grid.values() for slot in g if slot)
    out = {
        "round": rnd.round_id if rnd else None,
        "round_status": rnd.status if rnd else None,
        "policy": rnd.policy if rnd else None,
        "started_at": rnd.started_at if rnd else None,
        "nodes": [{"name": n, "gpus": [sorted(slot) for slot in g]} for n, g in grid.items()],
        "gpus_total": total, "gpus_busy": busy,
        "started": d.get("started", []), "migrated": d.get("migrated", []), "preempted": d.get("preempted", []),
        "packed": sorted({tuple(sorted(slot)) for g in grid.values() for slot in g if len(slot) > 1}),
        "planned": planned,
        "last_finished": figures,
        "jobs": {j: {"name": r.name, "user": r.user, "state": r.state, "num_gpus": r.num_gpus,
                     "strategy": r.strategy, "gpus": r.gpus,
                     "held": hold_reason(holds[j]) if j in holds else ""} for j, r in rows.items()},
    }
    mark_unavailable(store, d, out["nodes"])
    return out


def mark_unavailable(store: Store, decision: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
    """The managed nodes the decision could not use, added to the map's ``nodes``: drained by an operator
    (``drained``: who, when) or down in Slurm (``unavailable``: why), their GPUs empty. A drain newer than
    the decision marks its node where the map shows it."""
    out: dict[str, dict[str, Any]] = {}
    for name, n in (decision.get("nodes_out") or {}).items():
        out[name] = {"name": name, "gpus": [[] for _ in range(int(n.get("gpus", 0)))], "unavailable": n.get("why", ""),
                     "drained": None}
    shown = {n["name"]: n for n in nodes}
    for r in in_force(store)["drains"]:
        entry = shown.get(r["target"]) or out.setdefault(r["target"], {"name": r["target"], "gpus": [],
                                                                        "unavailable": "", "drained": None})
        entry["drained"] = {"user": r["user"], "time": r["time"]}
        entry["unavailable"] = entry.get("unavailable") or f"drained for tesserae by {r['user']}"
    nodes += [v for k, v in sorted(out.items()) if k not in shown]


def actions(store: Store, every: bool = False) -> dict[str, Any]:
    """`tesserae actions`: what operators keep in force (holds, pins, drains), with who and when; with
    ``every``, also every request the daemon took in, with its outcome."""
    out: dict[str, Any] = dict(in_force(store))
    if every:
        out["all"] = [{"command": r.command, "target": r.target, "nodes": r.nodes, "user": r.user, "time": iso(r.time),
                       "round": r.round_id, "status": r.status, "note": r.note} for r in store.admin_actions()]
    return out
