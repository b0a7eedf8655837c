"""Output styles shared by the admin commands: squeue-like tables, -o format strings, -p, --json.

A command describes its columns once (``Column``: header, format letter, how to get the value) and
every style is derived from that, so `-o "%.8i %T %R"`, `--parsable` and `--json` always agree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...model import InputError
from ..render import table


@dataclass(frozen=True)
class Column:
    header: str
    letter: str  # the %-code in -o format strings
    key: str  # the field name in --json output
    get: Callable[[Any], Any]


def add_output_options(p: argparse.ArgumentParser, with_format: bool = True) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="JSON output")
    g.add_argument("-p", "--parsable", action="store_true", help="'|'-separated fields, one record per line")
    if with_format:
        g.add_argument("-o", "--format", metavar="FMT",
                       help='squeue-style format, e.g. "%%.8i %%.10T %%b %%N %%R" (codes: see --help-format)')
    p.add_argument("--noheader", action="store_true", help="no header line")


_SPEC = re.compile(r"%(\.)?(\d*)([A-Za-z%])")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def format_rows(fmt: str, columns: Sequence[Column], rows: Sequence[Any], header: bool) -> str:
    by_letter = {c.letter: c for c in columns}
    parts: list[tuple[str, Column | None, bool, int]] = []  # (literal, column, right, width)
    pos = 0
    for m in _SPEC.finditer(fmt):
        if m.start() > pos:
            parts.append((fmt[pos:m.start()], None, False, 0))
        letter = m.group(3)
        if letter == "%":
            parts.append(("%", None, False, 0))
        elif letter not in by_letter:
            raise InputError(f"unknown format code %{letter} (known: "
                             f"{' '.join('%' + c.letter + '=' + c.header for c in columns)})")
        else:
            parts.append(("", by_letter[letter], bool(m.group(1)), int(m.group(2) or 0)))
        pos = m.end()
    if pos < len(fmt):
        parts.append((fmt[pos:], None, False, 0))

    def render(values: Callable[[Column], str]) -> str:
        out = []
        for literal, col, right, width in parts:
            if col is None:
                out.append(literal)
                continue
            text = values(col)
            if width:
                text = text[:width].rjust(width) if right else text[:width].ljust(width)
            out.append(text)
        return "".join(out).rstrip()

    lines = [render(lambda c: c.header)] if header else []
    lines += [render(lambda c, r=r: _cell(c.get(r))) for r in rows]
    return "\n".join(lines)


def emit(args: argparse.Namespace, columns: Sequence[Column], rows: Sequence[Any],
         default: Sequence[str] | None = None) -> None:
    """Print ``rows`` in the style the options ask for; ``default`` picks the table's columns."""
    shown = [c for c in columns if default is None or c.header in default]
    if getattr(args, "json", False):
        json.dump([{c.key: c.get(r) for c in columns} for r in rows], sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    if getattr(args, "format", None):
        text = format_rows(args.format, columns, rows, not args.noheader)
    elif getattr(args, "parsable", False):
        lines = ["|".join(c.header for c in shown)] if not args.noheader else []
        lines += ["|".join(_cell(c.get(r)).replace("|", "/") for c in shown) for r in rows]
        text = "\n".join(lines)
    else:
        text = table([c.header for c in shown], [[_cell(c.get(r)) for c in shown] for r in rows])
        if args.noheader:
            text = "\n".join(text.splitlines()[1:])
    if text:
        print(text)
