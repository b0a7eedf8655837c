"""`tesserae demo`: the README's main job on shipped example files (no arguments needed)."""

from __future__ import annotations

import argparse
from importlib import resources

from . import migrate_cmd, plan_cmd


def example_path(name: str) -> str:
    return str(resources.files("tesserae_slurm.data.examples") / name)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a round decision and a migration on shipped examples")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    state, old, new = example_path("state.json"), example_path("old.json"), example_path("new.json")
    print(f"== tesserae plan {state}")
    plan_cmd.run(argparse.Namespace(state=state, json=args.json))
    print(f"\n== tesserae migrate {old} {new}")
    migrate_cmd.run(argparse.Namespace(old=old, new=new, algorithm="tesserae", json=args.json))
    print(f"\n== tesserae migrate --algorithm gavel {old} {new}")
    migrate_cmd.run(argparse.Namespace(old=old, new=new, algorithm="gavel", json=args.json))
    return 0
