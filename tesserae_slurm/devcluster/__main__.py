"""`python -m tesserae_slurm.devcluster up|down|status [--dir DIR] [--nodes N] [--gpus G]`."""

import argparse
import logging
import sys

from .cli import add_parser


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tesserae_slurm.devcluster")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    args = parser.parse_args(["devcluster", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
