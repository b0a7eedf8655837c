r"""Output styles shared by the admin commands: squeue-like tables, -o format strings, -p, --json.

A command describes its columns once (``Column``: header, format letter, how to get the value) and
every style is derived from that, so `-o "%.8i %T %R"`, `--parsable` and `--json` always agree.

A record is one line whatever a job is named: in ``-p`` output a backslash, the ``|`` delimiter, newline,
carriage return and tab inside a field are written ``\\``, ``\|``, ``\n``, ``\r``, ``\t``, other
control characters ``\xNN`` and U+2028/U+2029 ``\u2028``/``\u2029``; tables and ``-o`` output escape
the control characters the same way.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from ...daemon.operators.readers import Column
from ...model import InputError
from ..render import table


def add_output_options(p: argparse.ArgumentParser, with_format: bool = True, short_noheader: bool = False) -> None:
    """``short_noheader``: -h is --noheader, as in squeue (the parser then offers --help alone)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="JSON output")
    g.add_argument("-p", "--parsable", action="store_true",
                   help="'|'-separated fields, one record per line; inside a field \\ | newline CR tab are "
                        "written \\\\ \\| \\n \\r \\t, other control characters \\xNN, U+2028/9 \\u2028/9")
    if with_format:
        g.add_argument("-o", "--format", metavar="FMT",
                       help='squeue-style format, e.g. "%%.8i %%.10T %%b %%N %%R" (%%.N: right-aligned in N '
                            'columns; codes: listed below)')
    p.add_argument(*(("-h",) if short_noheader else ()), "--noheader", action="store_true", help="no header line")


_SPEC = re.compile(r"%(\.)?(\d*)([A-Za-z%])")
# Control characters (C0, DEL, C1) and the Unicode line/paragraph separators: anything a reader might
# take for the end of a line (Python's str.splitlines breaks at \x1c-\x1e, \x85, \u2028 too).
_CONTROL = ({c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
            | {0x2028: "\\u2028", 0x2029: "\\u2029", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"})
_PARSABLE = str.maketrans(_CONTROL | {ord("\\"): "\\\\", ord("|"): "\\|"})
_PRINTABLE = str.maketrans(_CONTROL)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).translate(_PRINTABLE)


def parsable_field(value: Any) -> str:
    """One -p field: reversible, and never splits the record (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).translate(_PARSABLE)


def format_codes(columns: Sequence[Column]) -> str:
    return "format codes: " + " ".join(f"%{c.letter}={c.header}" for c in columns)


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

    shown = [col for _, col, _, _ in parts if col is not None]

    def render(texts: Sequence[str]) -> str:
        """One line from the shown columns' texts, in order."""
        out, k = [], 0
        for literal, col, right, width in parts:
            if col is None:
                out.append(literal)
                continue
            text, k = texts[k], k + 1
            if width:
                text = text[:width].rjust(width) if right else text[:width].ljust(width)
            out.append(text)
        return "".join(out).rstrip()

    getters = [c.get for c in shown]
    lines = [render([c.header for c in shown])] if header else []
    lines += [render([_cell(get(r)) for get in getters]) for r in rows]
    return "\n".join(lines)


def dump_json(body: dict[str, Any], records: str | None = None) -> None:
    """--json: one object, ``meta`` (tool, version, generated_at) first, indented. ``records``: the key of a
    listing's records, written one record per line, every other key on a line of its own. A listing holds
    thousands of jobs, and ``indent`` makes Python use its pure-Python encoder (1.1 s for 5,000 jobs); each
    line alone is encoded by the C one. Parsed, the two layouts are the same value."""
    from ...daemon.operators.readers import json_meta

    doc = {"meta": json_meta(), **body}
    if records is None:
        json.dump(doc, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    encode = json.JSONEncoder(default=str).encode
    lines = []
    for key, value in doc.items():
        if key == records and value:
            rows = ",\n    ".join(map(encode, value))
            lines.append(f"  {encode(key)}: [\n    {rows}\n  ]")
        else:
            lines.append(f"  {encode(key)}: {encode(value)}")
    sys.stdout.write("{\n" + ",\n".join(lines) + "\n}\n")


def emit(args: argparse.Namespace, columns: Sequence[Column], rows: Sequence[Any],
         default: Sequence[str] | None = None, key: str = "items") -> None:
    """Print ``rows`` in the style the options ask for; ``default`` picks the table's columns; ``key``
    names the list in the --json object."""
    shown = [c for c in columns if default is None or c.header in default]
    if getattr(args, "json", False):
        dump_json({key: [{c.key: c.json_value(r) for c in columns} for r in rows]}, records=key)
        return
    if getattr(args, "format", None):
        text = format_rows(args.format, columns, rows, not args.noheader)
    elif getattr(args, "parsable", False):
        lines = ["|".join(c.header for c in shown)] if not args.noheader else []
        lines += ["|".join(parsable_field(c.get(r)) for c in shown) for r in rows]
        text = "\n".join(lines)
    else:
        text = table([c.header for c in shown], [[_cell(c.get(r)) for c in shown] for r in rows])
        if args.noheader:
            text = "\n".join(text.splitlines()[1:])
    if text:
        print(text)
