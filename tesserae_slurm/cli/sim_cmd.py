"""`tesserae simulate` and `tesserae compare`: what-if studies on traces with the daemon's engine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..model import Cluster, InputError
from ..sim.compare import RunSpec, run_many, run_one, write_report
from ..sim.configs import CONFIGS
from ..sim.trace_source import resolve_trace
from .jsonio import dump_json
from .progress import Progress
from .render import table

DEFAULT_COMPARE = ("tiresias", "tiresias-single", "tesserae-t", "tesserae-t-nomig")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", default="demo",
                   help="trace file (CSV, Gavel/Shockwave/Philly .trace) or a shipped name: "
                        "demo, sample, tesserae-900, shockwave-120 (default: demo)")
    p.add_argument("--cluster", default="20x4:a100", help="NODESxGPUS[:TYPE][,...] (default 20x4:a100)")
    p.add_argument("--profile", default=None, help="a100 (default for A100 clusters) | gavel | PATH")
    p.add_argument("--round", type=float, default=360.0, dest="round_s", help="round length in seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--noise", type=float, default=0.0,
                   help="profile noise n: decisions see values x U[1-n, 1+n]; true values drive progress")
    p.add_argument("--check", action="store_true", help="check invariants on every round (slower)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="simulate one policy configuration on a trace")
    _common(s)
    s.add_argument("--policy", default="tesserae-t", help=f"one of: {', '.join(CONFIGS)}")
    s.add_argument("--json", metavar="OUT", help="write the result JSON here ('-' for stdout)")
    s.set_defaults(func=run_simulate)

    c = sub.add_parser("compare", help="simulate several policies on the same trace and write a report")
    _common(c)
    c.add_argument("--policies", default=",".join(DEFAULT_COMPARE),
                   help=f"comma-separated (default {','.join(DEFAULT_COMPARE)}); known: {', '.join(CONFIGS)}")
    c.add_argument("--out", default="out/compare", help="report directory (default out/compare)")
    c.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
    c.set_defaults(func=run_compare)


def _spec(args: argparse.Namespace, policy: str) -> RunSpec:
    trace, name = resolve_trace(args.trace)
    cluster = Cluster.from_spec(args.cluster)
    profile = args.profile or ("a100" if set(cluster.gpu_types) <= {"a100"} else "gavel")
    return RunSpec(trace, name, args.cluster, policy, profile, args.round_s, args.seed, args.noise, args.check)


def run_simulate(args: argparse.Namespace) -> int:
    if args.policy not in CONFIGS:
        raise InputError(f"unknown policy configuration {args.policy!r}; known: {', '.join(CONFIGS)}")
    spec = _spec(args, args.policy)
    bar = Progress(args.policy, len(spec.trace))
    from ..sim.runner import simulate  # local: keeps `tesserae --help` light
    from ..sim.configs import get_config
    from ..profiles import profile_from_spec
    res = simulate(spec.trace, Cluster.from_spec(spec.cluster_spec), get_config(spec.policy),
                   profile_from_spec(spec.profile), round_s=spec.round_s, seed=spec.seed, noise=spec.noise,
                   check_invariants=spec.check_invariants, trace_name=spec.trace_name, on_round=bar)
    bar.close()
    if args.json == "-":
        dump_json(res.to_json())
        return 0
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res.to_json(), indent=1))
    _print_summaries([res.summary()])
    return 0


def run_compare(args: argparse.Namespace) -> int:
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in CONFIGS]
    if unknown:
        raise InputError(f"unknown policy configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    specs = [_spec(args, p) for p in policies]
    print(f"comparing {len(policies)} policies on {specs[0].trace_name} ({len(specs[0].trace)} jobs), "
          f"cluster {args.cluster}, round {args.round_s:g} s ...", file=sys.stderr)
    results = run_many(specs, workers=args.workers) if len(specs) > 1 else [run_one(specs[0])]
    out = Path(args.out)
    write_report(results, out, title=f"{specs[0].trace_name} on {args.cluster}")
    _print_summaries([r.summary() for r in results])
    print(f"\nreport: {out / 'report.md'} (plots and results.json beside it)")
    return 0


def _print_summaries(summaries: list[dict]) -> None:
    base = summaries[0]["avg_jct_s"]
    rows = [[s["policy"], f"{s['avg_jct_s'] / 3600:.2f}", f"{base / s['avg_jct_s']:.2f}x",
             f"{s['makespan_s'] / 3600:.2f}", s["migrations"], s["preemptions"], f"{s['ftf']['worst']:.2f}",
             f"{s['ftf']['median']:.2f}", f"{s['gpu_utilization']:.0%}",
             f"{s['decision_ms']['median']:.1f}/{s['decision_ms']['p99']:.1f}"] for s in summaries]
    print(table(["POLICY", "AVG_JCT_H", "VS_FIRST", "MAKESPAN_H", "MIGRATIONS", "PREEMPTIONS", "FTF_WORST",
                 "FTF_MEDIAN", "GPU_UTIL", "DECISION_MS(med/p99)"], rows))
