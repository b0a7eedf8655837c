"""`tesserae trace generate|show|convert`: make, inspect and convert job traces.
"""

from __future__ import annotations

import argparse
import json
import sys

from ...model import InputError
from .csv_format import dumps_csv, write_csv
from .generate import generate_gavel, generate_tesserae, with_users
from .loader import FORMATS
from .models import A100, NAMESPACES
from .record import Trace
from .shipped import SHIPPED, trace_from_arg
from .summary import format_summary, summarize

STYLES = ("tesserae", "gavel")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("trace", help="generate, inspect and convert job traces")
    tsub = p.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    where = ("a trace file (CSV, Gavel/Philly/Shockwave .trace) or a shipped name: "
             f"{', '.join(SHIPPED)}, philly, philly-<vc>")

    g = tsub.add_parser("generate", help="write a seeded synthetic trace as CSV")
    g.add_argument("--style", choices=STYLES, default="tesserae",
                   help="tesserae: Blox/Shockwave workload (paper default); gavel: Gavel's generator")
    g.add_argument("--jobs", type=int, default=900, help="number of jobs (default 900)")
    g.add_argument("--rate", type=float, default=80.0, help="arrivals per hour (default 80)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--models", choices=NAMESPACES, default=A100,
                   help="gavel style only: map job types onto the A100 table (default) or keep Gavel's")
    g.add_argument("--users", type=int, default=0, metavar="N",
                   help="give each job one of N users, drawn uniformly (default: no user column)")
    g.add_argument("-o", "--out", required=True, help="output CSV ('-' for stdout)")
    g.set_defaults(func=run_generate)

    s = tsub.add_parser("show", help="summarize a trace: jobs, GPU mix, duration quantiles, models")
    s.add_argument("file", help=where)
    _read_options(s)
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=run_show)

    c = tsub.add_parser("convert", help="convert any supported trace to the project's CSV")
    c.add_argument("file", help=where)
    _read_options(c)
    c.add_argument("-o", "--out", required=True, help="output CSV ('-' for stdout)")
    c.set_defaults(func=run_convert)


def _read_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="auto", dest="fmt",
                   help="input format (default: by extension / column count)")
    p.add_argument("--models", choices=NAMESPACES, default=None,
                   help="map models onto the A100 table or Gavel's job types (default: as in the file)")


def _emit(trace: Trace, out: str) -> None:
    if out == "-":
        sys.stdout.write(dumps_csv(trace))
    else:
        write_csv(trace, out)
        print(f"wrote {len(trace)} jobs to {out}", file=sys.stderr)


def run_generate(args: argparse.Namespace) -> int:
    if args.style == "tesserae":
        if args.models != A100:
            raise InputError("--models applies to --style gavel only (Tesserae-style traces use A100 models)")
        trace = generate_tesserae(args.jobs, args.rate, args.seed)
    else:
        trace = generate_gavel(args.jobs, args.rate, args.seed, models=args.models)
    if args.users:
        trace = with_users(trace, args.users, args.seed)
    _emit(trace, args.out)
    return 0


def run_show(args: argparse.Namespace) -> int:
    summary = summarize(trace_from_arg(args.file, fmt=args.fmt, models=args.models))
    if args.json:
        json.dump(summary.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_summary(summary))
    return 0


def run_convert(args: argparse.Namespace) -> int:
    _emit(trace_from_arg(args.file, fmt=args.fmt, models=args.models), args.out)
    return 0
