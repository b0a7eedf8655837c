"""`tesserae jobs`: the managed jobs as the daemon sees them, squeue style."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ...model import InputError
from .common import ApiClient, add_api_option, add_db_options, duration, iso, open_source, when
from .output import Column, add_output_options, emit, format_codes

if TYPE_CHECKING:
    from ...daemon.store import JobRow, Store

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
    return getattr(r, "stop_reason", "") or "Preempting: signalled to checkpoint; requeued once it stops"


def _reason_or_nodes(r: JobRow) -> str:
    if r.state in ("RUNNING", "STARTING") and r.nodes:
        return r.nodes
    return f"({reason(r) or 'None'})"


COLUMNS = (
    Column("JOBID", "i", "job_id", lambda r: r.job_id),
    Column("NAME", "j", "name", lambda r: r.name),
    Column("USER", "u", "user", lambda r: r.user),
    Column("STATE", "T", "state", lambda r: r.state),
    Column("ST", "t", "state_compact", lambda r: SHORT.get(r.state, r.state[:2])),
    Column("GPUS", "b", "num_gpus", lambda r: r.num_gpus),
    Column("NODES", "D", "num_nodes", lambda r: len(r.nodes.split(",")) if r.nodes else 0),
    Column("NODELIST", "N", "nodes", lambda r: r.nodes),
    Column("GPU_IDX", "g", "gpus", lambda r: r.gpus),
    Column("PACKED_WITH", "w", "packed_with", lambda r: r.packed_with),
    Column("STRATEGY", "y", "strategy", lambda r: r.strategy),
    Column("MODEL", "m", "model", lambda r: r.model),
    Column("BATCH", "B", "batch_size", lambda r: r.batch_size),
    Column("TIME", "M", "executed_s", lambda r: duration(r.executed_time), lambda r: r.executed_time),
    Column("GPU_HOURS", "A", "attained_gpu_s", lambda r: round(r.attained_service / 3600, 3),
           lambda r: r.attained_service),
    Column("PREEMPT", "p", "preemptions", lambda r: r.preemptions),
    Column("MIGR", "x", "migrations", lambda r: r.migrations),
    Column("RESTARTS", "n", "restarts", lambda r: r.restarts),
    Column("SUBMIT_TIME", "V", "submit_time", lambda r: when(r.submit_time), lambda r: iso(r.submit_time)),
    Column("START_TIME", "S", "first_start", lambda r: when(r.first_start), lambda r: iso(r.first_start)),
    Column("SLURM_STATE", "s", "slurm_state", lambda r: r.slurm_state),
    Column("REASON", "r", "reason", reason),
    Column("NODELIST(REASON)", "R", "nodelist_reason", _reason_or_nodes),
)
DEFAULT = ("JOBID", "NAME", "USER", "STATE", "GPUS", "GPU_IDX", "PACKED_WITH", "TIME", "NODELIST(REASON)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list managed jobs from the daemon's state (squeue-like)",
                       epilog=format_codes(COLUMNS) + ". State codes: " + " ".join(
                           f"{c}={n}" for c, n in STATE_CODES.items()) + " (the last three are the daemon's own).")
    add_db_options(p)
    add_api_option(p)
    p.add_argument("-a", "--all", action="store_true", help="include finished jobs")
    p.add_argument("-t", "--states", default=None,
                   help="comma-separated state codes or names as squeue takes them, e.g. PD,R or "
                        "PENDING,COMPLETED, or all (finished states need no --all)")
    p.add_argument("-j", "--jobs", default=None, help="comma-separated job ids")
    p.add_argument("-u", "--user", default=None, help="only this user's jobs")
    p.add_argument("-l", "--long", action="store_true", help="all columns")
    add_output_options(p)
    p.set_defaults(func=run)


def select_rows(rows: list[JobRow], args: argparse.Namespace) -> list[JobRow]:
    from ...daemon.store import TERMINAL_STATES

    if args.states:
        wanted = parse_states(args.states)
        rows = [r for r in rows if r.state in wanted]
    elif not args.all:
        rows = [r for r in rows if r.state not in TERMINAL_STATES]
    if args.jobs:
        ids = {j.strip() for j in args.jobs.split(",") if j.strip()}
        bad = [j for j in ids if not j.isdigit()]
        if bad:
            raise InputError(f"-j: job ids are numbers, got {', '.join(sorted(bad))}")
        rows = [r for r in rows if r.job_id in ids]
    if args.user:
        rows = [r for r in rows if r.user == args.user]
    return sorted(rows, key=lambda r: int(r.job_id) if r.job_id.isdigit() else 0)


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


def run(args: argparse.Namespace) -> int:
    if args.states:
        parse_states(args.states)  # a bad -t fails before the database is opened
    source = open_source(args)
    if isinstance(source, ApiClient):  # the daemon's API: it filters with select_rows and adds the stop reasons
        from ...daemon.api import job_from_record

        body = source.get("/api/jobs", states=args.states, all="1" if args.all else None, jobs=args.jobs,
                          user=args.user)
        rows = [job_from_record(j) for j in body["jobs"]]
    else:
        rows = select_rows(source.jobs(), args)
        add_stop_reasons(source, rows)
    emit(args, COLUMNS, rows, None if args.long else DEFAULT, key="jobs")
    return 0


def parallelism(r: JobRow) -> list[str]:
    return list(json.loads(r.parallelism or "[]"))
