"""Placement plan: node -> GPU index -> set of at most two job ids."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType
from typing import Any

from .cluster import Cluster
from .errors import InputError

MAX_JOBS_PER_GPU = 2

GpuSlot = frozenset[str]
GpuRef = tuple[str, int]  # (node name, GPU index)


@dataclass(frozen=True, eq=True)
class Placement:
    """Immutable placement. Node order is the order given (it matters for display only)."""

    nodes: Mapping[str, tuple[GpuSlot, ...]]
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for node, gpus in self.nodes.items():
            for idx, slot in enumerate(gpus):
                if len(slot) > MAX_JOBS_PER_GPU:
                    raise InputError(
                        f"node {node!r} GPU {idx} holds {len(slot)} jobs (at most {MAX_JOBS_PER_GPU})"
                    )

    # --- construction -------------------------------------------------------------------------
    @staticmethod
    def empty(cluster: Cluster) -> "Placement":
        return Placement({n.name: tuple(frozenset() for _ in range(n.num_gpus)) for n in cluster.nodes})

    @staticmethod
    def built(nodes: Mapping[str, tuple[GpuSlot, ...]],
              job_gpus: Mapping[str, tuple[GpuRef, ...]] | None = None) -> "Placement":
        """A plan the engine built itself, slot by slot, so it holds at most two jobs per GPU by
        construction: skips the per-GPU check (every GPU of the cluster, twice a round at scale).

        ``job_gpus``: the builder knows every job's GPUs on the way (each job's GPUs sorted, as
        ``job_gpus()`` returns them); handing them in saves walking every GPU again. A dict is taken
        over, not copied (do not change it). Tests check handed-in maps against a recount."""
        p = object.__new__(Placement)
        object.__setattr__(p, "nodes", nodes)
        object.__setattr__(p, "_memo", {} if job_gpus is None else {"job_gpus": MappingProxyType(
            job_gpus if type(job_gpus) is dict else dict(job_gpus))})
        return p

    @staticmethod
    def from_lists(raw: Mapping[str, Iterable[Iterable[str]]]) -> "Placement":
        nodes: dict[str, tuple[GpuSlot, ...]] = {}
        for node, gpus in raw.items():
            slots = []
            for idx, ids in enumerate(gpus):
                ids = list(ids)
                for j in ids:
                    if not isinstance(j, str) or not j:
                        raise InputError(f"node {node!r} GPU {idx}: job ids must be non-empty strings, got {j!r}")
                if len(set(ids)) != len(ids):
                    raise InputError(f"node {node!r} GPU {idx}: job listed twice")
                slots.append(frozenset(ids))
            nodes[str(node)] = tuple(slots)
        return Placement(nodes)

    def to_lists(self) -> dict[str, list[list[str]]]:
        return {node: [sorted(slot) for slot in gpus] for node, gpus in self.nodes.items()}

    # --- queries ------------------------------------------------------------------------------
    def job_gpus(self) -> Mapping[str, tuple[GpuRef, ...]]:
        """Each job's GPUs, sorted, as (node, index) pairs (computed once; read-only)."""
        memo = self._memo.get("job_gpus")
        if memo is None:
            out: dict[str, list[GpuRef]] = {}
            for node, gpus in self.nodes.items():
                for idx, slot in enumerate(gpus):
                    if slot:
                        for j in slot:
                            refs = out.get(j)
                            if refs is None:
                                out[j] = [(node, idx)]
                            else:
                                refs.append((node, idx))
            # refs come in index order within a node: only a job on several nodes needs sorting
            memo = self._memo["job_gpus"] = MappingProxyType(
                {j: tuple(refs) if refs[0][0] == refs[-1][0] else tuple(sorted(refs)) for j, refs in out.items()})
        return memo

    def busy_gpus(self) -> int:
        """GPUs holding at least one job (computed once)."""
        memo = self._memo.get("busy")
        if memo is None:
            memo = self._memo["busy"] = sum(map(bool, chain.from_iterable(self.nodes.values())))
        return memo

    def jobs(self) -> set[str]:
        return set(self.job_gpus())

    def shape(self) -> tuple[int, ...]:
        return tuple(len(g) for g in self.nodes.values())

    def check_fits(self, cluster: Cluster) -> None:
        """Raise InputError unless every node exists in ``cluster`` with the same GPU count."""
        sizes = cluster.memo().get("node-sizes")  # checked every engine call: one C-level pass when it fits
        if sizes is None:
            sizes = cluster.memo()["node-sizes"] = {n.name: n.num_gpus for n in cluster.nodes}
        if list(map(sizes.get, self.nodes)) == list(map(len, self.nodes.values())):  # unknown node: None
            return
        for node, gpus in self.nodes.items():
            n = cluster.node(node)
            if len(gpus) != n.num_gpus:
                raise InputError(f"node {node!r} lists {len(gpus)} GPUs but the cluster has {n.num_gpus}")
