"""GPU sets as the daemon stores and shows them: ``node1:0-1;node2:0-3`` <-> {node: (indices)}."""

from __future__ import annotations

from collections.abc import Mapping

from ...model import GpuRef, InputError

GpuMap = Mapping[str, tuple[int, ...]]


def _ranges(indices: tuple[int, ...]) -> str:
    parts: list[str] = []
    run: list[int] = []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def format_gpus(gpus: GpuMap) -> str:
    return ";".join(f"{node}:{_ranges(tuple(idx))}" for node, idx in sorted(gpus.items()))


def parse_gpus(text: str) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    if not text:
        return out
    for part in text.split(";"):
        node, sep, spec = part.partition(":")
        if not sep or not node:
            raise InputError(f"bad GPU set {text!r}")
        idx: list[int] = []
        for r in spec.split(","):
            lo, dash, hi = r.partition("-")
            try:
                idx.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
            except ValueError:
                raise InputError(f"bad GPU set {text!r}") from None
        out[node] = tuple(sorted(idx))
    return out


def from_refs(refs: tuple[GpuRef, ...]) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for node, idx in refs:
        out.setdefault(node, []).append(idx)
    return {n: tuple(sorted(v)) for n, v in out.items()}
