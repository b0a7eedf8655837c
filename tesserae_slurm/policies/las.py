"""Least attained service (Blox ``las.py``, policies.md §2): least service first, every round.

``service="time"`` (default, as Blox) counts wall seconds a job has run; ``"gpu-time"`` counts
GPU-seconds (num_gpus x wall seconds), the 2D attained service Tiresias uses. Ties keep arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass

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
