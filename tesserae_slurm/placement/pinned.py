"""Pinned placement: running jobs keep their exact GPUs; new jobs go, one at a time, onto what is free.

The consolidated walk (``consolidate.place_consolidated``) places every job of a round from scratch and
migration minimization relabels the plan back onto the physical GPUs; a job spread over nodes with a
remainder (7 GPUs on 4-GPU nodes) can then land elsewhere. Plain Slurm never moves a running job, so
its configuration (``slurm-backfill``) places the way ``select/cons_tres`` does: running jobs stay, and
each new job is walked on the free GPUs alone (a node with 2 of 4 GPUs free is a 2-GPU node to it).
The backfill policy asks ``walk_one`` the same questions, so it knows where the engine will put a job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Cluster, Job, Node, PendingJob, PendingReason, Placement
from ..model.decision import gpus
from .consolidate import ConsolidationResult, place_consolidated


def walk_one(cluster: Cluster, free: Mapping[str, int], job: Job) -> dict[str, int] | None:
    """GPUs per node that ``job`` gets when placed alone on the ``free`` GPUs (node -> count), or None."""
    nodes = tuple(Node(n.name, free[n.name], n.gpu_type) for n in cluster.nodes if free.get(n.name, 0) > 0)
    if sum(n.num_gpus for n in nodes) < job.num_gpus:
        return None
    res = place_consolidated(Cluster(nodes), [job])
    if not res.placed:
        return None
    counts: dict[str, int] = {}
    for node, _ in res.placement.job_gpus()[job.id]:
        counts[node] = counts.get(node, 0) + 1
    return counts


def _reason(cluster: Cluster, free: Mapping[str, int], job: Job) -> PendingJob:
    largest = max(sum(n.num_gpus for n in cluster.nodes if n.gpu_type == t) for t in cluster.gpu_types)
    total = sum(free.values())
    if job.num_gpus > largest:
        reason = PendingReason.UNSATISFIABLE
    elif total >= job.num_gpus:
        reason = PendingReason.CONSOLIDATION
    else:
        reason = PendingReason.RESOURCES
    return PendingJob(job.id, reason, f"needs {gpus(job.num_gpus)}; {total} free")


def place_beside(cluster: Cluster, current: Placement | None, jobs: Sequence[Job]) -> ConsolidationResult:
    """Jobs placed in ``current`` keep their GPUs; the others, in order, each get ``walk_one`` of what is left."""
    gpus_of = current.job_gpus() if current is not None else {}
    slots: dict[str, list[set[str]]] = {n.name: [set() for _ in range(n.num_gpus)] for n in cluster.nodes}
    placed: list[str] = []
    pending: list[PendingJob] = []
    for j in jobs:
        if j.id in gpus_of:
            for node, idx in gpus_of[j.id]:
                slots[node][idx].add(j.id)
            placed.append(j.id)
    for j in jobs:
        if j.id in gpus_of:
            continue
        free_idx = {node: [i for i, s in enumerate(gpus) if not s] for node, gpus in slots.items()}
        free = {node: len(idx) for node, idx in free_idx.items()}
        where = walk_one(cluster, free, j)
        if where is None:
            pending.append(_reason(cluster, free, j))
            continue
        for node, count in where.items():
            for i in free_idx[node][:count]:
                slots[node][i].add(j.id)
        placed.append(j.id)
    plan = Placement({node: tuple(frozenset(s) for s in gpus) for node, gpus in slots.items()})
    return ConsolidationResult(plan, tuple(placed), tuple(pending))
