"""The Slurm actions of one round, from its RoundDecision (pure).

Each job's target GPUs (the decision) are compared with the GPUs it holds now (the daemon's own
accounting): same GPUs -> keep, which means *no Slurm call at all*; none -> start; none any more ->
preempt; different -> migrate (preempt, then start on the new GPUs). Comparing GPU sets rather than
trusting the decision's lists alone also covers jobs the engine could not see where they run (their
node was drained): they are moved like any other migration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ...harness.assignment import Assignment
from ...model import InputError, RoundDecision
from ..state.gpuset import GpuMap, from_refs

Kind = Literal["start", "preempt", "migrate"]


@dataclass(frozen=True)
class Target:
    gpus: GpuMap
    partner: str = ""
    strategy: str = ""
    speed: float = 0.0

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.gpus))


@dataclass(frozen=True)
class Action:
    kind: Kind
    job_id: str
    target: Target | None = None  # where it starts (start, migrate)
    previous: GpuMap | None = None  # where it ran (preempt, migrate)

    def assignment(self, round_id: int, mps_percentage: int, extra: Mapping[str, str] | None = None) -> Assignment:
        assert self.target is not None
        t = self.target
        return Assignment(self.job_id, round_id, dict(t.gpus), partner=t.partner, strategy=t.strategy,
                          mps_percentage=mps_percentage if t.partner else 0, extra=dict(extra or {}))


@dataclass(frozen=True)
class StopItem:
    """A stop for the applier: a plan's preempt or migrate, or reconciliation's and operators' requeue."""

    kind: str  # preempt | migrate | requeue (finish a preemption, stop a hand-started job, `tesserae requeue`)
    job_id: str
    previous: GpuMap | None = None
    target: GpuMap | None = None


@dataclass(frozen=True)
class RoundPlan:
    targets: Mapping[str, Target]  # every placed job of the decision
    actions: tuple[Action, ...]  # preempts and migrations first (they free GPUs), then starts
    kept: tuple[str, ...]

    @property
    def stops(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.kind in ("preempt", "migrate"))

    @property
    def starts(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.kind in ("start", "migrate"))

    def stop_items(self) -> list[StopItem]:
        return [StopItem(a.kind, a.job_id, a.previous, a.target.gpus if a.target else None) for a in self.stops]


def assigned_gpus(assignment: str) -> GpuMap | None:
    """The GPUs of an assignment as recorded (AdminComment text); None when there is none or it does not parse."""
    if not assignment:
        return None
    try:
        return dict(Assignment.decode(assignment).gpus)
    except InputError:
        return None


def targets_of(decision: RoundDecision, gpu_index: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, Target]:
    """``gpu_index``: node -> the Slurm GPU indices the engine's 0..n-1 stand for (foreign jobs hold the rest)."""
    partner: dict[str, str] = {}
    for p in decision.packed:
        partner[p.placed], partner[p.partner] = p.partner, p.placed
    index = gpu_index or {}
    return {
        job: Target(from_refs(tuple((n, index[n][g] if n in index else g) for n, g in refs)), partner.get(job, ""),
                    decision.strategies.get(job, "") or "", float(decision.speeds.get(job, 0.0)))
        for job, refs in decision.placement.job_gpus().items()
    }


def plan_round(decision: RoundDecision, actual: Mapping[str, GpuMap], order: tuple[str, ...] = (),
               gpu_index: Mapping[str, tuple[int, ...]] | None = None) -> RoundPlan:
    """``actual``: GPUs each job holds now (jobs holding none are absent); ``order``: policy order;
    ``gpu_index``: as for ``targets_of``."""
    targets = targets_of(decision, gpu_index)
    rank = {j: i for i, j in enumerate(order)}

    def key(j: str) -> tuple[int, str]:
        return (rank.get(j, len(rank)), j.zfill(12))

    stops: list[Action] = []
    starts: list[Action] = []
    kept: list[str] = []
    for job in sorted(set(targets) | set(actual), key=key):
        t, now = targets.get(job), actual.get(job)
        if t is None and now:
            stops.append(Action("preempt", job, previous=now))
        elif t is not None and not now:
            starts.append(Action("start", job, target=t))
        elif t is not None and now:
            if {n: tuple(sorted(g)) for n, g in now.items()} == {n: tuple(sorted(g)) for n, g in t.gpus.items()}:
                kept.append(job)
            else:
                stops.append(Action("migrate", job, target=t, previous=now))
    return RoundPlan(targets, tuple(stops) + tuple(starts), tuple(kept))
