"""`tesserae` entry point: errors become one line and exit 2.

Commands are listed here by name and one-line help; a command's module (and whatever it imports:
numpy, SQLAlchemy, torch) is loaded only when that command runs, so `tesserae --help` and the admin
commands start in a fraction of a second. A command whose optional extra is missing stays listed and
answers with the extra to install.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import NamedTuple

from ..model.errors import InputError

EXIT_INPUT = 2


class Command(NamedTuple):
    module: str  # its add_parser(subparsers) registers the command (and any sibling listed beside it)
    help: str
    extra: str = ""  # the pip extra it needs, "" for none


_C = "tesserae_slurm.cli."
COMMANDS: dict[str, Command] = {
    "demo": Command(_C + "demo_cmd", "compare schedulers on the shipped demo trace (--engine: one round decision)"),
    "plan": Command(_C + "plan_cmd", "compute one round decision from a state snapshot"),
    "migrate": Command(_C + "migrate_cmd", "minimize migrations between two placement plans"),
    "bench": Command(_C + "bench_cmd", "benchmarks (medians of repeated runs)"),
    "simulate": Command(_C + "sim_cmd", "simulate one policy configuration on a trace"),
    "compare": Command(_C + "sim_cmd", "simulate several configurations on the same trace and write a report"),
    "trace": Command("tesserae_slurm.sim.traces.cli", "generate, inspect and convert job traces"),
    "launch": Command(_C + "launch_cmd",
                      "job side: run a payload on the GPUs the daemon assigned (in a batch script)"),
    "profile": Command(_C + "profile_cmd", "measure the model zoo alone and packed in pairs; write a profile CSV",
                       "torch"),
    "estimate": Command(_C + "estimate_cmd", "fill a partial profile with estimators; score estimators"),
    "devcluster": Command("tesserae_slurm.devcluster.cli",
                          "run a local Slurm cluster (fake GPUs) for development and tests"),
    "daemon": Command(_C + "daemon_cmd", "run the scheduling daemon (every round: observe Slurm, decide, act)",
                      "daemon"),
    "jobs": Command(_C + "admin.jobs", "list managed jobs from the daemon's state (squeue-like)", "daemon"),
    "rounds": Command(_C + "admin.rounds", "list the daemon's recent rounds", "daemon"),
    "round": Command(_C + "admin.rounds", "details of one round: placement map, actions, Slurm calls, timings",
                     "daemon"),
    **{name: Command(_C + "admin.act", text, "daemon") for name, text in (
        ("hold", "operator: keep a managed job from being placed until released"),
        ("release", "operator: let a held job be scheduled again"),
        ("requeue", "operator: checkpoint-signal and requeue a running managed job"),
        ("cancel", "operator: cancel a managed job"),
        ("pin", "operator: place a managed job only on these nodes (Slurm hostlist)"),
        ("keep-off", "operator: never place a managed job on these nodes (Slurm hostlist)"),
        ("unpin", "operator: lift a job's pin or keep-off"),
        ("drain", "operator: stop placing jobs on a node, move its jobs off (the daemon only)"),
        ("resume", "operator: place jobs on a drained node again"))},
    "actions": Command(_C + "admin.actions", "operators' holds, pins and drains in force, with who and when",
                       "daemon"),
    "explain": Command(_C + "admin.explain", "why a job is pending, packed or was moved (from the daemon's records)",
                       "daemon"),
}

# What each extra installs, by the top-level module its commands import.
EXTRAS: dict[str, tuple[str, ...]] = {"daemon": ("sqlalchemy", "yaml"), "torch": ("torch",)}


def missing_extra(command: str) -> str:
    """The extra ``command`` needs and that is not installed, else ""."""
    extra = COMMANDS[command].extra
    if extra and any(importlib.util.find_spec(m) is None for m in EXTRAS[extra]):
        return extra
    return ""


def extra_hint(command: str, extra: str) -> str:
    return (f"tesserae {command}: error: this command needs the '{extra}' extra: "
            f"pip install 'tesserae-slurm[{extra}]'")


def selected_command(argv: Sequence[str]) -> str | None:
    """The command word: the first argument that is not an option (the top level takes no values)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(load: str | None = None) -> argparse.ArgumentParser:
    """Every command listed; only ``load``'s module imported, so only its options are known."""
    parser = argparse.ArgumentParser(
        prog="tesserae", description="tesserae-slurm: Tesserae placement (consolidation, packing, migration "
                                     "minimization) for deep-learning jobs on Slurm GPU clusters; the simulator, "
                                     "the daemon and its admin commands.",
        epilog="`tesserae COMMAND --help` lists a command's options. Docs: README.md, docs/. Bad input prints one "
               "line on stderr and exits with status 2.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    module = COMMANDS[load].module if load in COMMANDS else None
    for name, cmd in COMMANDS.items():
        if name in sub.choices:
            continue  # registered by its module beside an earlier command
        if cmd.module == module:
            importlib.import_module(cmd.module).add_parser(sub)
            continue
        extra = missing_extra(name)
        sub.add_parser(name, help=cmd.help + (f" [needs: pip install 'tesserae-slurm[{extra}]']" if extra else ""),
                       add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = selected_command(argv)
    if name in COMMANDS:
        extra = missing_extra(name)
        if extra:
            print(extra_hint(name, extra), file=sys.stderr)
            return EXIT_INPUT
    try:
        parser = build_parser(name)
    except ModuleNotFoundError as exc:  # an optional dependency the extras table does not name
        if (exc.name or "").startswith("tesserae_slurm") or name not in COMMANDS:
            raise
        print(f"tesserae {name}: error: needs the Python package {exc.name!r}, which is not installed",
              file=sys.stderr)
        return EXIT_INPUT
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING - 10 * args.verbose, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"tesserae {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("tesserae_slurm"):
            raise  # our own module: a bug
        top = (exc.name or "").split(".")[0]
        extra = next((e for e, mods in EXTRAS.items() if top in mods), "")
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
