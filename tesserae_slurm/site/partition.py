"""The managed partition as the site's configuration describes it: each node's GPU type, the shape
tsbatch and the daemon check a job's GPUs against, the Cluster the engine sees, and the profile the
daemon schedules with (tsbatch validates against it): the configured table plus one entry for jobs
submitted with ``--no-profile``.

Such a job has no measured speeds, so the engine must still be able to place it: it gets a model of
its own that runs alone at 1.0 on every GPU type (the definition of normalized speed) and is never
packed (its metadata sets no_pack, and the table measures no pair for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property

from ..model import Cluster, Node
from ..model.meta import UNPROFILED
from ..profiles import IsolatedRecord, ProfileKey, ThroughputProfile, load_profile
from ..slurm.types import SlurmNode
from .config import SiteConfig


def gpu_type_of(cfg: SiteConfig, node: str) -> str:
    return cfg.scheduler.node_gpu_types.get(node, cfg.scheduler.gpu_type).lower()


@cache
def scheduling_profile(spec: str) -> ThroughputProfile:
    base = load_profile(spec)
    extra = tuple(IsolatedRecord(g, ProfileKey(UNPROFILED, "", 1), None, 1.0) for g in base.gpu_types)
    return ThroughputProfile(base.name, base.isolated + extra, base.pairs, dict(base.datasets))


@dataclass(frozen=True)
class PartitionShape:
    """GPUs per node of the managed partition, by GPU type (from sinfo and the site's configuration)."""

    node_gpus: tuple[tuple[str, int], ...]  # (gpu type, GPUs on the node) per schedulable node

    # cached: the daemon checks every queued job against one shape per round (20,000 jobs x 1,792 nodes)
    @cached_property
    def largest_node(self) -> int:
        return max((g for _, g in self.node_gpus), default=0)

    @cached_property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({t for t, _ in self.node_gpus}))

    @cached_property
    def capacity(self) -> int:
        """Most GPUs one job can get: all GPUs of its best-provisioned type (jobs never mix types)."""
        by_type: dict[str, int] = {}
        for t, g in self.node_gpus:
            by_type[t] = by_type.get(t, 0) + g
        return max(by_type.values(), default=0)


def shape_from_nodes(nodes: Sequence[SlurmNode], cfg: SiteConfig) -> PartitionShape:
    """The partition's shape for the job rules (``job_rules.check_meta``), tsbatch's and the daemon's."""
    return PartitionShape(tuple((gpu_type_of(cfg, n.name), n.gpus) for n in nodes if n.gpus > 0))


def cluster_of(cfg: SiteConfig, nodes: Sequence[SlurmNode]) -> Cluster:
    """Nodes with GPUs, in Slurm's order; the caller picks which nodes (all, or schedulable ones)."""
    return Cluster(tuple(Node(n.name, n.gpus, gpu_type_of(cfg, n.name)) for n in nodes if n.gpus > 0))
