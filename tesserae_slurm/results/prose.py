"""The prose of docs/results.md, read from ``prose.md`` beside this module, so that the document's
sentences are edited as text and the renderer holds only the numbers it fills in."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_FILE = Path(__file__).with_name("prose.md")
_MARK = re.compile(r"<!-- ([a-z0-9-]+) -->$")
_STARTS_A_LINE = ("* ", "|", "#")  # a list item, a table row, a heading


def lines(name: str, **fields: object) -> list[str]:
    """Block ``name`` as the document's lines, its ``{fields}`` filled in."""
    return [line.format(**fields) for line in _blocks()[name]]


def text(name: str, **fields: object) -> str:
    """Block ``name``, a single paragraph, as one line of the document."""
    out = lines(name, **fields)
    if len(out) != 1:
        raise ValueError(f"prose block {name!r} has {len(out)} lines, not one paragraph")
    return out[0]


@functools.cache
def _blocks() -> dict[str, tuple[str, ...]]:
    """Every block of prose.md, its wrapped lines joined (the file's head comment says how)."""
    blocks: dict[str, tuple[str, ...]] = {}
    name: str | None = None
    out: list[str] = []
    fenced = False
    for raw in _FILE.read_text(encoding="utf-8").split("\n"):
        mark = _MARK.match(raw)
        if mark and not fenced:
            if name is not None:
                blocks[name] = _trimmed(out)
            name, out = mark.group(1), []
        elif name is None:
            continue
        elif raw.startswith("```"):
            fenced = not fenced
            out.append(raw)
        elif fenced or not raw or raw.startswith(_STARTS_A_LINE) or not out or not out[-1] \
                or out[-1].startswith("```"):
            out.append(raw)
        else:
            out[-1] += " " + raw.lstrip()
    if name is not None:
        blocks[name] = _trimmed(out)
    return blocks


def _trimmed(out: list[str]) -> tuple[str, ...]:
    while out and not out[-1]:
        out.pop()
    return tuple(out)
