"""`tesserae devcluster up|down|status`: a local Slurm to try the scheduler on (see docs/devcluster.md)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from .cluster import DevCluster
from .errors import DevClusterError
from .install import ensure_slurm_installed

EXIT_FAILED = 1


def default_dir() -> Path:
    """`$TESSERAE_DEVCLUSTER_DIR`, else ~/.cache/tesserae/devcluster."""
    env = os.environ.get("TESSERAE_DEVCLUSTER_DIR")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tesserae" / "devcluster"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devcluster", help="run a local Slurm cluster (fake GPUs) for development and tests")
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("--dir", type=Path, default=None, help=f"cluster directory (default {default_dir()})")
    p.add_argument("--nodes", type=int, default=4, help="number of fake nodes (default 4)")
    p.add_argument("--gpus", type=int, default=4, help="fake GPUs per node (default 4)")
    p.add_argument("--partition", default="tesserae", help="partition name (default tesserae)")
    p.add_argument("--no-job-submit", action="store_true",
                   help="run without etc/job_submit.lua (JobSubmitPlugins=lua is on by default, as on a site)")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install missing Slurm packages")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.dir if args.dir is not None else default_dir()
    try:
        cluster = DevCluster(root, nodes=args.nodes, gpus_per_node=args.gpus, partition=args.partition,
                             job_submit=not args.no_job_submit)
    except ValueError as exc:
        print(f"tesserae devcluster: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "up":
            if not args.no_install:
                ensure_slurm_installed()
            cluster.up()
            print(cluster.status().render())
            print(f"\nexport SLURM_CONF={shlex.quote(str(cluster.slurm_conf))}")
        elif args.action == "down":
            cluster.down()
            print(f"dev cluster at {cluster.root} stopped")
        else:
            status = cluster.status()
            print(status.render())
            return 0 if status.up else 3
    except DevClusterError as exc:
        print(f"tesserae devcluster {args.action}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0
