"""The records the admin commands, the JSON API and the web page read from the state database.

`tesserae jobs`, `explain`, `rounds` and `round show` (cli/admin) and the API (daemon/operators/api.py) build their
answers with these functions, so the page, the API and the CLI cannot disagree. SQLAlchemy loads only
where a database is read: the CLI's API client imports this module without it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...model import InputError

if TYPE_CHECKING:
    from ..state.store import JobRow, RoundRow, Store


@dataclass(frozen=True)
class Column:
    """One field of a listing: its table header, -o letter, --json key and value."""

    header: str
    letter: str  # the %-code in -o format strings
    key: str  # the field name in --json output
    get: Callable[[Any], Any]
    json: Callable[[Any], Any] | None = None  # the --json value when it differs (seconds, ISO 8601 times)

    def json_value(self, row: Any) -> Any:
        return (self.json or self.get)(row)


ROUNDS_SCANNED = 200  # how far back `explain` looks for a round that ranked the job

# Slurm's job state codes and names (squeue -t accepts either). Finished daemon jobs take Slurm's name.
SLURM_STATES = {
    "BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "CF": "CONFIGURING", "CG": "COMPLETING",
    "DL": "DEADLINE", "F": "FAILED", "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY", "PD": "PENDING", "PR": "PREEMPTED",
    "R": "RUNNING", "RD": "RESV_DEL_HOLD", "RF": "REQUEUE_FED", "RH": "REQUEUE_HOLD", "RQ": "REQUEUED",
    "RS": "RESIZING", "RV": "REVOKED", "SI": "SIGNALING", "SE": "SPECIAL_EXIT", "SO": "STAGE_OUT", "ST": "STOPPED",
    "S": "SUSPENDED", "TO": "TIMEOUT",
}
# The daemon's own states, with codes Slurm does not use: STARTING (released to Slurm, not running yet),
# PREEMPTING (signalled to checkpoint, requeued once it stops), LOST (vanished from Slurm).
DAEMON_STATES = {"SG": "STARTING", "PG": "PREEMPTING", "LO": "LOST"}
STATE_CODES = SLURM_STATES | DAEMON_STATES
SHORT = {name: code for code, name in STATE_CODES.items()}


def parse_states(text: str) -> set[str]:
    """squeue's -t: comma-separated codes or names, any case, or ``all``; an unknown one is an error."""
    wanted: set[str] = set()
    for word in (w.strip().upper() for w in text.split(",")):
        if not word:
            continue
        if word == "ALL":
            wanted |= set(SHORT)
        elif word in STATE_CODES:
            wanted.add(STATE_CODES[word])
        elif word in SHORT:
            wanted.add(word)
        else:
            raise InputError(f"-t: unknown job state {word!r}; known: "
                             + ", ".join(f"{c}/{n}" for c, n in STATE_CODES.items()) + ", all")
    if not wanted:
        raise InputError("-t: no state given")
    return wanted


def reason(r: JobRow) -> str:
    """The recorded reason; for a job being preempted without one, what the daemon is doing to it."""
    if r.reason or r.state != "PREEMPTING":
        return r.reason
    return r.stop_reason or "Preempting: signalled to checkpoint; requeued once it stops"


def select_rows(rows: list[JobRow], *, states: str | None = None, all_jobs: bool = False, ids: str | None = None,
                user: str | None = None) -> list[JobRow]:
    """``tesserae jobs`` filters (squeue's -t, -a, -j, -u: ids and users as comma lists), in job id order."""
    from ..state.store import TERMINAL_STATES

    if states:
        wanted = parse_states(states)
        rows = [r for r in rows if r.state in wanted]
    elif not all_jobs:  # as squeue, also with -j: `squeue -j ID` of a finished job lists nothing without -t
        rows = [r for r in rows if r.state not in TERMINAL_STATES]
    if ids:
        wanted_ids = set(job_ids(ids))
        rows = [r for r in rows if r.job_id in wanted_ids]
    if user:
        users = set(user_names(user))
        rows = [r for r in rows if r.user in users]
    return sorted(rows, key=lambda r: int(r.job_id) if r.job_id.isdigit() else 0)


def job_ids(text: str) -> list[str]:
    """squeue's -j: comma-separated job ids."""
    wanted = [j.strip() for j in text.split(",") if j.strip()]
    bad = [j for j in wanted if not j.isdigit()]
    if bad:
        raise InputError(f"-j: job ids are numbers, got {', '.join(sorted(bad))}")
    return wanted


