"""Typed, immutable data shared by the engine, the simulator and the daemon.

Names load on first use (PEP 562): the command line imports ``InputError`` from here on every run,
and the placement module pulls in numpy, which `tesserae --help` and the admin commands must not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import Cluster, Node
    from .decision import PackedPair, PendingJob, PendingReason, RoundDecision, StageTimings
    from .errors import InputError
    from .job import Job
    from .moves import MoveCosts, MoveReason
    from .placement import MAX_JOBS_PER_GPU, GpuRef, GpuSlot, Placement, PlanRows
    from .state import JobView

_WHERE = {
    "Cluster": "cluster", "Node": "cluster", "PackedPair": "decision", "PendingJob": "decision",
    "PendingReason": "decision", "RoundDecision": "decision", "StageTimings": "decision", "InputError": "errors",
    "Job": "job", "MoveCosts": "moves", "MoveReason": "moves",
    "MAX_JOBS_PER_GPU": "placement", "GpuRef": "placement", "GpuSlot": "placement",
    "Placement": "placement", "PlanRows": "placement", "JobView": "state",
}

__all__ = [
    "Cluster", "Node", "Job", "JobView", "Placement", "PlanRows", "GpuRef", "GpuSlot", "MAX_JOBS_PER_GPU",
    "MoveCosts", "MoveReason", "RoundDecision", "PackedPair", "PendingJob", "PendingReason", "StageTimings",
    "InputError",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
