"""Builders shared by the policy tests: views, inputs, a constant-speed lookup, a tiny round loop."""

from __future__ import annotations

from collections.abc import Mapping

from tesserae_slurm.model import Cluster, Job, JobView
from tesserae_slurm.policies.base import SchedulingInput


class ConstantSpeeds:
    """ThroughputLookup stub: every job runs at ``speed[gpu_type]`` alone, nothing packs."""

    def __init__(self, speed: Mapping[str, float] | None = None) -> None:
        self.speed = dict(speed or {})

    def isolated(self, job: Job, gpu_type: str) -> float:
        return self.speed.get(gpu_type, 1.0)

    def packed(self, a: Job, b: Job, gpu_type: str) -> None:
        return None


def view(jid: str, gpus: int = 1, submit: float = 0.0, *, served: float = 0.0, running: bool = False,
         total: float | None = None, remaining: float | None = None) -> JobView:
    """``served`` is wall seconds run; attained service follows as GPUs x served."""
    return JobView(Job(jid, gpus, "resnet50", "64"), submit, attained_service=served * gpus,
                   executed_time=served, running=running, total_work=total, remaining_work=remaining)


def inp(views, now: float = 0.0, gpus: int = 4, round_s: float = 360.0, lookup=None,
        cluster: Cluster | None = None) -> SchedulingInput:
    return SchedulingInput(now, round_s, tuple(views), cluster or Cluster.from_spec(f"1x{gpus}"),
                           lookup or ConstantSpeeds())


def greedy_place(order, gpus_of: Mapping[str, int], capacity: int) -> set[str]:
    """Listing 1 on one node: walk the order, place what fits, keep walking (backfill)."""
    free, placed = capacity, set()
    for j in order:
        if gpus_of[j] <= free:
            placed.add(j)
            free -= gpus_of[j]
    return placed
