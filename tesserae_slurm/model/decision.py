"""What one round decides: typed data the simulator and the daemon both act on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from .moves import MoveReason
from .placement import GpuRef, Placement


class PendingReason(str, Enum):
    """Why a job waits, in the spirit of squeue's reason column."""

    PRIORITY = "Priority"  # every GPU was taken before this job's turn in the policy order
    RESOURCES = "Resources"  # GPUs were free but fewer than the job needs
    CONSOLIDATION = "Consolidation"  # enough GPUs free, but not on few enough nodes of one type
    UNSATISFIABLE = "Unsatisfiable"  # the cluster can never hold the job (too many GPUs, unknown type)
    NODES = "Nodes"  # an operator pinned it to nodes (or kept it off nodes) that cannot hold it now
    LIMIT = "Limit"  # its user or account would go over a configured GPU limit (placement/limit_gate.py)
    # the daemon between rounds: the decision runs it on GPUs running jobs hold now; only a round stops them
    ROUND = "Round"


def gpus(n: int) -> str:
    """``n`` GPUs in a waiting job's reason: "1 GPU", "4 GPUs"."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


class PendingJob(NamedTuple):
    """A job that does not run this round and why (a named tuple: one per waiting job per round)."""

    job_id: str
    reason: PendingReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PackedPair:
    """A pending job packed onto the GPUs of a placed one."""

    placed: str
    partner: str
    placed_speed: float  # normalized throughput of the placed job while packed
    partner_speed: float
    placed_strategy: str | None = None  # chosen parallelism strategy, when the job has candidates
    partner_strategy: str | None = None

    @property
    def weight(self) -> float:
        return self.placed_speed + self.partner_speed


@dataclass(frozen=True, slots=True)
class StageTimings:
    """Seconds spent in each stage, measured by the clock the shell hands in (0 without one)."""

    placement: float = 0.0
    packing: float = 0.0
    migration: float = 0.0

    @property
    def total(self) -> float:
        return self.placement + self.packing + self.migration


@dataclass(frozen=True)
class RoundDecision:
    """Final physical placement and the per-job consequences of moving there from the current one."""

    placement: Placement
    started: tuple[str, ...]  # placed now, not placed before
    preempted: tuple[str, ...]  # placed before, not now
    migrated: tuple[str, ...]  # placed in both rounds, on different physical GPUs
    kept: tuple[str, ...]  # placed in both rounds, on the same GPUs: no action needed
    packed: tuple[PackedPair, ...]
    pending: tuple[PendingJob, ...]
    strategies: Mapping[str, str] = field(default_factory=dict)  # job -> chosen strategy
    speeds: Mapping[str, float] = field(default_factory=dict)  # job -> normalized throughput
    migration_cost: float = 0.0
    timings: StageTimings = StageTimings()
    # per migrated or preempted job: what the move bought and cost (cost-aware decisions, model/moves.py)
    moves: tuple[MoveReason, ...] = ()
    # what moves cost decided something (a stop refused, a pair kept, a plan that moves jobs turned down):
    # with the same jobs and order a later round may decide otherwise, as past moves age and work shrinks
    cost_bound: bool = False

    def gpus_of(self, job_id: str) -> tuple[GpuRef, ...]:
        return self.placement.job_gpus().get(job_id, ())
