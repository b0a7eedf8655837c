"""Consolidated placement without packing (paper Listing 1, lines 1-12).

Walk jobs in the policy's order and give each as few nodes as possible: a job that fits in one node
gets the fullest node that still fits it (best fit keeps whole nodes free for large jobs); a larger
job takes whole idle nodes and puts any remainder best-fit on one more node. All nodes of a job have
one GPU type. The walk continues past a job that does not fit (backfill) and stops when no GPU is
free, as Listing 1 does; jobs not reached are pending with reason ``Priority``.

Two optional per-unit hints: ``types``, the order in which GPU types are tried (the engine puts the
type a job runs fastest on first; default: the cluster's types in name order), and ``home``, the node
a job ran on last round: in *sticky* mode a single-node job goes back there whenever it still fits,
before best fit (Gavel's lease extension, in logical terms). Sticky trades some packing of nodes for
fewer migrations; the paper's placement is plain best fit, the default.

The plan is *logical*: node names are real, but migration minimization relabels nodes and GPUs
afterwards, so only which jobs share a node and a GPU matters here.
"""

from __future__ import annotations

from collections.abc import Sequence
import heapq
from dataclasses import dataclass
from functools import partial
from itertools import chain, repeat
from operator import add, attrgetter, itemgetter
from typing import NamedTuple

import numpy as np

from ..model import Cluster, Job, PendingJob, PendingReason, Placement, PlanRows
from . import consolidate_jit
from .arrays import GpuLayout, gpu_layout, runs


@dataclass(frozen=True)
class ConsolidationResult:
    placement: Placement
    placed: tuple[str, ...]  # in policy order
    pending: tuple[PendingJob, ...]  # in policy order


class Unit(NamedTuple):
    """Jobs placed together on the same GPUs: one job, or a pair a policy chose to co-locate.

    A named tuple, not a dataclass: the engine makes one per active job every round (50,000 at scale).
    """

    jobs: tuple[Job, ...]
    home: int = -1  # node index to return to when it fits (sticky placement); -1 = none
    types: tuple[str, ...] | None = None  # GPU types to try, in order; None = the cluster's order

    @property
    def num_gpus(self) -> int:
        return self.jobs[0].num_gpus


_ID = attrgetter("id")
_NUM_GPUS = attrgetter("num_gpus")
_JOBS = itemgetter(0)  # of a Unit
_FIRST = itemgetter(0)
_HINTS = itemgetter(1, 2)  # a Unit's (home, types)
_NEW_PENDING = partial(tuple.__new__, PendingJob)  # without the named tuple's argument handling
_EMPTY: frozenset[str] = frozenset()
_NO_GPU_LEFT = "no GPU left this round"


