"""Placement plan: node -> GPU index -> set of at most two job ids, held as one table.

A plan is a ``PlanRows`` table: one row per GPU of its node layout, the numbers of the at most two
jobs on it. Every reader (the per-GPU sets ``nodes``, each job's GPUs ``job_gpus``, its first node
``job_nodes``) is computed from the table when called; the engine's stages and the simulator read
the table itself. A plan built from per-GPU sets (the daemon, the CLI, tests) is turned into a
table once, when it is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from .cluster import Cluster
from .errors import InputError
from .first_nodes import first_nodes
from .layout import GpuLayout, gpu_layout

MAX_JOBS_PER_GPU = 2

GpuSlot = frozenset[str]
GpuRef = tuple[str, int]  # (node name, GPU index)
_EMPTY: GpuSlot = frozenset()


class PlanRows(NamedTuple):
    """A plan as a table over its GPU rows; every listed job holds at least one GPU."""

    names: tuple[str, ...]  # node names, in plan order
    sizes: tuple[int, ...]  # GPUs per node
    ids: tuple[str, ...]  # job number -> job id; also the key order of ``job_gpus()``
    table: np.ndarray  # (GPUs, 2) job numbers per GPU row, -1 = none (either column)

    @property
    def layout(self) -> GpuLayout:
        return gpu_layout(self.names, self.sizes)


class Placement:
    """Immutable placement. Node order is the order given (it matters for display only)."""

    __slots__ = ("_rows",)
    __hash__ = None  # type: ignore[assignment]  # equal by value, and that value is a dict

    def __init__(self, nodes: Mapping[str, tuple[GpuSlot, ...]]) -> None:
        for node, gpus in nodes.items():
            for idx, slot in enumerate(gpus):
                if len(slot) > MAX_JOBS_PER_GPU:
                    raise InputError(
                        f"node {node!r} GPU {idx} holds {len(slot)} jobs (at most {MAX_JOBS_PER_GPU})"
                    )
        names = tuple(nodes)
        sizes = tuple(map(len, nodes.values()))
        gpus_of = _job_gpus_of_sets(nodes)
        refs = list(gpus_of.values())
        table = table_of_refs(gpu_layout(names, sizes), refs, np.fromiter(map(len, refs), np.int64, len(refs)))
        self._rows = PlanRows(names, sizes, tuple(gpus_of), table)

    @property
    def nodes(self) -> Mapping[str, tuple[GpuSlot, ...]]:
        """The per-GPU job sets, node by node."""
        return _nodes_of(self._rows)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return self is other or self.nodes == other.nodes

    def __repr__(self) -> str:
        return f"Placement(nodes={self.nodes!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Placement, (dict(self.nodes),)

    # --- construction -------------------------------------------------------------------------
    @staticmethod
    def empty(cluster: Cluster) -> Placement:
        names, sizes = cluster.shape
        return Placement.from_rows(PlanRows(names, sizes, (), np.full((sum(sizes), 2), -1, dtype=np.int64)))

    @staticmethod
    def from_rows(rows: PlanRows) -> Placement:
        """A plan given as a table (see ``PlanRows``); checked: its shape, job numbers in range, no
        job twice on a GPU, every listed job on at least one GPU."""
        t = rows.table
        if t.shape != (sum(rows.sizes), 2) or len(rows.names) != len(rows.sizes):
            raise ValueError(f"plan table of shape {t.shape} for nodes of {rows.sizes} GPUs")
        held = t[t >= 0]
        if len(held) and held.max() >= len(rows.ids):
            raise ValueError(f"plan table names job {int(held.max())} of {len(rows.ids)}")
        if ((t[:, 0] == t[:, 1]) & (t[:, 0] >= 0)).any():
            raise ValueError("plan table lists a job twice on one GPU")
        if len(rows.ids) and np.bincount(held, minlength=len(rows.ids)).min() == 0:
            raise ValueError("plan table lists a job without a GPU")
        p = object.__new__(Placement)
        p._rows = rows
        return p

    def rows(self) -> PlanRows:
        """The plan's table."""
        return self._rows

    def as_rows(self, names: tuple[str, ...], sizes: tuple[int, ...]) -> PlanRows | None:
        """The plan's table when its nodes are ``names`` of ``sizes`` GPUs, in that order, else None."""
        rows = self._rows
        return rows if rows.names == names and rows.sizes == sizes else None

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
        """Each job's GPUs, sorted, as (node, index) pairs (read-only)."""
        return MappingProxyType(_job_gpus_of(self._rows))

    def busy_gpus(self) -> int:
        """GPUs holding at least one job."""
        t = self._rows.table
        return int(np.count_nonzero((t[:, 0] >= 0) | (t[:, 1] >= 0)))

    def jobs(self) -> set[str]:
        return set(self._rows.ids)

    def job_nodes(self) -> Mapping[str, str]:
        """Each job's first node (``job_gpus()[job][0][0]``: by name for a job across nodes), in
        ``job_gpus()`` order: what the shells need per job (its GPU type) without every GPU
        reference (read-only)."""
        rows = self._rows
        return MappingProxyType(dict(zip(rows.ids, _first_nodes(rows))))

    def shape(self) -> tuple[int, ...]:
        return self._rows.sizes

    def check_fits(self, cluster: Cluster) -> None:
        """Raise InputError unless every node exists in ``cluster`` with the same GPU count."""
        rows, sizes = self._rows, cluster.node_sizes
        if [sizes.get(n) for n in rows.names] == list(rows.sizes):  # an unknown node: None
            return
        for node, count in zip(rows.names, rows.sizes):
            n = cluster.node(node)
            if count != n.num_gpus:
                raise InputError(f"node {node!r} lists {count} GPUs but the cluster has {n.num_gpus}")


def _job_gpus_of_sets(nodes: Mapping[str, tuple[GpuSlot, ...]]) -> dict[str, tuple[GpuRef, ...]]:
    """Each job's GPUs, sorted, keys in order of first appearance walking the nodes GPU by GPU."""
    out: dict[str, list[GpuRef]] = {}
    for node, gpus in nodes.items():
        for idx, slot in enumerate(gpus):
            for j in sorted(slot):
                out.setdefault(j, []).append((node, idx))
    # refs come in index order within a node: only a job on several nodes needs sorting
    return {j: tuple(refs) if refs[0][0] == refs[-1][0] else tuple(sorted(refs)) for j, refs in out.items()}


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
    best = first_nodes(rows.table, layout.node_of, layout.name_rank, len(rows.ids))
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
