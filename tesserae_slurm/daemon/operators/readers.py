"""The records the admin commands, the JSON API and the web page read from the state database.

`tesserae jobs`, `explain`, `rounds` and `round show` (cli/admin) and the API (daemon/operators/api.py) build their
answers with these functions, so the page, the API and the CLI cannot disagree. SQLAlchemy loads only
where a database is read: the CLI's API client imports this module without it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...model import InputError
from ...model.job import nodes_for
from ..state.job_states import TERMINAL_STATES

if TYPE_CHECKING:
    from ...site.config import SiteConfig
    from ...slurm import SlurmBackend, SlurmJob
    from ..state.database import Database
    from ..state.store import RoundRow, Store


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


@dataclass(slots=True)
class JobView:
    """A job's row as the listings read it: plain values, no ORM object (thousands are read at once)."""

    job_id: str
    name: str
    user: str
    state: str
    slurm_state: str
    reason: str
    num_gpus: int
    nodes: str
    gpus: str
    packed_with: str
    strategy: str
    model: str
    batch_size: str
    assign_round: int | None
    run_start: float | None
    executed_time: float
    attained_service: float
    work_done: float
    preemptions: int
    migrations: int
    restarts: int
    submit_time: float
    first_start: float | None
    finished_at: float | None
    exit_code: int | None
    stop_reason: str = ""  # not stored: what the daemon is doing to a PREEMPTING job (add_stop_reasons)


VIEW_COLUMNS = tuple(f.name for f in fields(JobView))[:-1]  # the jobs table's columns a view holds


def job_views(db: Database, ids: Sequence[str] | None = None) -> list[JobView]:
    """Every job's view (``ids``: those jobs'), in submit order."""
    return [JobView(*r) for r in db.job_columns(VIEW_COLUMNS, ids=ids)]


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


def reason(r: JobView) -> str:
    """The recorded reason; for a job being preempted without one, what the daemon is doing to it."""
    if r.reason or r.state != "PREEMPTING":
        return r.reason
    return r.stop_reason or "Preempting: signalled to checkpoint; requeued once it stops"


def select_rows(rows: list[JobView], *, states: str | None = None, all_jobs: bool = False, ids: str | None = None,
                user: str | None = None) -> list[JobView]:
    """``tesserae jobs`` filters (squeue's -t, -a, -j, -u: ids and users as comma lists), in job id order."""
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


def unknown_users(rows: list[JobView], text: str) -> list[str]:
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


def add_stop_reasons(db: Database, rows: list[JobView]) -> None:
    """A PREEMPTING job's reason from the stop the daemon recorded (preempt or migrate, which round)."""
    stopping = [r for r in rows if r.state == "PREEMPTING" and not r.reason]
    if not stopping:
        return
    last = {a.job_id: a for a in db.action_columns(("job_id", "kind", "round_id", "detail"),
                                                   [r.job_id for r in stopping], ("preempt", "migrate"))}
    for r in stopping:
        a = last.get(r.job_id)
        if a is not None:
            to = json.loads(a.detail or "{}").get("to", "")
            r.stop_reason = (f"Preempting: moving to {to} (round {a.round_id}); checkpointing, then requeued"
                             if a.kind == "migrate" and to else
                             f"Preempting: preempted in round {a.round_id}; checkpointing, then requeued")


FIRST_LOOK = "waiting for the daemon's first look"


