"""`tesserae actions`: what operators keep in force (holds, pins and keep-offs, drains), with who and when,
and the requeues and cancels taken in but not carried out yet; ``--all``: every request the daemon took in."""

from __future__ import annotations

import argparse
from typing import Any

from ...daemon.operators.readers import Column, when_iso
from .common import ApiClient, add_api_option, add_db_options, open_source
from .output import add_output_options, emit, format_codes

COLUMNS = (
    Column("ACTION", "a", "command", lambda r: r["command"]),
    Column("TARGET", "t", "target", lambda r: r["target"]),
    Column("NODES", "N", "nodes", lambda r: r["nodes"]),
    Column("USER", "u", "user", lambda r: r["user"]),
    Column("SINCE", "S", "time", lambda r: when_iso(r["time"]), lambda r: r["time"]),
    Column("ROUND", "r", "round", lambda r: r["round"]),
    Column("STATUS", "T", "status", lambda r: r["status"]),
    Column("NOTE", "n", "note", lambda r: r.get("note", "")),
)
DEFAULT = ("ACTION", "TARGET", "NODES", "USER", "SINCE", "ROUND")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("actions", help="operators' holds, pins and drains in force, with who and when",
                       description=__doc__, epilog=format_codes(COLUMNS))
    add_db_options(p)
    add_api_option(p)
    p.add_argument("-a", "--all", action="store_true", help="every operator request taken in, with its outcome")
    add_output_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    source = open_source(args)
    if isinstance(source, ApiClient):
        body = source.get("/api/actions", all="1" if args.all else None)
    else:
        from ...daemon.operators.api import actions

        body = actions(source, every=args.all)
    rows: list[dict[str, Any]] = body["all"] if args.all else [
        r for kind in ("holds", "rules", "drains", "waiting") for r in body[kind]]
    emit(args, COLUMNS, rows, None if args.all else DEFAULT, key="actions")
    return 0
