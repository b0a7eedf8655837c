"""`tesserae demo`: the README's main job, on shipped files only (no arguments needed).

By default it compares Tiresias, Tiresias(Single), Tesserae-T, Tesserae-T with Gavel's migration
rule and plain Slurm (``slurm-backfill``: priority + backfill, what a site runs today) on the shipped
60-job ``demo`` trace on a 16-GPU A100 cluster (a few seconds), prints the summary table and writes
the report (markdown, JSON, plots) under ``out/demo``. ``--engine`` instead shows one round decision
and one migration on the shipped example states.
"""

from __future__ import annotations

import argparse
from importlib import resources

from . import migrate_cmd, plan_cmd, sim_cmd

DEMO_CLUSTER = "4x4:a100"
DEMO_POLICIES = sim_cmd.DEFAULT_COMPARE


def example_path(name: str) -> str:
    return str(resources.files("tesserae_slurm.data.examples") / name)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="compare schedulers on the shipped demo trace (--engine: one round decision)")
    p.add_argument("--engine", action="store_true",
                   help="show one round decision and a migration on shipped example states instead")
    p.add_argument("--json", action="store_true", help="with --engine: JSON output")
    p.add_argument("--out", default="out/demo", help="report directory (default out/demo)")
    p.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.engine:
        return run_engine(args)
    compare = argparse.Namespace(
        trace="demo", cluster=DEMO_CLUSTER, profile=None, round_s=360.0, seed=0, noise=0.0, restart_s=None,
        restart_model=[], check=False, policies=",".join(DEMO_POLICIES), out=args.out, workers=args.workers)
    return sim_cmd.run_compare(compare)


def run_engine(args: argparse.Namespace) -> int:
    state, old, new = example_path("state.json"), example_path("old.json"), example_path("new.json")
    print(f"== tesserae plan {state}")
    plan_cmd.run(argparse.Namespace(state=state, json=args.json, request=False))
    print(f"\n== tesserae migrate {old} {new}")
    migrate_cmd.run(argparse.Namespace(old=old, new=new, algorithm="tesserae", json=args.json))
    print(f"\n== tesserae migrate --algorithm gavel {old} {new}")
    migrate_cmd.run(argparse.Namespace(old=old, new=new, algorithm="gavel", json=args.json))
    return 0
