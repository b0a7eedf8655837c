"""`tesserae rounds` and `tesserae round show N`: what the daemon decided and did, round by round."""

from __future__ import annotations

import argparse

from ...daemon.operators.readers import ROUND_COLUMNS, round_details, when
from ...model import InputError
from ..render import render_placement, table
from .common import add_db_options, open_store
from .output import add_output_options, dump_json, emit, format_codes


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rounds", help="list the daemon's recent rounds", epilog=format_codes(ROUND_COLUMNS))
    add_db_options(p)
    p.add_argument("-n", "--last", type=int, default=20, help="how many recent rounds (default 20)")
    add_output_options(p)
    p.set_defaults(func=run_rounds)

    r = sub.add_parser("round", help="details of one round: placement map, actions, Slurm calls, timings")
    r.add_argument("action", choices=("show",))
    r.add_argument("round_id", metavar="N", help="a round number, or last (the newest round)")
    add_db_options(r)
    r.add_argument("--json", action="store_true", help="JSON output")
    r.set_defaults(func=run_round_show)


def run_rounds(args: argparse.Namespace) -> int:
    if args.last <= 0:
        raise InputError("--last must be positive")
    rows = list(reversed(open_store(args).rounds(limit=args.last)))
    emit(args, ROUND_COLUMNS, rows, key="rounds")
    return 0


def run_round_show(args: argparse.Namespace) -> int:
    which = str(args.round_id).strip().lower()
    if which != "last" and not which.isdigit():
        raise InputError(f"round: expected a round number or last, got {args.round_id!r}")
    store = open_store(args)
    if which == "last":
        newest = store.rounds(limit=1)
        if not newest:
            raise InputError("no rounds in the state database yet")
        row = newest[0]
    elif (found := store.round(int(which))) is not None:
        row = found
    else:
        raise InputError(f"no round {which} in the state database")
    d = round_details(store, row)
    if args.json:
        dump_json(d)
        return 0
    d["started_at"] = when(row.started_at)
    t = d["timings_ms"]
    print(f"round {row.round_id}  {d['started_at']}  {d['status']}  policy {row.policy}"
          f"{'  (dry run: nothing sent to Slurm)' if row.dry_run else ''}"
          f"{'  (a start between rounds: jobs started on free GPUs only)' if row.kind == 'start' else ''}")
    if row.error:
        print(f"error: {row.error}")
    print(f"jobs {row.jobs_active}, running {row.running}, started {row.started}, preempted {row.preempted}, "
          f"migrated {row.migrated}, kept {row.kept}, packed pairs {row.packed_pairs}, pending {row.pending}")
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
