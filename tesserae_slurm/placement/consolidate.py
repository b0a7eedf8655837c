"""Consolidated placement without packing (paper Listing 1, lines 1-12).

Walk jobs in the policy's order and give each as few nodes as possible: a job that fits in one node
gets the fullest node that still fits it (best fit keeps whole nodes free for large jobs); a larger
job takes whole idle nodes and puts any remainder best-fit on one more node. All nodes of a job have
one GPU type. The walk continues past a job that does not fit (backfill) and stops when no GPU is
free, as Listing 1 does; jobs not reached are pending with reason ``Priority``.

The plan is *logical*: node names are real, but migration minimization relabels nodes and GPUs
afterwards, so only which jobs share a node and a GPU matters here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Cluster, Job, PendingJob, PendingReason, Placement


@dataclass(frozen=True)
class ConsolidationResult:
    placement: Placement
    placed: tuple[str, ...]  # in policy order
    pending: tuple[PendingJob, ...]  # in policy order


@dataclass(frozen=True)
class Unit:
    """Jobs placed together on the same GPUs: one job, or a pair a policy chose to co-locate."""

    jobs: tuple[Job, ...]

    @property
    def num_gpus(self) -> int:
        return self.jobs[0].num_gpus


class _FreeMap:
    """Mutable working copy of free GPU indices per node (never escapes this module)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.free: list[list[int]] = [list(range(n.num_gpus)) for n in cluster.nodes]
        self.total_free = cluster.total_gpus
        self.capacity_by_type: dict[str, int] = {}
        for n in cluster.nodes:
            self.capacity_by_type[n.gpu_type] = self.capacity_by_type.get(n.gpu_type, 0) + n.num_gpus

    def take(self, node_idx: int, count: int) -> list[int]:
        got, self.free[node_idx] = self.free[node_idx][:count], self.free[node_idx][count:]
        self.total_free -= count
        return got

    def choose(self, n: int) -> list[tuple[int, int]] | None:
        """(node index, GPU count) pieces for an ``n``-GPU job on the fewest nodes, or None."""
        for gtype in self.cluster.gpu_types:
            nodes = [i for i, node in enumerate(self.cluster.nodes) if node.gpu_type == gtype]
            pick = self._choose_in(nodes, n)
            if pick is not None:
                return pick
        return None

    def _choose_in(self, nodes: list[int], n: int) -> list[tuple[int, int]] | None:
        sizes = self.cluster.nodes
        fits = [i for i in nodes if len(self.free[i]) >= n]
        if fits:  # one node suffices: best fit, then node order
            best = min(fits, key=lambda i: (len(self.free[i]), i))
            return [(best, n)]
        if n <= max((sizes[i].num_gpus for i in nodes), default=0):
            return None  # would fit one node of this type, but none has room: do not spread it
        idle = sorted((i for i in nodes if len(self.free[i]) == sizes[i].num_gpus),
                      key=lambda i: (-sizes[i].num_gpus, i))
        pieces: list[tuple[int, int]] = []
        remaining = n
        for i in idle:
            if remaining >= sizes[i].num_gpus:
                pieces.append((i, sizes[i].num_gpus))
                remaining -= sizes[i].num_gpus
        if remaining:
            used = {i for i, _ in pieces}
            rest = [i for i in nodes if i not in used and len(self.free[i]) >= remaining]
            if not rest:
                return None
            best = min(rest, key=lambda i: (len(self.free[i]), i))
            pieces.append((best, remaining))
        return pieces


def _reason(free: _FreeMap, n: int) -> PendingReason:
    if n > max(free.capacity_by_type.values(), default=0):
        return PendingReason.UNSATISFIABLE
    if free.total_free >= n:
        return PendingReason.CONSOLIDATION
    return PendingReason.RESOURCES


def place_units(cluster: Cluster, units: Sequence[Unit]) -> ConsolidationResult:
    free = _FreeMap(cluster)
    slots: list[list[set[str]]] = [[set() for _ in range(n.num_gpus)] for n in cluster.nodes]
    placed: list[str] = []
    pending: list[PendingJob] = []
    for unit in units:
        n = unit.num_gpus
        if free.total_free == 0:
            pending.extend(PendingJob(j.id, PendingReason.PRIORITY, "no GPU left this round") for j in unit.jobs)
            continue
        pieces = free.choose(n)
        if pieces is None:
            reason = _reason(free, n)
            detail = f"needs {n} GPUs; {free.total_free} free"
            pending.extend(PendingJob(j.id, reason, detail) for j in unit.jobs)
            continue
        for node_idx, count in pieces:
            for gpu in free.take(node_idx, count):
                slots[node_idx][gpu].update(j.id for j in unit.jobs)
        placed.extend(j.id for j in unit.jobs)
    plan = Placement({node.name: tuple(frozenset(s) for s in slots[i]) for i, node in enumerate(cluster.nodes)})
    return ConsolidationResult(plan, tuple(placed), tuple(pending))


def place_consolidated(cluster: Cluster, order: Sequence[Job]) -> ConsolidationResult:
    """Listing 1 without packing: one unit per job."""
    return place_units(cluster, [Unit((j,)) for j in order])
