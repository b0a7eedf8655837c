"""`tesserae explain JOB`: why a job waits, why it shares GPUs, why it was moved or stopped.

Everything comes from what the daemon recorded: the job row, each round's decision (policy order,
pending reasons, packed pairs with their speeds) and the actions taken on the job.
"""

from __future__ import annotations

import argparse
from typing import Any

from ...daemon.operators.readers import when_iso
from ...model import InputError
from ..render import table
from .common import ApiClient, add_api_option, add_db_options, duration, first_look, open_source
from .output import dump_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="why a job is pending, packed or was moved (from the daemon's records)")
    p.add_argument("job_id", metavar="JOB")
    add_db_options(p)
    add_api_option(p)
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=run)


def _text(e: dict[str, Any]) -> str:
    where = f" on {e['placement']}" if e["placement"] else ""
    lines = [f"job {e['job']} {e['name']!r} ({e['user']}): {e['state']}{where}"
             + (f", packed with {e['packed_with']}" if e["packed_with"] else "")
             + (f", strategy {e['strategy']}" if e["strategy"] else ""),
             f"  {e['gpus']} GPU(s), model {e['model'] or '-'} batch {e['batch_size'] or '-'}; submitted "
             f"{when_iso(e['submitted'])}; ran {duration(e['executed_s'])} ({e['attained_gpu_s'] / 3600:.3f} GPU-h, "
             f"{duration(e['work_s'])} of work at its speed alone); "
             f"{e['preemptions']} preemption(s), {e['migrations']} migration(s)"]
    if e["reason"]:
        lines.append(f"  reason: {e['reason']}")
    lr = e.get("last_round")
    if lr:
        what = lr["policy"] + (", a start between rounds" if lr.get("kind") == "start" else "")
        lines.append(f"round {lr['round']} ({what}): rank {lr['rank']} of {lr['of']} in the policy order")
    if "why_pending" in e:
        w = e["why_pending"]
        lines.append(f"why pending: {w['reason']}" + (f" - {w['detail']}" if w["detail"] else ""))
    if "why_packed" in e:
        w = e["why_packed"]
        lines.append(f"why packed: shares its GPUs with {w['with']}: normalized speeds {w['speed']:.2f} (this job) + "
                     f"{w['partner_speed']:.2f} ({w['with']}) = {w['combined']:.2f}, more than either alone (1.00)"
                     + (f"; strategy {w['strategy']}" if w["strategy"] else ""))
    if "speed_source" in e:
        lines.append(_source_line(e["speed_source"]))
    if e.get("cause"):
        c = e["cause"]
        lines.append(f"why {e['state'].lower()}: {c['by']}: {c['why']}"
                     + (f"; to undo: {c['undo']}" if c["undo"] else ""))
    moved = [m for m in e["history"] if m["kind"] in ("migrate", "preempt", "requeue", "hold", "evict")]
    verbs = {"migrate": "moved", "preempt": "preempted", "requeue": "requeued", "hold": "held", "evict": "stopped"}
    for m in moved:
        verb = verbs[m["kind"]]
        ctx = f" (rank {m['rank']}; started that round: {', '.join(m['started_that_round']) or 'none'})" \
            if m.get("rank") else ""
        c = m.get("cause") or {"by": "", "why": "", "undo": ""}
        undo = f"; to undo: {c['undo']}" if c.get("undo") else ""
        if m.get("why"):
            lines.append(f"why {verb} in round {m['round']}: {_bought(m['why'])}; {m['from']} -> {m['to'] or 'none'}"
                         f"{ctx} [{m['status']}] ({c['by']}{undo})")
            continue
        lines.append(f"why {verb} in round {m['round']}: {c['by']}: {c['why']}{undo}; "
                     f"{m['from'] or '-'} -> {m['to'] or 'none'}{ctx} [{m['status']}]")
    for m in e["history"]:
        if m["kind"] == "start" and m.get("between_rounds"):
            lines.append(f"started between rounds (round {m['round']}, kind start): on {m['to']}, GPUs free at that "
                         "moment, where that pass's decision placed it [" + m["status"] + "]")
    if e["history"]:
        lines.append("\nhistory:")
        lines.append(table(["ROUND", "ACTION", "STATUS", "FROM", "TO", "ERROR"],
                           [[m["round"], m["kind"] + (" (between rounds)" if m.get("between_rounds") else ""),
                             m["status"], m["from"], m["to"], m["error"]] for m in e["history"]]))
    if e.get("admin"):
        lines.append("\noperator actions:")
        lines.extend(f"  {when_iso(a['time'])} {a['user']}: {a['command']}"
                     + (f" {a['nodes']}" if a.get("nodes") else "") + f" [{a['status']}"
                     + (f", round {a['round']}" if a["round"] is not None else "") + "]"
                     + (f" {a['note']}" if a["note"] else "") for a in e["admin"])
    if e["events"]:
        lines.append("\nevents:")
        lines.extend(f"  {when_iso(ev['time'])} {ev['kind']}: {ev['message']}"
                     + (f" ({ev['cause']})" if ev.get("cause") else "") for ev in e["events"])
    return "\n".join(lines)


def _bought(why: dict[str, Any]) -> str:
    """What a move bought and what it cost, in words (the decision's MoveReason)."""
    cause, others = why.get("cause", ""), ", ".join(why.get("for", []))
    if cause == "limit":  # nothing bought: the limit, not a job, took it off its GPUs
        return f"{why.get('detail', cause)} (its restart and stop)"
    what = {"room": f"made room for {others}", "unpack": f"left {others} to run alone",
            "pack": f"joined {others} on its GPUs", "rule": "an operator's node rule keeps it off its GPUs",
            "stop": "ranked below the jobs that run, it fit nowhere"}.get(cause, why.get("detail", cause))
    speeds = (f", speed {why['speed_before']:.2f} -> {why['speed_after']:.2f}"
              if cause in ("unpack", "pack") else "")
    return (f"{what}{speeds}: bought {why.get('gain_gpu_s', 0):.0f} GPU-s of work over the horizon, "
            f"cost {why.get('cost_gpu_s', 0):.0f} GPU-s (its restart and stop)")


def _source_line(src: dict[str, Any]) -> str:
    speed = f"speed {src['speed']:.2f} " if "speed" in src else ""
    what = {"measured": "measured by online feedback", "profiled": "from the profile table",
            "fallback": "not in the profile (runs alone at 1.00 by definition)"}.get(
        src["source"], f"estimated ({src['source'].partition(':')[2] or src['source']})"
        if src["source"].startswith("estimated") else src["source"])
    line = f"speed source (round {src['round']}): {speed}{what} [{src['source']}] for {src['entry']}"
    if "reports" in src:
        line += f"; reported {src['steps_per_s']:.3g} steps/s (EWMA of {src['reports']} report(s))"
    return line


def run(args: argparse.Namespace) -> int:
    if not str(args.job_id).isdigit():
        raise InputError(f"job id must be a number, got {args.job_id!r}")
    source = open_source(args)
    if isinstance(source, ApiClient):  # the daemon's API answers with explain() below, run on its side
        e = source.get(f"/api/jobs/{args.job_id}")
        e.pop("meta", None)
    else:
        from ...daemon.operators.api import job

        try:
            e = job(source, str(args.job_id), first_look(args))
        except LookupError as exc:
            raise InputError(str(exc.args[0])) from None
    if args.json:
        dump_json(e)
    else:
        print(_text(e))
    return 0
