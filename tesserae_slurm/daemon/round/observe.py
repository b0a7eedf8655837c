"""Observe: Slurm's jobs and nodes -> one typed snapshot of the managed partition (pure but for the two
listings ``observe`` asks Slurm for).

A job is managed when it sits in the managed partition and its Comment carries tsbatch's tag. Its
metadata comes from that Comment, and the daemon's last placement of it from its AdminComment. Nodes
are schedulable when Slurm says they are up. A job the daemon does not manage (untagged, or in another
partition sharing the nodes) keeps exactly the GPUs Slurm gave it (its gres indices): those are left
out and the rest of the node stays usable, so one foreign job cannot make the daemon evict everyone.
Nodes that operators drained for tesserae are left out like nodes Slurm reports down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...harness.assignment import PREFIX as ASSIGN_PREFIX
from ...harness.assignment import Assignment
from ...model import Cluster, InputError, Placement
from ...model.meta import JobMeta, is_tagged
from ...site.config import SiteConfig
from ...site.partition import cluster_of
from ...slurm import SlurmBackend, SlurmJob, SlurmNode


@dataclass(frozen=True)
class ManagedJob:
    slurm: SlurmJob
    meta: JobMeta | None  # None when the tagged Comment does not parse (see meta_error)
    meta_error: str = ""
    assignment: Assignment | None = None  # the daemon's placement found in AdminComment

    @property
    def id(self) -> str:
        return str(self.slurm.job_id)


@dataclass(frozen=True)
class Snapshot:
    time: float
    jobs: Mapping[str, ManagedJob]  # every managed job Slurm still lists, by id
    nodes: tuple[SlurmNode, ...]
    cluster: Cluster  # schedulable nodes with GPUs
    excluded: Mapping[str, str]  # node -> why it is not schedulable this round
    foreign: tuple[SlurmJob, ...]  # active jobs on the managed nodes that the daemon does not manage
    # node -> the Slurm GPU indices the engine's indices 0..n-1 stand for, where foreign jobs hold some
    gpu_index: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    held_by_others: tuple[str, ...] = ()  # "node2: 4 GPUs held by job 57 (user bob, not managed)"
    taken: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # node -> GPU index -> foreign job

    def job(self, job_id: str) -> ManagedJob | None:
        return self.jobs.get(job_id)


def observe(backend: SlurmBackend, cfg: SiteConfig, now: float, drained: Mapping[str, str]) -> Snapshot:
    """What Slurm shows now; ``drained``: node -> why operators drained it for tesserae."""
    jobs = backend.list_jobs()  # every partition: foreign jobs may share the managed nodes
    nodes = backend.list_nodes(cfg.slurm.partition)
    return drain_nodes(build_snapshot(now, jobs, nodes, cfg), drained)


def drain_nodes(snap: Snapshot, drained: Mapping[str, str]) -> Snapshot:
    """The snapshot without the drained nodes: nothing is placed there and the plan moves their jobs off,
    exactly as for a node Slurm reports down."""
    if not drained:
        return snap
    excluded = dict(snap.excluded)
    for node, why in drained.items():
        if any(n.name == node for n in snap.nodes):
            excluded.setdefault(node, why)
    cluster = Cluster(tuple(n for n in snap.cluster.nodes if n.name not in excluded))
    return replace(snap, cluster=cluster, excluded=excluded)


def managed_job(j: SlurmJob) -> ManagedJob:
    meta, error = None, ""
    try:
        meta = JobMeta.decode(j.comment)
    except InputError as exc:
        error = str(exc)
    assignment = None
    if j.admin_comment.startswith(ASSIGN_PREFIX):
        try:
            assignment = Assignment.decode(j.admin_comment)
        except InputError:
            assignment = None
    return ManagedJob(j, meta, error, assignment)


def _holder(j: SlurmJob) -> str:
    return f"job {j.job_id} (user {j.user or '?'}, not managed)"


def build_snapshot(now: float, jobs: Sequence[SlurmJob], nodes: Sequence[SlurmNode], cfg: SiteConfig) -> Snapshot:
    """``jobs``: every job Slurm lists (all partitions: a foreign job may share the managed nodes)."""
    partition = cfg.slurm.partition
    names = {n.name for n in nodes}
    managed: dict[str, ManagedJob] = {}
    foreign: list[SlurmJob] = []
    for j in jobs:
        mine = not j.partition or j.partition == partition
        if mine and is_tagged(j.comment):
            managed[str(j.job_id)] = managed_job(j)
        elif j.state.is_active and names.intersection(j.nodes):
            foreign.append(j)
    excluded: dict[str, str] = {}
    for n in nodes:
        if n.gpus <= 0:
            continue
        if not n.available:
            flags = "+".join(n.state_flags)
            excluded[n.name] = f"node {n.state}{'+' + flags if flags else ''}" + (f": {n.reason}" if n.reason else "")
    taken: dict[str, dict[int, SlurmJob]] = {}  # node -> Slurm GPU index -> the foreign job holding it
    for j in foreign:
        for node in j.nodes:
            gpus = next((n.gpus for n in nodes if n.name == node), 0)
            idx = j.gpu_indices(node)
            if not idx and j.gpus_per_node:  # asks for GPUs, indices unreadable: assume the whole node
                idx = tuple(range(gpus))
            for g in idx:
                if 0 <= g < gpus:
                    taken.setdefault(node, {}).setdefault(g, j)
    held: list[str] = []
    gpu_index: dict[str, tuple[int, ...]] = {}
    for n in nodes:
        if n.name not in taken:
            continue
        by_job: dict[int, list[int]] = {}
        for g, j in taken[n.name].items():
            by_job.setdefault(j.job_id, []).append(g)
        holders = {j.job_id: j for j in taken[n.name].values()}
        text = "; ".join(f"{len(g)} GPU{'s' if len(g) > 1 else ''} held by {_holder(holders[jid])}"
                         for jid, g in sorted(by_job.items()))
        held.append(f"{n.name}: {text}")
        free = tuple(g for g in range(n.gpus) if g not in taken[n.name])
        if not free:
            excluded.setdefault(n.name, text)
        else:
            gpu_index[n.name] = free
    schedulable = [n for n in nodes if n.gpus > 0 and n.name not in excluded]
    cluster = cluster_of(cfg, schedulable)
    if gpu_index:
        cluster = Cluster(tuple(replace(node, num_gpus=len(gpu_index[node.name])) if node.name in gpu_index else node
                                for node in cluster.nodes))
    ids = {node: {g: j.job_id for g, j in by_gpu.items()} for node, by_gpu in taken.items()}
    return Snapshot(now, managed, tuple(nodes), cluster, excluded, tuple(foreign), gpu_index, tuple(held), ids)


def in_slurm_indices(p: Placement, snap: Snapshot) -> Placement:
    """The engine's placement in Slurm's GPU indices, for the record (``round show``): on nodes where
    foreign jobs hold GPUs, those show as ``foreign:<job>`` and the managed jobs sit on the others."""
    if not snap.gpu_index:
        return p
    total = {n.name: n.gpus for n in snap.nodes}
    nodes = dict(p.nodes)
    for node, index in snap.gpu_index.items():
        if node not in nodes:
            continue
        slots = [frozenset({f"foreign:{snap.taken[node][g]}"}) if g in snap.taken.get(node, {}) else frozenset()
                 for g in range(total[node])]
        for k, slot in enumerate(nodes[node]):
            slots[index[k]] = slot
        nodes[node] = tuple(slots)
    return Placement(nodes)