def user_names(text: str) -> list[str]:
    """squeue's -u: comma-separated user names or numeric user ids (a uid becomes its name)."""
    import pwd

    out = []
    for u in (w.strip() for w in text.split(",")):
        if u.isdigit():
            try:
                u = pwd.getpwuid(int(u)).pw_name
            except KeyError:
                pass
        if u:
            out.append(u)
    return out


def unknown_users(rows: list[JobRow], text: str) -> list[str]:
    """The users of ``-u`` that are neither on this host (squeue's test) nor the owner of a job the daemon
    recorded: squeue's ``Invalid user``."""
    import pwd

    owners = {r.user for r in rows}
    out = []
    for u in user_names(text):
        if u in owners:
            continue
        try:
            pwd.getpwnam(u)
        except KeyError:
            out.append(u)
    return out


def add_stop_reasons(store: Store, rows: list[JobRow]) -> None:
    """A PREEMPTING job's reason from the stop the daemon recorded (preempt or migrate, which round)."""
    for r in rows:
        if r.state != "PREEMPTING" or r.reason:
            continue
        stops = [a for a in store.actions(job_id=r.job_id) if a.kind in ("preempt", "migrate")]
        if stops:
            a = stops[-1]
            to = json.loads(a.detail or "{}").get("to", "")
            r.stop_reason = (f"Preempting: moving to {to} (round {a.round_id}); checkpointing, then requeued"
                             if a.kind == "migrate" and to else
                             f"Preempting: preempted in round {a.round_id}; checkpointing, then requeued")


# The fields of a job record, in order: `tesserae jobs --json` and GET /api/jobs write exactly these (one
# function, ``job_record``), documented in docs/daemon.md ("Job records"). Never the job's Comment as
# submitted, its AdminComment or anything of its command line or environment.
JOB_FIELDS = (
    "job_id", "name", "user", "state", "state_compact", "slurm_state", "reason", "nodelist_reason", "num_gpus",
    "num_nodes", "nodes", "gpus", "packed_with", "strategy", "model", "batch_size", "rank", "assign_round",
    "time_s", "executed_s", "attained_gpu_s", "work_s", "preemptions", "migrations", "restarts", "submit_time",
    "first_start", "last_start", "end_time", "exit_code",
)
ACTIVE_STATES = ("RUNNING", "STARTING", "PREEMPTING")  # a run is open: squeue's TIME counts to now


def since_last_start(r: JobRow, now: float) -> float | None:
    """squeue's TIME: the current run's length (to now, or to the end of a finished job); 0 while
    pending; None for a finished job whose last start was not recorded."""
    from ..state.store import TERMINAL_STATES

    if r.state in ACTIVE_STATES:
        return max(0.0, now - r.run_start) if r.run_start is not None else 0.0
    if r.state in TERMINAL_STATES:
        if r.run_start is None or r.finished_at is None:
            return None
        return max(0.0, r.finished_at - r.run_start)
    return 0.0


def nodelist_reason(r: JobRow) -> str:
    """squeue's NODELIST(REASON): where a placed job runs or an ended job last ran, else why it waits."""
    from ..state.store import TERMINAL_STATES

    if (r.state in ("RUNNING", "STARTING") or r.state in TERMINAL_STATES) and r.nodes:
        return r.nodes
    return f"({reason(r) or 'None'})"


def job_record(r: JobRow, now: float, rank: int | None = None) -> dict[str, Any]:
    """One job as `tesserae jobs --json` and the API give it: seconds as numbers, times ISO 8601 with
    the zone; a finished job keeps the nodes and GPUs it last ran on."""
    from ..state.store import TERMINAL_STATES

    ended = r.state in TERMINAL_STATES
    last_start = r.run_start if r.state in ACTIVE_STATES or ended else None
    return {
        "job_id": r.job_id, "name": r.name, "user": r.user, "state": r.state,
        "state_compact": SHORT.get(r.state, r.state[:2]), "slurm_state": r.slurm_state, "reason": reason(r),
        "nodelist_reason": nodelist_reason(r), "num_gpus": r.num_gpus,
        "num_nodes": len(r.nodes.split(",")) if r.nodes else 0, "nodes": r.nodes, "gpus": r.gpus,
        "packed_with": r.packed_with, "strategy": r.strategy, "model": r.model, "batch_size": r.batch_size,
        "rank": rank, "assign_round": r.assign_round, "time_s": since_last_start(r, now),
        "executed_s": r.executed_time, "attained_gpu_s": r.attained_service, "work_s": r.work_done,
        "preemptions": r.preemptions, "migrations": r.migrations, "restarts": r.restarts,
        "submit_time": iso(r.submit_time), "first_start": iso(r.first_start), "last_start": iso(last_start),
        "end_time": iso(r.finished_at) if ended else None, "exit_code": r.exit_code if ended else None,
    }


