"""`tesserae jobs`: the managed jobs as the daemon sees them, squeue style."""

from __future__ import annotations

import argparse
import json

from ...daemon.store import TERMINAL_STATES, JobRow
from ...model import InputError
from .common import add_db_options, duration, open_store, when
from .output import Column, add_output_options, emit

SHORT = {"PENDING": "PD", "STARTING": "CF", "RUNNING": "R", "PREEMPTING": "PR", "COMPLETED": "CD",
         "FAILED": "F", "CANCELLED": "CA", "TIMEOUT": "TO", "LOST": "LO", "NODE_FAIL": "NF"}


def _reason_or_nodes(r: JobRow) -> str:
    if r.state in ("RUNNING", "STARTING") and r.nodes:
        return r.nodes
    return f"({r.reason or 'None'})"


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
    Column("TIME", "M", "executed_time", lambda r: duration(r.executed_time)),
    Column("GPU_HOURS", "A", "attained_gpu_hours", lambda r: round(r.attained_service / 3600, 3)),
    Column("PREEMPT", "p", "preemptions", lambda r: r.preemptions),
    Column("MIGR", "x", "migrations", lambda r: r.migrations),
    Column("RESTARTS", "n", "restarts", lambda r: r.restarts),
    Column("SUBMIT_TIME", "V", "submit_time", lambda r: when(r.submit_time)),
    Column("START_TIME", "S", "first_start", lambda r: when(r.first_start)),
    Column("SLURM_STATE", "s", "slurm_state", lambda r: r.slurm_state),
    Column("REASON", "r", "reason", lambda r: r.reason),
    Column("NODELIST(REASON)", "R", "nodelist_reason", _reason_or_nodes),
)
DEFAULT = ("JOBID", "NAME", "USER", "STATE", "GPUS", "GPU_IDX", "PACKED_WITH", "TIME", "NODELIST(REASON)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list managed jobs from the daemon's state (squeue-like)",
                       epilog="format codes: " + " ".join(f"%{c.letter}={c.header}" for c in COLUMNS))
    add_db_options(p)
    p.add_argument("-a", "--all", action="store_true", help="include finished jobs")
    p.add_argument("-t", "--states", default=None, help="comma-separated states, e.g. RUNNING,PENDING")
    p.add_argument("-j", "--jobs", default=None, help="comma-separated job ids")
    p.add_argument("-u", "--user", default=None, help="only this user's jobs")
    p.add_argument("-l", "--long", action="store_true", help="all columns")
    add_output_options(p)
    p.set_defaults(func=run)


def select_rows(rows: list[JobRow], args: argparse.Namespace) -> list[JobRow]:
    if args.states:
        wanted = {s.strip().upper() for s in args.states.split(",") if s.strip()}
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


def run(args: argparse.Namespace) -> int:
    rows = select_rows(open_store(args).jobs(), args)
    emit(args, COLUMNS, rows, None if args.long else DEFAULT)
    return 0


def parallelism(r: JobRow) -> list[str]:
    return list(json.loads(r.parallelism or "[]"))
