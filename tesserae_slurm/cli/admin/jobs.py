"""`tesserae jobs`: the managed jobs as the daemon sees them, squeue style."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...daemon.operators.readers import (
    SHORT,
    STATE_CODES,
    Column,
    add_stop_reasons,
    iso,
    parse_states,
    reason,
    select_rows,
    when,
)
from .common import ApiClient, add_api_option, add_db_options, duration, first_look, open_source
from .output import add_output_options, emit, format_codes

if TYPE_CHECKING:
    from ...daemon.state.store import JobRow


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


def run(args: argparse.Namespace) -> int:
    if args.states:
        parse_states(args.states)  # a bad -t fails before the database is opened
    source = open_source(args)
    if isinstance(source, ApiClient):  # the daemon's API: it filters with select_rows and adds the stop reasons
        from ...daemon.operators.api import job_from_record

        body = source.get("/api/jobs", states=args.states, all="1" if args.all else None, jobs=args.jobs,
                          user=args.user)
        shown: Sequence[object] = [job_from_record(j) for j in body["jobs"]]
        slurm_error = body.get("slurm_error", "")
    else:
        from ...daemon.operators.api import with_first_look

        every, slurm_error = with_first_look(source, first_look(args))  # and the jobs the daemon has not seen yet
        rows = select_rows(every, states=args.states, all_jobs=args.all, ids=args.jobs, user=args.user)
        add_stop_reasons(source, rows)
        shown = rows
    if slurm_error:
        import sys
        print(f"tesserae jobs: {slurm_error}; only the jobs the daemon has seen are listed", file=sys.stderr)
    emit(args, COLUMNS, shown, None if args.long else DEFAULT, key="jobs")
    return 0