def _mentions(decision_json: str | None, job: str) -> bool:
    return f'"{job}"' in (decision_json or "")  # a cheap test before parsing a decision


def _newest_round_with(store: Store, job: str) -> tuple[RoundRow, dict[str, Any]] | None:
    """The newest round whose policy order holds ``job``: usually the newest round (one row), else a scan
    of the last ROUNDS_SCANNED rounds, parsing only the decisions that mention the job."""
    for limit in (1, ROUNDS_SCANNED):
        for r in store.rounds(limit=limit):
            if _mentions(r.decision_json, job):
                d = json.loads(r.decision_json)
                if job in d.get("order", []):
                    return r, d
    return None


def _round_with(store: Store, round_id: int | None, job: str) -> dict[str, Any] | None:
    r = store.round(round_id) if round_id is not None else None
    if r is None or not _mentions(r.decision_json, job):
        return None
    d = json.loads(r.decision_json)
    return d if job in d.get("order", []) else None


def explain(store: Store, row: JobRow) -> dict[str, Any]:
    """`tesserae explain JOB`: why the job waits, shares GPUs or was moved, from what the daemon recorded
    (the job row, the rounds' decisions and the actions taken on it)."""
    job = row.job_id
    newest = _newest_round_with(store, job)
    out: dict[str, Any] = {
        "job": job, "name": row.name, "user": row.user, "state": row.state, "reason": reason(row),
        "gpus": row.num_gpus, "model": row.model, "batch_size": row.batch_size, "placement": row.gpus,
        "packed_with": row.packed_with, "strategy": row.strategy, "executed_s": row.executed_time,
        "attained_gpu_s": row.attained_service, "work_s": row.work_done, "preemptions": row.preemptions,
        "migrations": row.migrations,
        "submitted": iso(row.submit_time),
    }
    if newest:
        last, d = newest
        rid, order = last.round_id, d.get("order", [])
        out["last_round"] = {"round": rid, "policy": last.policy, "rank": order.index(job) + 1, "of": len(order),
                             "kind": last.kind}
        src = d.get("sources", {}).get(job)
        if src:  # measured (online feedback), profiled (the table) or estimated:<estimator>
            out["speed_source"] = {"round": rid, **src}
        pending = [p for p in d.get("pending", []) if p["job"] == job]
        if pending:
            out["why_pending"] = {"reason": pending[0]["reason"], "detail": pending[0]["detail"]}
        pair = [p for p in d.get("packed", []) if job in (p["placed"], p["partner"])]
        if pair:
            p = pair[0]
            mine, other = ("placed", "partner") if p["placed"] == job else ("partner", "placed")
            out["why_packed"] = {
                "with": p[other], "speed": p[f"{mine}_speed"], "partner_speed": p[f"{other}_speed"],
                "combined": p["placed_speed"] + p["partner_speed"], "strategy": p.get(f"{mine}_strategy"),
                "note": "packing is chosen when the pair's combined normalized throughput beats the placed job alone",
            }
    moves = []
    kinds: dict[int, str] = {}  # round -> its kind: a start between rounds is told apart
    for a in store.actions(job_id=job):
        detail = json.loads(a.detail or "{}")
        if a.kind in ("migrate", "preempt", "requeue", "hold") or a.kind.endswith("start"):
            if a.round_id not in kinds:
                found = store.round(a.round_id)
                kinds[a.round_id] = found.kind if found is not None else "round"
            entry = {"round": a.round_id, "kind": a.kind, "status": a.status, "from": detail.get("from", ""),
                     "to": detail.get("to", detail.get("gpus", "")), "error": a.error,
                     "between_rounds": kinds[a.round_id] == "start"}
            ctx = _round_with(store, a.round_id, job) if a.kind in ("migrate", "preempt") else None
            if ctx is not None:
                order = ctx.get("order", [])
                entry["rank"] = order.index(job) + 1 if job in order else None
                entry["started_that_round"] = ctx.get("started", [])
                why = [m for m in ctx.get("moves", []) if m.get("job") == job]
                if why:  # what the move bought and cost (cost-aware decisions record it)
                    entry["why"] = why[0]
            moves.append(entry)
    out["history"] = moves
    out["admin"] = _admin_actions(store, job)
    out["events"] = [{"time": iso(e.time), "kind": e.kind, "message": e.message}
                     for e in reversed(store.events(job_id=job, limit=20))]
    return out