class _FreeMap:
    """Mutable working copy of free GPUs per node (never escapes this module).

    GPUs are only ever taken during a walk, so a node's free GPUs are always its last ``free[i]``
    indices, and per GPU type two families of lazy heaps answer every query in O(log nodes): nodes
    by free count (best fit: fewest free GPUs that still fit, then node order) and idle nodes by
    size (whole nodes for jobs larger than a node). Stale heap entries are dropped when met.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        empty = _empty(cluster)
        self.size = empty.size
        self.free = list(empty.size)
        self.total_free = cluster.total_gpus
        self.by_free = {t: {f: list(h) for f, h in heaps.items()} for t, heaps in empty.by_free.items()}
        self.idle = {t: {f: list(h) for f, h in heaps.items()} for t, heaps in empty.idle.items()}
        self.max_size = empty.max_size
        self.types = cluster.gpu_types
        self.type_of = empty.type_of
        # GPUs are only ever taken, so a GPU count that found no node of a type never will again:
        # per type, the smallest single-node count that failed, and the multi-node counts that failed
        self.fails_from = {t: s + 1 for t, s in empty.max_size.items()}
        self.fails_multi: dict[str, set[int]] = {t: set() for t in empty.max_size}

    def take(self, node_idx: int, count: int) -> int:
        """Take ``count`` GPUs of a node; returns the index of the first (a node's free GPUs are its last ones)."""
        start = self.size[node_idx] - self.free[node_idx]
        self.free[node_idx] -= count
        self.total_free -= count
        if self.free[node_idx]:
            heapq.heappush(self.by_free[self.type_of[node_idx]].setdefault(self.free[node_idx], []), node_idx)
        return start

    def choose(self, n: int, home: int = -1, types: Sequence[str] | None = None) -> list[tuple[int, int]] | None:
        """(node index, GPU count) pieces for an ``n``-GPU job on the fewest nodes, or None."""
        for gtype in types or self.types:
            if gtype not in self.max_size:
                continue
            if 0 <= home and self.type_of[home] == gtype and n <= self.free[home]:
                return [(home, n)]
            if n <= self.max_size[gtype]:  # one node suffices: best fit; never spread such a job
                best = self.single(gtype, n)
                if best is not None:
                    return [(best, n)]
                continue
            if n in self.fails_multi[gtype]:
                continue
            pick = self._spread(gtype, n)
            if pick is not None:
                return pick
            self.fails_multi[gtype].add(n)
        return None

    def single(self, gtype: str, n: int) -> int | None:
        """The best-fit node of ``gtype`` for ``n`` GPUs (at most its largest node), or None; a count
        that failed is remembered, so larger ones fail at once."""
        if n >= self.fails_from[gtype]:
            return None
        best = self._best_fit(gtype, n)
        if best is None:
            self.fails_from[gtype] = n
        return best

    def _best_fit(self, gtype: str, n: int, exclude: frozenset[int] = frozenset()) -> int | None:
        buckets = self.by_free[gtype]
        for f in range(n, self.max_size[gtype] + 1):
            heap = buckets.get(f)
            if not heap:
                continue
            while heap and self.free[heap[0]] != f:
                heapq.heappop(heap)  # stale: the node has fewer free GPUs by now
            if not heap:
                continue
            if not exclude:
                return heap[0]
            held = []
            while heap and (heap[0] in exclude or self.free[heap[0]] != f):
                i = heapq.heappop(heap)
                if self.free[i] == f:
                    held.append(i)
            found = heap[0] if heap else None
            for i in held:
                heapq.heappush(heap, i)
            if found is not None:
                return found
        return None

    def _spread(self, gtype: str, n: int) -> list[tuple[int, int]] | None:
        """Pieces for a job larger than any node of ``gtype``: whole idle nodes, then best fit."""
        pieces: list[tuple[int, int]] = []
        remaining = n
        for s in sorted(self.idle[gtype], reverse=True):  # whole idle nodes, largest first, node order
            heap = self.idle[gtype][s]
            while remaining >= s and heap:
                i = heapq.heappop(heap)
                if self.free[i] == s:
                    pieces.append((i, s))
                    remaining -= s
        if remaining:
            best = self._best_fit(gtype, remaining, frozenset(i for i, _ in pieces))
            if best is None:
                for i, s in pieces:  # give the idle nodes back: this job does not fit
                    heapq.heappush(self.idle[gtype][s], i)
                return None
            pieces.append((best, remaining))
        return pieces


class _EmptyMap(NamedTuple):
    """The idle cluster's free map; every walk copies the heaps and shares the rest (read only)."""

    size: list[int]  # GPUs per node
    capacity: dict[str, int]  # GPUs per type
    by_free: dict[str, dict[int, list[int]]]  # type -> free count -> heap of node indices
    idle: dict[str, dict[int, list[int]]]  # type -> node size -> heap of idle node indices
    max_size: dict[str, int]  # largest node per type
    type_of: list[str]  # GPU type per node


def _empty_map(cluster: Cluster) -> _EmptyMap:
    size = [n.num_gpus for n in cluster.nodes]
    capacity: dict[str, int] = {}
    by_free: dict[str, dict[int, list[int]]] = {}
    idle: dict[str, dict[int, list[int]]] = {}
    max_size: dict[str, int] = {}
    for i, n in enumerate(cluster.nodes):
        t = n.gpu_type
        capacity[t] = capacity.get(t, 0) + n.num_gpus
        by_free.setdefault(t, {}).setdefault(n.num_gpus, []).append(i)  # ascending: a valid heap
        idle.setdefault(t, {}).setdefault(n.num_gpus, []).append(i)
        max_size[t] = max(max_size.get(t, 0), n.num_gpus)
    return _EmptyMap(size, capacity, by_free, idle, max_size, [n.gpu_type for n in cluster.nodes])


def _empty(cluster: Cluster) -> _EmptyMap:
    """The idle cluster's free map, built once per cluster (every walk copies its heaps)."""
    empty: _EmptyMap | None = cluster.memo().get("consolidate-free-map")
    if empty is None:
        empty = cluster.memo()["consolidate-free-map"] = _empty_map(cluster)
    return empty


def _max_capacity(cluster: Cluster) -> int:
    """GPUs of the cluster's largest GPU type: a job needing more never runs."""
    return max(_empty(cluster).capacity.values(), default=0)


def _reason(max_capacity: int, n: int, total_free: int) -> PendingReason:
    """``max_capacity``: the GPUs of the cluster's largest GPU type (a larger job never runs)."""
    if n > max_capacity:
        return PendingReason.UNSATISFIABLE
    if total_free >= n:
        return PendingReason.CONSOLIDATION
    return PendingReason.RESOURCES


def _why(max_capacity: int, n: int, total_free: int) -> tuple[PendingReason, str]:
    return _reason(max_capacity, n, total_free), f"needs {n} GPUs; {total_free} free"


class _PlanBuilder:
    """A plan built unit by unit from (node, first GPU, count) pieces: the Python walk's and the
    compiled walk's for units with policy pairs. A GPU is taken once per walk, so its slot is
    exactly the unit's jobs, and a unit's GPU references are slices of the layout's."""

    def __init__(self, cluster: Cluster) -> None:
        self.names, layout = _layout(cluster)
        self.gpu_refs, self.first_row = layout.refs, layout.offset.tolist()
        self.slots = [[_EMPTY] * n.num_gpus for n in cluster.nodes]
        self.refs_of: dict[str, tuple[tuple[str, int], ...]] = {}
        self.placed: list[str] = []
        self.pending: list[PendingJob] = []
        self.max_capacity = _max_capacity(cluster)
        self._why: dict[int, tuple[PendingReason, str]] = {}  # GPU count -> why, while ``_why_free`` GPUs are free
        self._why_free = -1

    def place(self, jobs: Sequence[Job], pieces: Sequence[tuple[int, int, int]]) -> None:
        ids = [j.id for j in jobs]
        held = frozenset(ids)
        refs: list[tuple[str, int]] = []
        for node_idx, start, count in pieces:
            self.slots[node_idx][start:start + count] = [held] * count
            row = self.first_row[node_idx] + start
            refs += self.gpu_refs[row:row + count]
        sorted_refs = tuple(refs) if len(pieces) == 1 else tuple(sorted(refs))
        for j in ids:
            self.refs_of[j] = sorted_refs
        self.placed.extend(ids)

    def wait(self, jobs: Sequence[Job], total_free: int) -> None:
        n = jobs[0].num_gpus
        if self._why_free != total_free:
            self._why, self._why_free = {}, total_free
        w = self._why.get(n)
        if w is None:
            w = self._why[n] = _why(self.max_capacity, n, total_free)
        self.pending.extend(_NEW_PENDING((j.id,) + w) for j in jobs)

    def not_reached(self, units: Sequence[Unit]) -> None:
        """The rest wait: one reason for all of them (no GPU is left)."""
        rest = map(_ID, chain.from_iterable(map(_JOBS, units)))
        self.pending.extend(map(_NEW_PENDING, zip(rest, repeat(PendingReason.PRIORITY), repeat(_NO_GPU_LEFT))))

    def result(self) -> ConsolidationResult:
        plan = Placement.built({name: tuple(gpus) for name, gpus in zip(self.names, self.slots)}, self.refs_of)
        return ConsolidationResult(plan, tuple(self.placed), tuple(self.pending))


def _compiled(cluster: Cluster, jit: bool | None) -> bool:
    """The compiled walk applies: numba (or a test's ``jit``) and one GPU type."""
    return (consolidate_jit.available() if jit is None else jit) and len(cluster.gpu_types) == 1


def place_units(cluster: Cluster, units: Sequence[Unit], *, _jit: bool | None = None) -> ConsolidationResult:
    """``_jit`` (tests only): None walks through ``consolidate_jit`` when numba is installed and every
    unit is plain (one GPU type, no home, no type preference); False never; True whenever plain."""
    if units and _compiled(cluster, _jit) and set(map(_HINTS, units)) <= {(-1, None), (-1, cluster.gpu_types)}:
        if max(map(len, map(_JOBS, units))) == 1:
            return _place_jobs_compiled(cluster, list(map(_FIRST, map(_JOBS, units))))
        return _place_units_compiled(cluster, units)
    free = _FreeMap(cluster)
    only = free.types[0] if len(free.types) == 1 else None
    plan = _PlanBuilder(cluster)
    choose, take = free.choose, free.take
    # one GPU type: a single-node job without a home needs only ``single`` (what ``choose`` would ask)
    single = free.single
    max_single = free.max_size[only] if only is not None else 0
    for k, unit in enumerate(units):
        if free.total_free == 0:
            plan.not_reached(units[k:])
            break
        jobs, home, types = unit
        n = jobs[0].num_gpus
        if n <= max_single and home < 0 and (types is None or types == (only,)):
            best = single(only, n)
            pieces = None if best is None else ((best, n),)
        else:
            pieces = choose(n, home, types)
        if pieces is None:
            plan.wait(jobs, free.total_free)
            continue
        plan.place(jobs, [(node_idx, take(node_idx, count), count) for node_idx, count in pieces])
    return plan.result()


def place_consolidated(cluster: Cluster, order: Sequence[Job], *, _jit: bool | None = None) -> ConsolidationResult:
    """Listing 1 without packing, one unit per job (the engine's case without policy pairs or hints)."""
    if order and _compiled(cluster, _jit):
        return _place_jobs_compiled(cluster, order)
    return place_units(cluster, [Unit((j,)) for j in order], _jit=_jit)


def _layout(cluster: Cluster) -> tuple[tuple[str, ...], GpuLayout]:
    """Node names and the GPU layout of the cluster (shared by every plan of its shape; read only)."""
    names, sizes = cluster.shape
    return names, gpu_layout(names, sizes)


def _place_units_compiled(cluster: Cluster, units: Sequence[Unit]) -> ConsolidationResult:
    """``place_units``' walk by ``consolidate_jit.walk`` for units with policy pairs; the plan is built
    from its pieces by the Python walk's builder, so the result is the same (tests compare)."""
    _, layout = _layout(cluster)
    need = np.fromiter(map(_NUM_GPUS, map(_FIRST, map(_JOBS, units))), np.int64, len(units))
    status, free_at, first, p_node, p_start, p_count = consolidate_jit.walk(layout.sizes, need)
    plan = _PlanBuilder(cluster)
    bounds = first.tolist()
    pieces = list(zip(p_node.tolist(), p_start.tolist(), p_count.tolist()))
    for k, (unit, st, total_free) in enumerate(zip(units, status.tolist(), free_at.tolist())):
        if st == consolidate_jit.NOT_REACHED:
            plan.not_reached(units[k:])
            break
        if st == consolidate_jit.WAITS:
            plan.wait(unit[0], total_free)
        else:
            plan.place(unit[0], pieces[bounds[k]:bounds[k + 1]])
    return plan.result()


def _place_jobs_compiled(cluster: Cluster, jobs: Sequence[Job]) -> ConsolidationResult:
    """``place_units``' result for one unit per job, by ``consolidate_jit.walk``, built per array
    instead of per unit: a job on one node holds a run of rows, so its GPU references are a slice
    of the layout's (tests compare with the Python walk and the reference)."""
    names, sizes = cluster.shape
    layout = gpu_layout(names, sizes)
    need = np.array([j.num_gpus for j in jobs], dtype=np.int64)
    status, free_at, first, p_node, p_start, p_count = consolidate_jit.walk(layout.sizes, need)
    ids = [j.id for j in jobs]
    placed_k = np.flatnonzero(status == consolidate_jit.PLACED)
    placed = tuple(map(ids.__getitem__, placed_k.tolist()))
    # GPU rows -> the placed job holding them (numbered in policy order)
    number = np.full(len(jobs), -1, dtype=np.int64)  # unit -> placed job number
    number[placed_k] = np.arange(len(placed_k))
    rows = layout.offset[p_node] + p_start
    table = np.full((len(layout.refs), 2), -1, dtype=np.int64)
    piece_unit = np.repeat(np.arange(len(jobs)), np.diff(first))
    table[np.repeat(rows, p_count) + runs(p_count), 0] = np.repeat(number[piece_unit], p_count)
    # waiting jobs in policy order: those that did not fit (one reason per GPU count and free GPUs),
    # then those the walk never reached
    wait_k = np.flatnonzero(status == consolidate_jit.WAITS)
    pending: list[PendingJob] = []
    if len(wait_k):
        keys = list(zip(need[wait_k].tolist(), free_at[wait_k].tolist()))
        cap = _max_capacity(cluster)
        why = {k: _why(cap, *k) for k in set(keys)}
        pending += map(_NEW_PENDING, map(add, zip(map(ids.__getitem__, wait_k.tolist())), map(why.__getitem__, keys)))
    stop = np.flatnonzero(status == consolidate_jit.NOT_REACHED)
    if len(stop):
        pending += map(_NEW_PENDING, zip(ids[int(stop[0]):], repeat(PendingReason.PRIORITY), repeat(_NO_GPU_LEFT)))
    return ConsolidationResult(Placement.from_rows(PlanRows(names, sizes, placed, table)), placed, tuple(pending))
