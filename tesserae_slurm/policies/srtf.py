"""Shortest remaining time first (Blox ``srtf.py``, policies.md §3); needs job durations (an oracle).

Remaining time is the view's ``remaining_work`` (isolated seconds left), else ``total_work`` minus the
wall seconds run; jobs with no known duration go last, in arrival order. ``gpu_weighted=True`` is
Tiresias' ``shortest-gpu``: remaining time x GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model import JobView
from .base import Ranking, SchedulingInput, stable_order


def remaining_time(view: JobView) -> float:
    if view.remaining_work is not None:
        return max(0.0, view.remaining_work)
    if view.total_work is not None:
        return max(0.0, view.total_work - view.executed_time)
    return math.inf


@dataclass(frozen=True)
class SrtfPolicy:
    gpu_weighted: bool = False
    name: str = "srtf"

    def initial_state(self) -> None:
        return None

    def rank(self, inp: SchedulingInput, state: None) -> tuple[Ranking, None]:
        def key(v: JobView) -> float:
            r = remaining_time(v)
            return r * v.num_gpus if self.gpu_weighted else r
        return Ranking(stable_order(inp.jobs, key)), state
