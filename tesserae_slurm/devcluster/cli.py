"""`tesserae devcluster up|down|status|compare|replay`: a local Slurm to try the scheduler on (docs/devcluster.md).

`compare` runs one small job set under plain Slurm and under the daemon and reports both (compare.py);
`replay` replays a trace in scaled time on emulated GPUs, beside the simulator's prediction (replay.py).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ..site.config import SchedulerSection
from .cluster import DevCluster
from .errors import DevClusterError
from .install import ensure_slurm_installed

EXIT_FAILED = 1

SHIPPED_POLICY = SchedulerSection().policy  # compare and replay measure the daemon as a site gets it


def default_dir() -> Path:
    """`$TESSERAE_DEVCLUSTER_DIR`, else ~/.cache/tesserae/devcluster."""
    env = os.environ.get("TESSERAE_DEVCLUSTER_DIR")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tesserae" / "devcluster"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devcluster", help="run a local Slurm cluster (fake GPUs) for development and tests")
    p.add_argument("action", choices=("up", "down", "status", "compare", "replay"),
                   help="compare: bring the cluster up with a plain partition, run the same job set under plain "
                        "Slurm and under the daemon, report both; replay: a trace in scaled time on emulated "
                        "GPUs, each run beside the simulator's prediction (docs/devcluster.md)")
    p.add_argument("--dir", type=Path, default=None, help=f"cluster directory (default {default_dir()})")
    p.add_argument("--nodes", type=int, default=None, help="number of fake nodes (default 4; replay: 8)")
    p.add_argument("--gpus", type=int, default=4, help="fake GPUs per node (default 4)")
    p.add_argument("--partition", default="tesserae", help="partition name (default tesserae)")
    p.add_argument("--no-job-submit", action="store_true",
                   help="run without etc/job_submit.lua (JobSubmitPlugins=lua is on by default, as on a site)")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install missing Slurm packages")
    p.add_argument("--ports", type=int, default=None, metavar="BASE",
                   help="slurmctld on BASE, the slurmds on BASE+1.. (default: a free block in [20000, 30000), "
                        "where the tests' clusters look too)")
    p.add_argument("--plain-partition", default=None, metavar="NAME",
                   help="a second partition over the same nodes that the daemon does not manage (compare: plain)")
    p.add_argument("--bf-interval", type=int, default=None, metavar="S",
                   help="Slurm's backfill interval bf_interval (default Slurm's 30 s; compare: 1)")
    c = p.add_argument_group("compare")
    c.add_argument("--jobs", type=int, default=12, help="jobs in the set (default 12)")
    c.add_argument("--seed", type=int, default=0, help="seed of the job set (default 0)")
    c.add_argument("--min-duration", type=float, default=20.0, help="shortest job's work in seconds (default 20)")
    c.add_argument("--max-duration", type=float, default=80.0, help="longest job's work in seconds (default 80)")
    c.add_argument("--mean-gap", type=float, default=3.0, help="mean seconds between arrivals (default 3)")
    c.add_argument("--policy", default=SHIPPED_POLICY,
                   help="the daemon's policy; several, comma-separated, make one daemon run each (default "
                        f"{SHIPPED_POLICY}, what the daemon ships with)")
    c.add_argument("--round-seconds", type=float, default=5.0, help="the daemon's round length (default 5)")
    c.add_argument("--grace-seconds", type=float, default=5.0,
                   help="the daemon's preemption grace period (default 5)")
    c.add_argument("--modes", default="plain,daemon", help="which runs, in order (default plain,daemon)")
    c.add_argument("--out", type=Path, default=None,
                   help="report and job files (default out/devcluster-compare, out/devcluster-replay)")
    c.add_argument("--keep-up", action="store_true", help="leave a cluster compare or replay brought up running")
    r = p.add_argument_group("replay")
    r.add_argument("--trace", default="gen:tesserae:120:80:0",
                   help="a trace file, a shipped name or gen:tesserae|gavel:JOBS[:RATE[:SEED]] (default "
                        "gen:tesserae:120:80:0, the paper's physical experiment)")
    r.add_argument("--scale", type=float, default=None, metavar="S",
                   help="trace seconds per wall second (default 40: the paper's trace in about 15 min a run)")
    r.add_argument("--mode", default=f"daemon:{SHIPPED_POLICY},plain",
                   help=f"runs, comma-separated: daemon:POLICY or plain (default daemon:{SHIPPED_POLICY},plain: "
                        "the daemon as shipped against plain Slurm; `tesserae bench physical` runs the paper's)")
    r.add_argument("--replay-jobs", type=int, default=None, metavar="N", help="only the first N arrivals")
    r.add_argument("--round", type=float, default=360.0, help="round length, trace seconds (default 360)")
    r.add_argument("--grace", type=float, default=90.0, help="preemption grace, trace seconds (default 90)")
    r.add_argument("--profile", default="a100", help="the emulated GPUs' speeds and the daemon's table (a100)")
    r.add_argument("--no-feedback", action="store_true", help="the daemon without online feedback")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.dir if args.dir is not None else default_dir()
    compare = args.action in ("compare", "replay")
    plain = args.plain_partition or ("plain" if compare else None)
    bf_interval = args.bf_interval if args.bf_interval is not None else (1 if compare else None)
    nodes = args.nodes if args.nodes is not None else (8 if args.action == "replay" else 4)
    try:
        cluster = DevCluster(root, nodes=nodes, gpus_per_node=args.gpus, partition=args.partition,
                             job_submit=not args.no_job_submit, plain_partition=plain, bf_interval_s=bf_interval,
                             ctld_port=args.ports, slurmd_base_port=None if args.ports is None else args.ports + 1)
    except ValueError as exc:
        print(f"tesserae devcluster: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "replay":
            from .replay import DEFAULT_SCALE
            from .replay_cmd import run_replay

            args.scale = DEFAULT_SCALE if args.scale is None else args.scale
            return run_replay(cluster, args)
        if compare:
            from .compare_cmd import run_compare

            return run_compare(cluster, args)
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
