"""Placement plan: node -> GPU index -> set of at most two job ids.

A plan the engine builds is often held as arrays only (``PlanRows``: one row per GPU of the
cluster's layout, the numbers of the at most two jobs on it): the engine's stages and the
simulator's shell read that form, and the per-GPU sets (``nodes``) and per-job references
(``job_gpus``) are built from it the first time someone asks. On the Philly set most of the
engine's thousands of plans are never read GPU by GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from .cluster import Cluster
from .errors import InputError
from .layout import GpuLayout, gpu_layout

MAX_JOBS_PER_GPU = 2

GpuSlot = frozenset[str]
GpuRef = tuple[str, int]  # (node name, GPU index)
_EMPTY: GpuSlot = frozenset()


class PlanRows(NamedTuple):
    """A plan as a table over its GPU rows. Built by the engine only (at most two jobs per GPU by
    construction); every listed job holds at least one GPU."""

    names: tuple[str, ...]  # node names, in plan order
    sizes: tuple[int, ...]  # GPUs per node
    ids: tuple[str, ...]  # job number -> job id; also the key order of ``job_gpus()``
    table: np.ndarray  # (GPUs, 2) job numbers per GPU row, -1 = none (either column)

    @property
    def layout(self) -> GpuLayout:
        return gpu_layout(self.names, self.sizes)


class Placement:
    """Immutable placement. Node order is the order given (it matters for display only)."""

    __slots__ = ("_nodes", "_rows", "_memo")
    __hash__ = None  # type: ignore[assignment]  # equal by value, and that value is a dict

    def __init__(self, nodes: Mapping[str, tuple[GpuSlot, ...]]) -> None:
        for node, gpus in nodes.items():
            for idx, slot in enumerate(gpus):
                if len(slot) > MAX_JOBS_PER_GPU:
                    raise InputError(
                        f"node {node!r} GPU {idx} holds {len(slot)} jobs (at most {MAX_JOBS_PER_GPU})"
                    )
        self._nodes: Mapping[str, tuple[GpuSlot, ...]] | None = nodes
        self._rows: PlanRows | None = None
        self._memo: dict[str, Any] = {}

    @property
    def nodes(self) -> Mapping[str, tuple[GpuSlot, ...]]:
        nodes = self._nodes
        if nodes is None:
            nodes = self._nodes = _nodes_of(self._rows)  # type: ignore[arg-type]
        return nodes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return self is other or self.nodes == other.nodes

    def __repr__(self) -> str:
        return f"Placement(nodes={self.nodes!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # the nodes alone: memos hold read-only views
        return Placement, (dict(self.nodes),)

    # --- construction -------------------------------------------------------------------------
    @staticmethod
    def empty(cluster: Cluster) -> Placement:
        return Placement({n.name: tuple(frozenset() for _ in range(n.num_gpus)) for n in cluster.nodes})

    @staticmethod
    def built(nodes: Mapping[str, tuple[GpuSlot, ...]],
              job_gpus: Mapping[str, tuple[GpuRef, ...]] | None = None) -> Placement:
        """A plan the engine built itself, slot by slot, so it holds at most two jobs per GPU by
        construction: skips the per-GPU check (every GPU of the cluster, twice a round at scale).

        ``job_gpus``: the builder knows every job's GPUs on the way (each job's GPUs sorted, as
        ``job_gpus()`` returns them); handing them in saves walking every GPU again. A dict is taken
        over, not copied (do not change it). Tests check handed-in maps against a recount."""
        p = object.__new__(Placement)
        p._nodes, p._rows = nodes, None
        p._memo = {} if job_gpus is None else {"job_gpus": MappingProxyType(
            job_gpus if type(job_gpus) is dict else dict(job_gpus))}
        return p

    @staticmethod
    def from_rows(rows: PlanRows) -> Placement:
        """A plan the engine built as a table (see ``PlanRows``); its sets are built when read."""
        p = object.__new__(Placement)
        p._nodes, p._rows, p._memo = None, rows, {}
        return p

    def rows(self) -> PlanRows | None:
        """The table form, when the plan was built as one (else None: read ``nodes``)."""
        return self._rows

    def as_rows(self, names: tuple[str, ...], sizes: tuple[int, ...]) -> PlanRows | None:
        """The plan as a table over nodes ``names`` of ``sizes`` GPUs (its own, when it has one), or
        None when its nodes are not those. Jobs are numbered in ``job_gpus()`` order."""
        rows = self._rows
        if rows is not None:
            return rows if rows.names == names and rows.sizes == sizes else None
        if tuple(self.nodes) != names or tuple(map(len, self.nodes.values())) != sizes:
            return None
        gpus_of = self.job_gpus()
        refs = list(gpus_of.values())
        table = table_of_refs(gpu_layout(names, sizes), refs, np.fromiter(map(len, refs), np.int64, len(refs)))
        return PlanRows(names, sizes, tuple(gpus_of), table)

    @staticmethod
    def from_lists(raw: Mapping[str, Iterable[Iterable[str]]]) -> Placement:
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
        if memo is None and self._rows is not None:
            memo = self._memo["job_gpus"] = MappingProxyType(_job_gpus_of(self._rows))
        elif memo is None:
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
        if memo is None and self._rows is not None:
            t = self._rows.table
            memo = self._memo["busy"] = int(np.count_nonzero((t[:, 0] >= 0) | (t[:, 1] >= 0)))
        elif memo is None:
            memo = self._memo["busy"] = sum(map(bool, chain.from_iterable(self.nodes.values())))
        return memo

    def jobs(self) -> set[str]:
        if self._rows is not None:
            return set(self._rows.ids)
        return set(self.job_gpus())

    def job_nodes(self) -> Mapping[str, str]:
        """Each job's first node (``job_gpus()[job][0][0]``: by name for a job across nodes), in
        ``job_gpus()`` order: what the shells need per job (its GPU type) without every GPU
        reference (computed once; read-only)."""
        memo = self._memo.get("job_nodes")
        if memo is None:
            rows = self._rows
            if rows is not None:
                memo = dict(zip(rows.ids, _first_nodes(rows)))
            else:
                memo = {j: refs[0][0] for j, refs in self.job_gpus().items()}
            memo = self._memo["job_nodes"] = MappingProxyType(memo)
        return memo

    def shape(self) -> tuple[int, ...]:
        return tuple(len(g) for g in self.nodes.values())

    def check_fits(self, cluster: Cluster) -> None:
        """Raise InputError unless every node exists in ``cluster`` with the same GPU count."""
        sizes = cluster.node_sizes
        rows = self._rows
        if rows is not None and list(map(sizes.get, rows.names)) == list(rows.sizes):
            return
        if list(map(sizes.get, self.nodes)) == list(map(len, self.nodes.values())):  # unknown node: None
            return
        for node, gpus in self.nodes.items():
            n = cluster.node(node)
            if len(gpus) != n.num_gpus:
                raise InputError(f"node {node!r} lists {len(gpus)} GPUs but the cluster has {n.num_gpus}")


# ---- the table form ---------------------------------------------------------------------------------
def table_of_refs(layout: GpuLayout, refs: list[tuple[GpuRef, ...]] | tuple[tuple[GpuRef, ...], ...],
                  counts: np.ndarray) -> np.ndarray:
    """The (GPUs, 2) table of jobs numbered by position in ``refs`` (``counts`` GPUs each), a GPU's
    lower number in column 0."""
    at = np.fromiter(map(layout.row_of.__getitem__, chain.from_iterable(refs)), np.int64, int(counts.sum()))
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    order = np.argsort(at, kind="stable")
    at, owner = at[order], owner[order]
    second = np.zeros(len(at), dtype=np.int64)  # a GPU's second job goes into column 1
    if len(at) > 1:
        second[1:] = at[1:] == at[:-1]
    table = np.full((len(layout.refs), 2), -1, dtype=np.int64)
    table[at, second] = owner
    return table


def _nodes_of(rows: PlanRows) -> dict[str, tuple[GpuSlot, ...]]:
    """The per-GPU sets of a table: one frozenset per job (and per packed pair), shared by its GPUs."""
    ids, t = rows.ids, rows.table
    slots = [*map(frozenset, zip(ids)), _EMPTY]  # job number -> its set; -1 -> the empty set
    row_slots = list(map(slots.__getitem__, t[:, 0].tolist()))
    two = np.flatnonzero(t[:, 1] >= 0)
    if len(two):
        pairs: dict[tuple[int, int], GpuSlot] = {}
        for r, a, b in zip(two.tolist(), t[two, 0].tolist(), t[two, 1].tolist()):
            if a < 0:
                row_slots[r] = slots[b]
                continue
            s = pairs.get((a, b))
            if s is None:
                s = pairs[(a, b)] = frozenset((ids[a], ids[b]))
            row_slots[r] = s
    offsets = rows.layout.offset.tolist()
    return {name: tuple(row_slots[off:off + g]) for name, off, g in zip(rows.names, offsets, rows.sizes)}


def _entries(rows: PlanRows) -> tuple[np.ndarray, np.ndarray]:
    """(job number, GPU row) of every job on every GPU: column 0's, then column 1's."""
    t = rows.table
    at = np.arange(len(t))
    h0, h1 = t[:, 0] >= 0, t[:, 1] >= 0
    return np.concatenate((t[h0, 0], t[h1, 1])), np.concatenate((at[h0], at[h1]))


def _job_rows(rows: PlanRows) -> tuple[np.ndarray, np.ndarray]:
    """``_entries`` by job number, then row."""
    job, row = _entries(rows)
    order = np.lexsort((row, job))
    return job[order], row[order]


def _first_nodes(rows: PlanRows) -> list[str]:
    """Per job number, the first node of its sorted GPU references: the node whose name sorts first
    among the job's nodes (its only node, for most jobs)."""
    layout = rows.layout
    job, row = _entries(rows)
    best = np.full(len(rows.ids), len(rows.names), dtype=np.int64)
    np.minimum.at(best, job, layout.name_rank[layout.node_of[row]])
    return list(map(layout.by_name.__getitem__, best.tolist()))


def _job_gpus_of(rows: PlanRows) -> dict[str, tuple[GpuRef, ...]]:
    """``job_gpus()`` of a table, keys by job number; each job's GPUs sorted (in index order on one
    node, by name across nodes), as the sets give them."""
    job, row = _job_rows(rows)
    counts = np.bincount(job, minlength=len(rows.ids))
    ends = np.cumsum(counts)
    starts = ends - counts
    refs = list(map(rows.layout.refs.__getitem__, row.tolist()))
    mine = list(map(tuple, map(refs.__getitem__, map(slice, starts.tolist(), ends.tolist()))))
    node_of = rows.layout.node_of
    for i in np.flatnonzero(node_of[row[starts]] != node_of[row[ends - 1]]).tolist():
        mine[i] = tuple(sorted(mine[i]))
    return dict(zip(rows.ids, mine))
