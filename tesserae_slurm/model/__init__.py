"""Typed, immutable data shared by the engine, the simulator and the daemon."""

from .cluster import Cluster, Node
from .decision import PackedPair, PendingJob, PendingReason, RoundDecision, StageTimings
from .errors import InputError
from .job import Job
from .plan import MAX_JOBS_PER_GPU, GpuRef, GpuSlot, Placement, PlanRows
from .state import JobView

__all__ = [
    "Cluster", "Node", "Job", "JobView", "Placement", "PlanRows", "GpuRef", "GpuSlot", "MAX_JOBS_PER_GPU",
    "RoundDecision", "PackedPair", "PendingJob", "PendingReason", "StageTimings", "InputError",
]
