"""`tesserae` entry point: subcommands register themselves; errors become one line and exit 2."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from ..model import InputError
from ..sim.traces import cli as trace_cmd
from . import bench_cmd, demo_cmd, launch_cmd, migrate_cmd, plan_cmd, sim_cmd

EXIT_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tesserae", description="tesserae-slurm: Tesserae placement (consolidation, packing, migration minimization) for deep-learning jobs on Slurm GPU clusters; the simulator, the daemon and its admin commands.",
        epilog="Docs: README.md, docs/. Bad input prints one line on stderr and exits with status 2.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _command_modules():
        module.add_parser(sub)
    return parser


def _command_modules() -> list:
    mods = [demo_cmd, plan_cmd, migrate_cmd, bench_cmd, sim_cmd, trace_cmd, launch_cmd]
    for name in _OPTIONAL:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("tesserae_slurm"):
                raise  # our own module: a bug, not a missing optional dependency
            # a stage whose optional dependency (SQLAlchemy, YAML, torch) is missing stays out of the CLI
            logging.getLogger(__name__).debug("command module %s unavailable: %s", name, exc)
    return mods


# Command modules with optional dependencies; each exposes add_parser(subparsers) setting `func`.
_OPTIONAL: list[str] = [
    "tesserae_slurm.cli.profile_cmd", "tesserae_slurm.cli.estimate_cmd",
    "tesserae_slurm.devcluster.cli",
    "tesserae_slurm.cli.daemon_cmd",
    "tesserae_slurm.cli.admin_cmd",
]


_EXTRAS = {"sqlalchemy": "daemon", "yaml": "daemon", "torch": "torch"}  # import name -> pyproject extra


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * args.verbose, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"tesserae {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("tesserae_slurm"):
            raise  # our own module: a bug
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        hint = f": pip install 'tesserae-slurm[{extra}]'" if extra else ""
        print(f"tesserae {args.command}: error: needs the Python package {exc.name!r}, which is not installed{hint}",
              file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
