"""`tesserae migrate OLD.json NEW.json`: map next round's logical plan onto the physical one."""

from __future__ import annotations

import argparse

from ..model.codec import placement_from_json, placement_to_json
from ..placement.migrate import migrate
from .jsonio import dump_json, load_json
from .render import render_placement


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="minimize migrations between two placement plans",
                       description="Map NEW (next round's logical plan) onto OLD's physical nodes and GPUs.")
    p.add_argument("old", metavar="OLD.json", help="physical placement now ('-' for stdin)")
    p.add_argument("new", metavar="NEW.json", help="next round's logical plan, same node sizes")
    p.add_argument("--algorithm", choices=["tesserae", "flat", "gavel"], default="tesserae",
                   help="tesserae: node-level Hungarian over GPU-level ones (default); flat: one GPU-level "
                        "Hungarian; gavel: no relabeling")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    old = placement_from_json(load_json(args.old), args.old)
    new = placement_from_json(load_json(args.new), args.new)
    res = migrate(old, new, algorithm=args.algorithm)
    if args.json:
        dump_json({
            "algorithm": args.algorithm,
            "placement": placement_to_json(res.placement),
            "migrated_jobs": list(res.migrated),
            "migrations": len(res.migrated),
            "cost": res.cost,
            "node_map": dict(res.node_map),
        })
        return 0
    print(f"algorithm: {args.algorithm}   migrations: {len(res.migrated)}   cost: {res.cost:g}")
    if res.node_map:
        print("node map (new -> physical): " + ", ".join(f"{k}->{v}" for k, v in res.node_map.items()))
    print(render_placement(res.placement, highlight=set(res.migrated)))
    if res.migrated:
        print("migrated: " + " ".join(res.migrated))
    return 0
