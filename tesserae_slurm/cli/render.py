"""Plain-text tables for placements and decisions (fixed-width, squeue style)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model import Placement


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header)] + [fmt.format(*r) for r in cells]).rstrip()


def render_placement(p: Placement | Mapping[str, Sequence[Iterable[str]]], highlight: set[str] | None = None) -> str:
    """One row per node, one column per GPU; '*' marks highlighted (e.g. migrated) jobs. ``p`` is a Placement
    or its JSON form's ``nodes`` (node -> GPUs -> job ids), which `round show` prints without numpy."""
    highlight = highlight or set()
    nodes = p.nodes if hasattr(p, "nodes") else p
    width = max((len(g) for g in nodes.values()), default=0)

    def cell(slot: Iterable[str]) -> str:
        if not slot:
            return "-"
        return "+".join(f"{j}*" if j in highlight else j for j in sorted(slot))

    rows = [[node] + [cell(s) for s in gpus] + [""] * (width - len(gpus)) for node, gpus in nodes.items()]
    return table(["NODE"] + [f"GPU{i}" for i in range(width)], rows)
