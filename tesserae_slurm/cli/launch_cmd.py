"""`tesserae launch [OPTIONS] -- CMD ...`: the job-side launcher (harness/launcher.py) as a subcommand.

Runs inside a batch script on a compute node: reads the daemon's assignment, pins the GPUs, joins MPS
for packable jobs, adds torchrun/Megatron arguments and forwards the checkpoint signal. Its options are
the launcher's own; `tesserae launch --help` lists them.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="job side: run a payload on the GPUs the daemon assigned (in a batch script)",
                       add_help=False, prefix_chars="\0")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..harness.launcher import run as launch

    return launch(args.rest)
