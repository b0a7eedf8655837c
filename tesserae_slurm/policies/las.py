"""Least attained service (Blox ``las.py``, policies.md §2): least service first, every round.

``service="time"`` (default, as Blox) counts wall seconds a job has run; ``"gpu-time"`` counts
GPU-seconds (num_gpus x wall seconds), the 2D attained service Tiresias uses. Ties keep arrival order.

``stable_rounds`` replays the running jobs' service growth float for float and stops at the first
round where the order would no longer be sorted by (service, arrival).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import InputError, JobView
from .base import Ranking, SchedulingInput, stable_order

SERVICES = ("time", "gpu-time")


def service_of(view: JobView, service: str) -> float:
    return view.attained_service if service == "gpu-time" else view.executed_time


@dataclass(frozen=True)
class LasPolicy:
    service: str = "time"
    name: str = "las"

    def __post_init__(self) -> None:
        if self.service not in SERVICES:
            raise InputError(f"las: service must be one of {', '.join(SERVICES)}, got {self.service!r}")

    def initial_state(self) -> None:
        return None

    def rank(self, inp: SchedulingInput, state: None) -> tuple[Ranking, None]:
        return Ranking(stable_order(inp.jobs, lambda v: service_of(v, self.service))), state

    def stable_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, max_rounds: int) -> int:
        arrival = {v.id: i for i, v in enumerate(inp.jobs)}
        views = [inp.jobs[arrival[j]] for j in ranking.order]
        running = np.array([v.running for v in views], dtype=bool)
        if not running.any():
            return max_rounds
        # per round: executed += round_s; attained += round_s * num_gpus (the shells' arithmetic)
        inc = np.array([(inp.round_s * v.num_gpus if self.service == "gpu-time" else inp.round_s)
                        for v in views if v.running])
        key = np.array([service_of(v, self.service) for v in views])
        idx = np.array([arrival[j] for j in ranking.order])
        tie_ok = idx[:-1] < idx[1:]
        for i in range(max_rounds):
            key[running] += inc
            a, b = key[:-1], key[1:]
            if not ((a < b) | ((a == b) & tie_ok)).all():
                return i
        return max_rounds

    def skip_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, rounds: int) -> None:
        return state
