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
from typing import TYPE_CHECKING, Any

from ...model import InputError
from .readers import (
    ROUND_COLUMNS,
    FirstLook,
    add_stop_reasons,
    explain,
    first_look_rows,
    in_force,
    iso,
    job_ids,
    job_record,
    round_details,
    select_rows,
    unknown_users,
)

if TYPE_CHECKING:  # SQLAlchemy loads only where a database is read (the CLI's API client does without)
    from ...slurm import SlurmJob
    from ..state.store import JobRow, RoundRow, Store

MAX_JOBS = 5000  # one answer's job list; more sets "truncated" (filter with states, user or jobs)
MAX_ROUNDS = 500


def _latest_decision(store: Store) -> tuple[RoundRow | None, dict[str, Any]]:
    """The newest round that recorded a decision (skipped and failed rounds record none)."""
    for r in store.rounds(limit=20):
        if r.decision_json and r.decision_json != "{}":
            return r, json.loads(r.decision_json)
    return None, {}


def ranks(decision: dict[str, Any]) -> dict[str, int]:
    return {j: i + 1 for i, j in enumerate(decision.get("order", []))}


def with_first_look(store: Store, look: FirstLook | None) -> tuple[list[JobRow], str]:
    """Every job row, and the managed jobs Slurm lists that the daemon has not looked at yet; the second
    item says why those could not be listed ("" when they could, or when nobody asked Slurm)."""
    rows = store.jobs()
    if look is None:
        return rows, ""
    try:
        return rows + first_look_rows(look.jobs(), {r.job_id for r in rows}), ""
    except InputError as exc:
        return rows, str(exc)


def jobs(store: Store, *, states: str | None = None, all_jobs: bool = False, ids: str | None = None,
         user: str | None = None, look: FirstLook | None = None, now: float | None = None,
         limit: int | None = None) -> dict[str, Any]:
    """``tesserae jobs`` filters (squeue's -t, -a, -j, -u), each job with its rank in the newest round;
    with ``look``, also the jobs Slurm lists that the daemon has not looked at yet; ``unknown_jobs`` and
    ``unknown_users`` name what -j and -u asked for that no job has (squeue's "Invalid job id specified",
    "Invalid user"); ``limit``: the API's bound (the CLI reads all)."""
    from ..state.store import TERMINAL_STATES

    every, slurm_error = with_first_look(store, look)
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
    rnd, decision = _latest_decision(store)
    rank = ranks(decision)
    at = time.time() if now is None else now
    out: dict[str, Any] = {
        "round": rnd.round_id if rnd else None, "jobs": [job_record(r, at, rank.get(r.job_id)) for r in rows],
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
    row = store.job(job_id)
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
        rec.update(dry_run=r.dry_run, gpus_total=total, gpus_busy=busy,
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


def cluster(store: Store) -> dict[str, Any]:
    """The placement of the newest decided round: nodes x GPUs (job ids per GPU; two = a packed pair) and
    what that round started, moved and preempted, with the jobs on the map."""
    rnd, d = _latest_decision(store)
    nodes = (d.get("placement") or {}).get("nodes") or {}
    on_map = sorted({j for g in nodes.values() for slot in g for j in slot})
    rows = {r.job_id: r for r in store.jobs_by_id(on_map)}
    total, busy = _gpu_use(d)
    out = {
        "round": rnd.round_id if rnd else None,
        "round_status": rnd.status if rnd else None,
        "policy": rnd.policy if rnd else None,
        "started_at": rnd.started_at if rnd else None,
        "nodes": [{"name": n, "gpus": [sorted(slot) for slot in g]} for n, g in nodes.items()],
        "gpus_total": total, "gpus_busy": busy,
        "started": d.get("started", []), "migrated": d.get("migrated", []), "preempted": d.get("preempted", []),
        "packed": [[p["placed"], p["partner"]] for p in d.get("packed", [])],
        "jobs": {j: {"name": r.name, "user": r.user, "state": r.state, "num_gpus": r.num_gpus,
                     "strategy": r.strategy} for j, r in rows.items()},
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