class FirstLook:
    """The managed partition's jobs as Slurm lists them now, for the jobs the daemon has not looked at
    yet (it takes them in at its next round or poll): the read commands and the API show them at once.
    Asked at most every ``ttl`` seconds, since the page polls; Slurm unreachable is one line (InputError)."""

    def __init__(self, cfg: SiteConfig, backend: SlurmBackend | None = None, ttl: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg, self.backend, self.ttl, self.clock = cfg, backend, ttl, clock
        self._seen: tuple[float, tuple[SlurmJob, ...]] | None = None

    def jobs(self) -> tuple[SlurmJob, ...]:
        from ...slurm import SlurmError

        if self._seen is not None and self.clock() - self._seen[0] < self.ttl:
            return self._seen[1]
        if self.backend is None:
            from ...site.connect import backend_from_config
            self.backend = backend_from_config(self.cfg)
        try:
            listed = self.backend.list_jobs(self.cfg.slurm.partition)
        except SlurmError as exc:
            raise InputError(f"Slurm not reachable to list partition {self.cfg.slurm.partition}'s new jobs: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        self._seen = (self.clock(), listed)
        return listed


def first_look_rows(listed: Sequence[SlurmJob], known: set[str]) -> list[JobView]:
    """Rows (never stored) for the managed jobs Slurm lists that the database lacks: what squeue knows
    (id, user, name, GPUs, submit time, Slurm's state and reason), the reason saying the daemon has not
    looked yet."""
    from ...model.meta import JobMeta, is_tagged

    out = []
    for sj in listed:
        jid = str(sj.job_id)
        if jid in known or not is_tagged(sj.comment) or sj.state.is_finished:
            continue
        try:
            meta: JobMeta | None = JobMeta.decode(sj.comment)
        except InputError:
            meta = None
        slurm_why = sj.reason or sj.state_reason or "None"
        out.append(JobView(
            job_id=jid, name=sj.name, user=sj.user, num_gpus=meta.num_gpus if meta else 0,
            model=meta.model if meta and not meta.no_profile else "", batch_size=meta.batch_size if meta else "",
            submit_time=float(sj.submit_time or 0), state=sj.state.value, slurm_state=sj.state.value,
            reason=f"{FIRST_LOOK} (Slurm: {sj.state.value}, {slurm_why})", attained_service=0.0,
            executed_time=0.0, work_done=0.0, nodes="", gpus="", packed_with="", strategy="", restarts=0,
            preemptions=0, migrations=0, exit_code=None, first_start=None, finished_at=None, assign_round=None,
            run_start=None))
    return out


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


def since_last_start(r: JobView, now: float) -> float | None:
    """squeue's TIME: the current run's length (to now, or to the end of a finished job); 0 while
    pending; None for a finished job whose last start was not recorded."""
    if r.state in ACTIVE_STATES:
        return max(0.0, now - r.run_start) if r.run_start is not None else 0.0
    if r.state in TERMINAL_STATES:
        if r.run_start is None or r.finished_at is None:
            return None
        return max(0.0, r.finished_at - r.run_start)
    return 0.0


def nodelist_reason(r: JobView) -> str:
    """squeue's NODELIST(REASON): where a placed job runs or an ended job last ran, else why it waits."""
    if (r.state in ("RUNNING", "STARTING") or r.state in TERMINAL_STATES) and r.nodes:
        return r.nodes
    return f"({reason(r) or 'None'})"


def largest_node(decision: dict[str, Any]) -> int | None:
    """GPUs of the partition's largest node as a decision saw it (the nodes it placed on and those it
    could not use); None before any round recorded one."""
    sizes = [len(g) for g in ((decision.get("placement") or {}).get("nodes") or {}).values()]
    sizes += [int(n.get("gpus", 0)) for n in (decision.get("nodes_out") or {}).values()]
    return max(sizes, default=0) or None


def node_count(r: JobView, node_gpus: int | None) -> int | None:
    """squeue's NODES: the nodes a placed job holds or an ended job last ran on; for a job without nodes,
    the count it asks Slurm for (tsbatch's ``--nodes``: one node when it fits the largest, ``node_gpus``
    GPUs, else whole nodes), which squeue shows while it waits. None: no round saw the nodes yet."""
    if r.nodes:
        return len(r.nodes.split(","))
    return nodes_for(r.num_gpus, node_gpus) if node_gpus else None


def job_record(r: JobView, now: float, rank: int | None = None, node_gpus: int | None = None) -> dict[str, Any]:
    """One job as `tesserae jobs --json` and the API give it: seconds as numbers, times ISO 8601 with
    the zone; a finished job keeps the nodes and GPUs it last ran on; ``node_gpus``: the largest node's
    GPUs (``largest_node``), for the node count of a job without nodes."""
    ended = r.state in TERMINAL_STATES
    last_start = r.run_start if r.state in ACTIVE_STATES or ended else None
    return {
        "job_id": r.job_id, "name": r.name, "user": r.user, "state": r.state,
        "state_compact": SHORT.get(r.state, r.state[:2]), "slurm_state": r.slurm_state, "reason": reason(r),
        "nodelist_reason": nodelist_reason(r), "num_gpus": r.num_gpus,
        "num_nodes": node_count(r, node_gpus), "nodes": r.nodes, "gpus": r.gpus,
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


def explain(store: Store, row: JobView, slurm: SlurmJob | None = None) -> dict[str, Any]:
    """`tesserae explain JOB`: why the job waits, shares GPUs or was moved, from what the daemon recorded
    (the job row, the rounds' decisions and the actions taken on it); ``slurm``: the job as Slurm lists
    it now, when asked (a hold set in Slurm on a running job shows nowhere else)."""
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
    for entry in moves:
        if entry["kind"] in ("migrate", "preempt", "requeue", "hold", "evict"):
            entry["cause"] = stop_cause(store, job, entry, out["admin"])
    now = current_cause(row, out["admin"], slurm)
    if now:
        out["cause"] = now
    # reconciliation's events are what Slurm showed that the daemon did not do (requeued, released, gone)
    out["events"] = [{"time": iso(e.time), "kind": e.kind, "message": e.message}
                     | ({"cause": SLURM} if e.kind == "reconcile" else {})
                     for e in reversed(store.events(job_id=job, limit=20))]
    return out


# Who or what a state change comes from: an operator's action, the policy's order, the placement (GPUs,
# fragmentation, packing) or Slurm itself (a hold, a cancel or a node outside the daemon).
OPERATOR, POLICY, PLACEMENT, SLURM = "operator", "policy", "placement", "slurm"
_PENDING_BY = {"Priority": POLICY, "Limit": POLICY, "Round": POLICY, "Nodes": OPERATOR,
               "Resources": PLACEMENT, "Consolidation": PLACEMENT, "Unsatisfiable": PLACEMENT}
_MOVE_BY = {"room": POLICY, "stop": POLICY, "limit": POLICY, "pack": PLACEMENT, "unpack": PLACEMENT, "rule": OPERATOR}


def _cause(by: str, why: str, undo: str = "") -> dict[str, str]:
    return {"by": by, "why": why, "undo": undo}


def _decision(store: Store, round_id: int | None) -> dict[str, Any]:
    r = store.round(round_id) if round_id is not None else None
    return json.loads(r.decision_json or "{}") if r is not None else {}


def stop_cause(store: Store, job: str, entry: dict[str, Any], admin: list[dict[str, Any]]) -> dict[str, str]:
    """Why the daemon stopped, moved, requeued or held the job in ``entry``'s round, from what that round
    recorded: the operator's action in force, the job left out (held in Slurm, its metadata), its node gone
    (drained by an operator or down in Slurm), or the decision (the policy's order, the placement)."""
    cause = _stop_cause(store, job, entry, admin)
    if job in _decision(store, entry["round"]).get("held_in_slurm", []) and not cause["undo"]:
        cause = _cause(cause["by"], cause["why"] + "; " + HELD_IN_SLURM + ": it stays pending until released",
                       f"`scontrol release {job}`")
    return cause


HELD_IN_SLURM = "held in Slurm by an administrator (JobHeldAdmin: root or SlurmUser ran `scontrol hold`)"


def _stop_cause(store: Store, job: str, entry: dict[str, Any], admin: list[dict[str, Any]]) -> dict[str, str]:
    rid, kind = entry["round"], entry["kind"]
    mine = [a for a in admin if a["round"] == rid and a["status"] in ("accepted", "done")]
    if kind == "requeue":
        op = [a for a in mine if a["command"] == "requeue"]
        if op:
            return _cause(OPERATOR, f"requeued by {op[-1]['user']} with `tesserae requeue` ({op[-1]['time']})")
        return _cause(PLACEMENT, "the daemon finished a stop it had begun (checkpoint signal, then requeue-hold)")
    if kind in ("hold", "evict"):
        return _cause(SLURM, "started or released outside tesserae (by hand, `scontrol release`): held again by the "
                             "daemon, which alone starts managed jobs", f"`tesserae explain {job}` says when it runs")
    d = _decision(store, rid)
    left_out = d.get("excluded", {}).get(job, "")
    if left_out.startswith("held by an administrator"):
        return _cause(SLURM, "held in Slurm by an administrator (JobHeldAdmin: root or SlurmUser ran `scontrol hold` "
                             "or `requeuehold`), not by tesserae", f"`scontrol release {job}`")
    if "with `tesserae hold`" in left_out:
        return _cause(OPERATOR, left_out.split(";")[0], f"`tesserae release {job}`")
    hold = [a for a in admin if a["command"] == "hold" and a["round"] is not None and a["round"] <= rid]
    release = [a for a in admin if a["command"] == "release" and a["round"] is not None and a["round"] <= rid]
    if hold and (not release or release[-1]["time"] < hold[-1]["time"]):
        h = hold[-1]
        return _cause(OPERATOR, f"held by {h['user']} with `tesserae hold` ({h['time']})", f"`tesserae release {job}`")
    if left_out:
        return _cause(SLURM, f"not schedulable: {left_out}")
    gone = {n: v.get("why", "") for n, v in d.get("nodes_out", {}).items()
            if n in {p.split(":")[0] for p in str(entry.get("from", "")).split(";") if p}}
    for node, why in sorted(gone.items()):
        if why.startswith("drained for tesserae"):
            return _cause(OPERATOR, f"node {node} {why}", f"`tesserae resume {node}`")
        return _cause(SLURM, f"node {node} cannot be used: {why or 'down in Slurm'}")
    why = entry.get("why")
    if why:
        by = _MOVE_BY.get(why.get("cause", ""), PLACEMENT)
        return _cause(by, why.get("detail") or why.get("cause", ""),
                      f"`tesserae unpin {job}`" if by == OPERATOR else "")
    pending = [p for p in d.get("pending", []) if p["job"] == job]
    order = d.get("order", [])
    started = [j for j in d.get("started", []) if j in order and job in order and order.index(j) < order.index(job)]
    if pending:
        p = pending[0]
        by = _PENDING_BY.get(p["reason"], PLACEMENT)
        text = f"{p['reason']}" + (f": {p['detail']}" if p.get("detail") else "")
        if by == POLICY and started:
            text += f"; ranked {order.index(job) + 1} of {len(order)}, below {', '.join(started)} that started"
        return _cause(by, text)
    if kind == "migrate":
        return _cause(PLACEMENT, "the new consolidated placement had no spot matching its old GPUs")
    if started:
        return _cause(POLICY, f"ranked {order.index(job) + 1} of {len(order)}: {', '.join(started)}, ranked above it, "
                              "took its GPUs")
    return _cause(PLACEMENT, "the new consolidated placement had no GPUs left for it")


def current_cause(row: JobView, admin: list[dict[str, Any]], slurm: SlurmJob | None = None) -> dict[str, str] | None:
    """Why the job is where it is now when Slurm, not the daemon, put it there: held or cancelled
    outside tesserae, or ended by a node failure; ``slurm``: the job as Slurm lists it now, when asked."""
    done = {a["command"] for a in admin if a["status"] == "done"}
    if slurm is not None and slurm.state.is_active and slurm.state_reason == "JobHeldAdmin":
        return _cause(SLURM, f"{HELD_IN_SLURM} while it runs: it runs on, and once stopped it stays pending until "
                             "released", f"`scontrol release {row.job_id}`")
    if row.reason.startswith("held by an administrator"):
        return _cause(SLURM, "held in Slurm by an administrator (JobHeldAdmin: root or SlurmUser ran `scontrol hold`), "
                             "not by tesserae", f"`scontrol release {row.job_id}`")
    if row.state == "CANCELLED":
        if "cancel" in done:
            op = [a for a in admin if a["command"] == "cancel" and a["status"] == "done"][-1]
            return _cause(OPERATOR, f"cancelled by {op['user']} with `tesserae cancel` ({op['time']})")
        return _cause(SLURM, "cancelled in Slurm outside tesserae (scancel by its owner or an administrator)")
    if row.state == "NODE_FAIL":
        return _cause(SLURM, f"its node failed in Slurm{f' ({row.nodes})' if row.nodes else ''}")
    if row.state == "LOST":
        return _cause(SLURM, row.reason)
    return None


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


def in_force(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Operators' holds, pins and keep-offs, and drains in force, with who asked and when, and the
    requeues and cancels taken in but not carried out yet (`tesserae actions`, ``/api/actions``)."""
    from .admin import standing

    st = standing(store)

    def rec(r: Any) -> dict[str, Any]:
        return {"command": r.command, "target": r.target, "nodes": r.nodes, "user": r.user, "time": iso(r.time),
                "round": r.round_id, "status": r.status}

    return {"holds": [rec(r) for r in st.holds.values()], "rules": [rec(r) for r in st.rules.values()],
            "drains": [rec(r) for r in st.drains.values()], "waiting": [rec(r) for r in st.once]}


def round_cadence(starts: Sequence[float]) -> tuple[float, float] | None:
    """The shortest and longest time between the starts of consecutive recent rounds (None: fewer than
    two): how long a request left now waits for the round that takes it in."""
    ordered = sorted(starts)
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    return (min(gaps), max(gaps)) if gaps else None


def when(t: float | None) -> str:
    """Local time for tables, squeue style (no zone)."""
    if t is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def when_iso(stamp: str | None) -> str:
    """An ISO 8601 time from a --json answer (the API's) as the tables show times (local, no zone)."""
    return when(datetime.fromisoformat(stamp).timestamp()) if stamp else ""


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
