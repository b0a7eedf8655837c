"""`tesserae bench ...`: benchmarks reported as medians (never timed unit tests)."""

from __future__ import annotations

import argparse

from ..bench.decision import as_json, bench_decision
from ..engine import EngineConfig
from .jsonio import dump_json
from .render import table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (medians of repeated runs)")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    d = bsub.add_parser("decision", help="time one round decision on a synthetic state, by stage")
    d.add_argument("--gpus", type=int, default=256)
    d.add_argument("--jobs", type=int, default=2048)
    d.add_argument("--repeats", type=int, default=7)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--packing", choices=["on", "off", "single"], default="on")
    d.add_argument("--migration", choices=["tesserae", "flat", "gavel"], default="tesserae")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=run_decision)


def run_decision(args: argparse.Namespace) -> int:
    b = bench_decision(args.gpus, args.jobs, repeats=args.repeats, seed=args.seed,
                       config=EngineConfig(packing=args.packing, migration=args.migration))
    if args.json:
        dump_json(as_json(b))
        return 0
    print(f"decision at {b.gpus} GPUs / {b.jobs} jobs, {b.repeats} repeats: median {b.median_ms:.2f} ms "
          f"(p90 {b.p90_ms:.2f} ms); median migrations {b.migrations_median:g}, packed pairs {b.packed_median:g}")
    print(table(["STAGE", "MEDIAN_MS"], [[k, f"{v:.2f}"] for k, v in b.stages.items()]))
    return 0