def _admin_actions(store: Store, job: str) -> list[dict[str, Any]]:
    """Operators' actions on the job (`tesserae hold|release|requeue|cancel|pin|keep-off|unpin`): who, when,
    what became of it."""
    from sqlalchemy.exc import OperationalError

    try:
        rows = store.admin_actions(target=job)
    except OperationalError:  # a database from before schema 0003 read through an older API
        return []
    return [{"time": iso(r.time), "user": r.user, "command": r.command, "nodes": r.nodes, "status": r.status,
             "round": r.round_id, "note": r.note} for r in rows]


def when(t: float | None) -> str:
    """Local time for tables, squeue style (no zone)."""
    if t is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def iso(t: float | None) -> str | None:
    """ISO 8601 with the zone offset, for --json."""
    if t is None:
        return None
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def json_meta() -> dict[str, Any]:
    """The ``meta`` object of every --json answer: which tool and version wrote it, and when."""
    from ... import __version__

    return {"tool": "tesserae-slurm", "version": __version__, "generated_at": iso(time.time())}


ROUND_COLUMNS = (
    Column("ROUND", "i", "round", lambda r: r.round_id),
    Column("STARTED", "S", "started_at", lambda r: when(r.started_at), lambda r: iso(r.started_at)),
    Column("STATUS", "T", "status", lambda r: r.status + (" (dry)" if r.dry_run and r.status != "dry-run" else "")),
    Column("POLICY", "P", "policy", lambda r: r.policy),
    Column("JOBS", "j", "jobs_active", lambda r: r.jobs_active),
    Column("RUNNING", "R", "running", lambda r: r.running),
    Column("STARTED_JOBS", "s", "started", lambda r: r.started),
    Column("PREEMPTED", "p", "preempted", lambda r: r.preempted),
    Column("MIGRATED", "m", "migrated", lambda r: r.migrated),
    Column("KEPT", "k", "kept", lambda r: r.kept),
    Column("PACKED", "K", "packed_pairs", lambda r: r.packed_pairs),
    Column("PENDING", "q", "pending", lambda r: r.pending),
    Column("DECISION_MS", "d", "decision_ms", lambda r: round(r.scheduling_ms + r.placement_ms + r.packing_ms
                                                              + r.migration_ms, 2)),
    Column("APPLY_S", "a", "apply_s", lambda r: round(r.apply_ms / 1e3, 2)),
    Column("ERROR", "e", "error", lambda r: r.error),
    Column("KIND", "y", "kind", lambda r: r.kind),  # round, or start: a start between rounds on free GPUs
)


def round_details(store: Store, row: RoundRow) -> dict[str, Any]:
    decision = json.loads(row.decision_json or "{}")
    return {
        **{c.key: c.json_value(row) for c in ROUND_COLUMNS},
        "dry_run": row.dry_run,
        "finished_at": iso(row.finished_at),
        "timings_ms": {"observe": row.observe_ms, "scheduling": row.scheduling_ms, "placement": row.placement_ms,
                       "packing": row.packing_ms, "migration": row.migration_ms, "apply": row.apply_ms},
        "placements": [{"job": p.job_id, "gpus": p.gpus, "partner": p.partner, "strategy": p.strategy,
                        "speed": p.speed} for p in store.placements(row.round_id)],
        "actions": [{"seq": a.seq, "kind": a.kind, "job": a.job_id, "status": a.status,
                     "detail": json.loads(a.detail or "{}"), "error": a.error} for a in store.actions(row.round_id)],
        "slurm_calls": [{"method": c.method, "jobs": c.job_ids, "ok": c.ok, "ms": round(c.ms, 1), "error": c.error}
                        for c in store.slurm_calls(row.round_id)],
        "decision": decision,
    }
