"""`tesserae rounds` and `tesserae round show N`: what the daemon decided and did, round by round."""

from __future__ import annotations

import argparse
from typing import Any

from ...daemon.operators.readers import ROUND_COLUMNS, Column, round_details, when_iso
from ...model import InputError
from ..render import render_placement, table
from .common import ApiClient, add_api_option, add_db_options, open_source
from .output import add_output_options, dump_json, emit, format_codes


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rounds", help="list the daemon's recent rounds", epilog=format_codes(ROUND_COLUMNS))
    add_db_options(p)
    add_api_option(p)
    p.add_argument("-n", "--last", type=int, default=20, help="how many recent rounds (default 20)")
    add_output_options(p)
    p.set_defaults(func=run_rounds)

    r = sub.add_parser("round", help="details of one round: placement map, actions, Slurm calls, timings")
    r.add_argument("action", choices=("show",))
    r.add_argument("round_id", metavar="N", help="a round number, or last (the newest round)")
    add_db_options(r)
    add_api_option(r)
    r.add_argument("--json", action="store_true", help="JSON output")
    r.set_defaults(func=run_round_show)


def _api_column(c: Column) -> Column:
    """A round column over the API's records, which carry each column's --json value under its key."""
    def value(r: dict[str, Any]) -> Any:
        return r.get(c.key)

    def shown(r: dict[str, Any]) -> Any:
        return when_iso(r.get(c.key)) if c.key == "started_at" else r.get(c.key)

    return Column(c.header, c.letter, c.key, shown, value)


API_ROUND_COLUMNS = tuple(_api_column(c) for c in ROUND_COLUMNS)


def run_rounds(args: argparse.Namespace) -> int:
    if args.last <= 0:
        raise InputError("--last must be positive")
    source = open_source(args)
    if isinstance(source, ApiClient):  # the daemon's API: the same records, read on its side
        emit(args, API_ROUND_COLUMNS, source.get("/api/rounds", n=str(args.last))["rounds"], key="rounds")
        return 0
    rows = list(reversed(source.rounds(limit=args.last)))
    emit(args, ROUND_COLUMNS, rows, key="rounds")
    return 0


def run_round_show(args: argparse.Namespace) -> int:
    which = str(args.round_id).strip().lower()
    if which != "last" and not which.isdigit():
        raise InputError(f"round: expected a round number or last, got {args.round_id!r}")
    source = open_source(args)
    if isinstance(source, ApiClient):
        d: dict[str, Any] = source.get(f"/api/rounds/{which}")
        d.pop("meta", None)
    else:
        if which == "last":
            newest = source.rounds(limit=1)
            if not newest:
                raise InputError("no rounds in the state database yet")
            row = newest[0]
        elif (found := source.round(int(which))) is not None:
            row = found
        else:
            raise InputError(f"no round {which} in the state database")
        d = round_details(source, row)
    if args.json:
        dump_json(d)
        return 0
    t = d["timings_ms"]
    print(f"round {d['round']}  {when_iso(d['started_at'])}  {d['status']}  policy {d['policy']}"
          f"{'  (dry run: nothing sent to Slurm)' if d['dry_run'] else ''}"
          f"{'  (a start between rounds: jobs started on free GPUs only)' if d['kind'] == 'start' else ''}")
    if d["error"]:
        print(f"error: {d['error']}")
    print(f"jobs {d['jobs_active']}, running {d['running']}, started {d['started']}, preempted {d['preempted']}, "
          f"migrated {d['migrated']}, kept {d['kept']}, packed pairs {d['packed_pairs']}, pending {d['pending']}")
    print("timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in t.items()))
    dec = d["decision"]
    nodes = (dec.get("placement") or {}).get("nodes")
    if nodes:
        moved = set(dec.get("migrated", [])) | set(dec.get("started", []))
        print("\nplacement (* = started or moved this round):")
        print(render_placement(nodes, moved))
    if dec.get("packed"):
        print("\npacked pairs:")
        print(table(["PLACED", "PARTNER", "SPEEDS", "STRATEGIES"],
                    [[p["placed"], p["partner"], f"{p['placed_speed']:.2f}+{p['partner_speed']:.2f}",
                      f"{p.get('placed_strategy') or '-'}/{p.get('partner_strategy') or '-'}"] for p in dec["packed"]]))
    if dec.get("moves"):
        print("\nmoves (what each move or preemption bought and cost, GPU-seconds of work):")
        print(table(["JOB", "ACTION", "CAUSE", "FOR", "GAIN", "COST", "SPEED"],
                    [[m["job"], m["action"], m["cause"], ",".join(m.get("for", [])) or "-", f"{m['gain_gpu_s']:.0f}",
                      f"{m['cost_gpu_s']:.0f}", f"{m['speed_before']:.2f}->{m['speed_after']:.2f}"]
                     for m in dec["moves"]]))
    if dec.get("pending"):
        print("\npending:")
        print(table(["JOB", "REASON", "DETAIL"], [[p["job"], p["reason"], p["detail"]] for p in dec["pending"]]))
    if d["actions"]:
        print("\nactions:")
        print(table(["SEQ", "KIND", "JOB", "STATUS", "DETAIL", "ERROR"],
                    [[a["seq"], a["kind"], a["job"], a["status"],
                      " ".join(f"{k}={v}" for k, v in a["detail"].items() if k != "assignment" and v), a["error"]]
                     for a in d["actions"]]))
    if d["slurm_calls"]:
        print("\nslurm calls:")
        print(table(["METHOD", "JOBS", "OK", "MS", "ERROR"],
                    [[c["method"], c["jobs"], "yes" if c["ok"] else "no", c["ms"], c["error"]]
                     for c in d["slurm_calls"]]))
    return 0
