"""`tesserae plan STATE.json`: one full round decision from a state snapshot (an admin's dry run)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import Any

from ..engine import PLACEMENTS, EngineConfig, RoundRequest, decide
from ..model import InputError
from ..model.codec import cluster_from_json, decision_to_json, job_from_json, placement_from_json
from ..placement.pack import CROSS_USER
from ..profiles import profile_from_spec
from .jsonio import dump_json, load_json
from .render import render_placement, table

_STATE_KEYS = {"cluster", "jobs", "current", "packing", "migration", "objective", "placement", "profile", "pairs",
               "cross_user", "pairs_below_one", "moves"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="compute one round decision from a state snapshot",
                       description="Place, pack and migrate the jobs of STATE.json (see docs/formats.md).")
    p.add_argument("state", metavar="STATE.json", help="state snapshot ('-' for stdin)")
    p.add_argument("--request", action="store_true",
                   help="STATE.json is a round's recorded inputs (the daemon's state.record_inputs, a line of "
                        "`tesserae bench moves`' rounds.jsonl): replay that round")
    p.add_argument("--json", action="store_true", help="print the decision as JSON")
    p.set_defaults(func=run)


def request_from_state(state: Any, where: str) -> tuple[RoundRequest, Any]:
    if not isinstance(state, Mapping):
        raise InputError(f"{where}: expected a JSON object")
    unknown = set(state) - _STATE_KEYS
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(_STATE_KEYS)}")
    for key in ("cluster", "jobs"):
        if key not in state:
            raise InputError(f"{where}: missing {key!r}")
    if not isinstance(state["jobs"], list):
        raise InputError(f"{where}: \"jobs\" must be a list in priority order")
    cluster = cluster_from_json(state["cluster"])
    jobs = tuple(job_from_json(j, f"jobs[{i}]") for i, j in enumerate(state["jobs"]))
    current = placement_from_json(state["current"], "current") if state.get("current") is not None else None
    pairs = state.get("pairs", [])
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise InputError(f"{where}: \"pairs\" must be a list of [job, job]")
    cfg = {}
    for key, choices in (("packing", ("on", "off", "single")), ("migration", ("tesserae", "flat", "gavel")),
                         ("objective", ("throughput", "paper-sum")),
                         ("placement", tuple(p for p in PLACEMENTS if p != "pinned")), ("cross_user", CROSS_USER)):
        if key in state:
            if state[key] not in choices:
                raise InputError(f"{where}: {key} must be one of {', '.join(choices)}, got {state[key]!r}")
            cfg[key] = state[key]
    if "pairs_below_one" in state:
        if not isinstance(state["pairs_below_one"], bool):
            raise InputError(f"{where}: pairs_below_one must be true or false, got {state['pairs_below_one']!r}")
        cfg["pairs_below_one"] = state["pairs_below_one"]
    if state.get("moves") is False:  # every move free: the paper's plan
        cfg["moves"] = None
    elif state.get("moves") not in (None, True):
        raise InputError(f"{where}: moves must be true (moves pay for themselves, the default) or false (the "
                         "paper's plan)")
    req = RoundRequest(cluster, jobs, current, tuple((str(a), str(b)) for a, b in pairs), EngineConfig(**cfg))
    return req, profile_from_spec(state.get("profile", "a100"))


def run(args: argparse.Namespace) -> int:
    if args.request:
        from ..request_codec import request_from_json

        raw = load_json(args.state)
        req, name = request_from_json(raw.get("request", raw) if isinstance(raw, dict) else raw, args.state)
        profile = profile_from_spec(name or "a100")
    else:
        req, profile = request_from_state(load_json(args.state), args.state)
    decision = decide(req, profile, clock=time.perf_counter)
    if args.json:
        dump_json(decision_to_json(decision))
        return 0
    print(render_placement(decision.placement, highlight=set(decision.migrated)))
    print()
    rows = []
    for j in req.jobs:
        partner = next((p.partner if p.placed == j.id else p.placed for p in decision.packed
                        if j.id in (p.placed, p.partner)), "")
        state = ("START" if j.id in decision.started else "MIGRATE" if j.id in decision.migrated
                 else "KEEP" if j.id in decision.kept else "PENDING")
        reason = next((f"({p.reason.value}) {p.detail}".strip() for p in decision.pending if p.job_id == j.id), "")
        speed = decision.speeds.get(j.id)
        rows.append([j.id, j.num_gpus, j.model, state, partner, decision.strategies.get(j.id, ""),
                     "" if speed is None else f"{speed:.2f}", reason])
    for job_id in decision.preempted:
        rows.append([job_id, "", "", "PREEMPT", "", "", "", ""])
    print(table(["JOBID", "GPUS", "MODEL", "ACTION", "PACKED_WITH", "STRATEGY", "SPEED", "REASON"], rows))
    t = decision.timings
    for m in decision.moves:
        print(f"{m.action} {m.job}: {m.detail}")
    print(f"\nmigrations: {len(decision.migrated)}  cost: {decision.migration_cost:g}  "
          f"time: placement {t.placement*1e3:.2f} ms, packing {t.packing*1e3:.2f} ms, "
          f"migration {t.migration*1e3:.2f} ms")
    return 0
