"""Observe: Slurm's jobs and nodes -> one typed snapshot of the managed partition (pure).

A job is managed when it sits in the managed partition and its Comment carries tsbatch's tag. Its
metadata comes from that Comment, and the daemon's last placement of it from its AdminComment. Nodes
are schedulable when Slurm says they are up and no unmanaged job runs on them: the daemon is the
only GPU arbiter of its partition, and a node someone else uses is left out rather than shared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..harness.assignment import PREFIX as ASSIGN_PREFIX
from ..harness.assignment import Assignment
from ..model import Cluster, InputError
from ..slurm import SlurmJob, SlurmNode
from ..tsbatch.meta import JobMeta, is_tagged
from .config import DaemonConfig
from .connect import cluster_of


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
    foreign: tuple[SlurmJob, ...]  # active jobs in the partition that tsbatch did not submit

    def job(self, job_id: str) -> ManagedJob | None:
        return self.jobs.get(job_id)


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


def build_snapshot(now: float, jobs: Sequence[SlurmJob], nodes: Sequence[SlurmNode], cfg: DaemonConfig) -> Snapshot:
    partition = cfg.slurm.partition
    managed: dict[str, ManagedJob] = {}
    foreign: list[SlurmJob] = []
    for j in jobs:
        if j.partition and j.partition != partition:
            continue
        if is_tagged(j.comment):
            managed[str(j.job_id)] = managed_job(j)
        elif j.state.is_active:
            foreign.append(j)
    excluded: dict[str, str] = {}
    for n in nodes:
        if n.gpus <= 0:
            continue
        if not n.available:
            flags = "+".join(n.state_flags)
            excluded[n.name] = f"node {n.state}{'+' + flags if flags else ''}" + (f": {n.reason}" if n.reason else "")
    for j in foreign:
        for node in j.nodes:
            excluded.setdefault(node, f"runs job {j.job_id}, which was not submitted with tsbatch")
    schedulable = [n for n in nodes if n.gpus > 0 and n.name not in excluded]
    return Snapshot(now, managed, tuple(nodes), cluster_of(cfg, schedulable), excluded, tuple(foreign))
