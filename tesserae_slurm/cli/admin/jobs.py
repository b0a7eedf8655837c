"""`tesserae jobs`: the managed jobs as the daemon sees them, squeue style.

Every style reads the job records of ``readers.job_record`` (the API's records too), so a table, `-o`,
`-p` and `--json` from the database or through the API cannot disagree.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...daemon.operators.readers import STATE_CODES, Column, when_iso
from .common import ApiClient, add_api_option, add_db_options, duration, first_look, open_reader
from .output import add_output_options, dump_json, emit, format_codes

Record = dict[str, Any]


def _when(key: str) -> Any:
    return lambda rec: when_iso(rec.get(key))


def _field(key: str) -> Any:
    return lambda rec: rec.get(key)


COLUMNS = (
    Column("JOBID", "i", "job_id", _field("job_id")),
    Column("NAME", "j", "name", _field("name")),
    Column("USER", "u", "user", _field("user")),
    Column("STATE", "T", "state", _field("state")),
    Column("ST", "t", "state_compact", _field("state_compact")),
    Column("GPUS", "b", "num_gpus", _field("num_gpus")),
    Column("NODES", "D", "num_nodes", _field("num_nodes")),
    Column("NODELIST", "N", "nodes", _field("nodes")),
    Column("GPU_IDX", "g", "gpus", _field("gpus")),
    Column("PACKED_WITH", "w", "packed_with", _field("packed_with")),
    Column("STRATEGY", "y", "strategy", _field("strategy")),
    Column("MODEL", "m", "model", _field("model")),
    Column("BATCH", "B", "batch_size", _field("batch_size")),
    Column("RANK", "Q", "rank", _field("rank")),
    Column("TIME", "M", "time_s", lambda r: duration(r.get("time_s"))),
    Column("RUN_TIME", "K", "executed_s", lambda r: duration(r.get("executed_s"))),
    Column("GPU_HOURS", "A", "attained_gpu_s", lambda r: round((r.get("attained_gpu_s") or 0.0) / 3600, 3)),
    Column("PREEMPT", "p", "preemptions", _field("preemptions")),
    Column("MIGR", "x", "migrations", _field("migrations")),
    Column("RESTARTS", "n", "restarts", _field("restarts")),
    Column("SUBMIT_TIME", "V", "submit_time", _when("submit_time")),
    Column("START_TIME", "S", "last_start", _when("last_start")),
    Column("FIRST_START", "f", "first_start", _when("first_start")),
    Column("END_TIME", "e", "end_time", _when("end_time")),
    Column("EXIT", "X", "exit_code", _field("exit_code")),
    Column("SLURM_STATE", "s", "slurm_state", _field("slurm_state")),
    Column("REASON", "r", "reason", _field("reason")),
    Column("NODELIST(REASON)", "R", "nodelist_reason", _field("nodelist_reason")),
)
# squeue's default "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R" less the partition (always the managed one),
# with the job's GPUs and packing partner; ended jobs (-a, -t) add squeue's %e and the exit code.
DEFAULT_FORMAT = "%.18i %.8j %.8u %.2t %.10M %.6D %.4b %.11w %R"
ENDED_FORMAT = "%.18i %.8j %.8u %.2t %.10M %.6D %.4b %.11w %.19e %.4X %R"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list managed jobs from the daemon's state (squeue-like)", add_help=False,
                       epilog=format_codes(COLUMNS) + ". State codes: " + " ".join(
                           f"{c}={n}" for c, n in STATE_CODES.items()) + " (the last three are the daemon's own). "
                       "Default format: " + DEFAULT_FORMAT + "; with finished jobs: "
                       + ENDED_FORMAT + ".")
    p.add_argument("--help", action="help", help="show this help message and exit")
    add_db_options(p)
    add_api_option(p)
    p.add_argument("-a", "--all", action="store_true", help="include finished jobs")
    p.add_argument("-t", "--states", default=None,
                   help="comma-separated state codes or names as squeue takes them, e.g. PD,R or "
                        "PENDING,COMPLETED, or all (finished states need no --all)")
    p.add_argument("-j", "--jobs", default=None, help="comma-separated job ids")
    who = p.add_mutually_exclusive_group()
    who.add_argument("-u", "--user", default=None, help="comma-separated user names or ids")
    who.add_argument("--me", action="store_true", help="only my jobs (-u with my user name)")
    p.add_argument("-l", "--long", action="store_true", help="all columns")
    add_output_options(p, short_noheader=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ...daemon.operators.readers import job_ids, parse_states, user_names

    if args.states:
        parse_states(args.states)  # a bad -t or -j fails before the database is opened
    if args.jobs:
        job_ids(args.jobs)
    user = _me() if args.me else args.user
    source = open_reader(args)
    if isinstance(source, ApiClient):
        body = source.get("/api/jobs", states=args.states, all="1" if args.all else None, jobs=args.jobs, user=user)
    else:
        from ...daemon.operators.api import jobs

        # and the managed jobs Slurm lists that the daemon has not looked at yet
        body = jobs(source, states=args.states, all_jobs=args.all, ids=args.jobs, user=user, look=first_look(args))
    if body.get("slurm_error"):
        print(f"tesserae jobs: {body['slurm_error']}; only the jobs the daemon has seen are listed", file=sys.stderr)
    for u in body.get("unknown_users", []):
        print(f"tesserae jobs: error: Invalid user: {u}", file=sys.stderr)
    if user and set(body.get("unknown_users", [])) >= set(user_names(user)):
        return 1  # no user asked for exists (squeue would list an empty table)
    unknown = body.get("unknown_jobs", [])
    if args.jobs and set(unknown) >= set(job_ids(args.jobs)):
        print(f"tesserae jobs: error: Invalid job id specified: {','.join(unknown)} (not in the daemon's state)",
              file=sys.stderr)
        return 1
    if args.json:
        dump_json(body, records="jobs")
        return 0
    records: list[Record] = body["jobs"]
    ended = args.all or any(r.get("end_time") for r in records)
    fmt = ENDED_FORMAT if ended else DEFAULT_FORMAT
    if not (args.format or args.long or args.parsable):
        args.format = fmt
    emit(args, COLUMNS, records, None if args.long else _headers(fmt), key="jobs")
    return 0


def _headers(fmt: str) -> tuple[str, ...]:
    letters = [part[-1] for part in fmt.split() if part.startswith("%")]
    by_letter = {c.letter: c.header for c in COLUMNS}
    return tuple(by_letter[x] for x in letters)


def _me() -> str:
    import os
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
