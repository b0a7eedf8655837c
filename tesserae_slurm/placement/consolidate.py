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

A unit may carry a node rule (an operator's `tesserae pin` or `keep-off`): ``NodeRules`` gives each
unit a row of a small (rules x nodes) mask, and the walk sees only that row's nodes for the unit; a
unit that does not fit there waits with reason ``Nodes``.

The plan is *logical*: node names are real, but migration minimization relabels nodes and GPUs
afterwards, so only which jobs share a node and a GPU matters here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import chain, repeat
from operator import add, itemgetter
from typing import NamedTuple

import numpy as np

from ..model import Cluster, Job, PendingJob, PendingReason, Placement, PlanRows
from ..model.decision import gpus
from . import consolidate_walk, keep_walk
from .arrays import gpu_layout, runs
from .node_rules import NodeRules


@dataclass(frozen=True)
class ConsolidationResult:
    placement: Placement
    placed: tuple[str, ...]  # in policy order
    pending: tuple[PendingJob, ...]  # in policy order
    cost_bound: bool = False  # a keep-first walk refused a displacement for what the stop costs
    # of a keep-first walk, the waiting jobs that would have run in a plan that moved running jobs (enough
    # GPUs free at their turn, counting the homes of running jobs ranked lower), in policy order
    movable: tuple[str, ...] = ()


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


_NO_RULES = NodeRules(np.zeros(0, dtype=np.int64), np.zeros((1, 1), dtype=np.bool_), ())
_NEW_PENDING = partial(tuple.__new__, PendingJob)  # without the named tuple's argument handling
_NO_GPU_LEFT = "no GPU left this round"


def _reason(max_capacity: int, n: int, total_free: int) -> PendingReason:
    """``max_capacity``: the GPUs of the cluster's largest GPU type (a larger job never runs)."""
    if n > max_capacity:
        return PendingReason.UNSATISFIABLE
    if total_free >= n:
        return PendingReason.CONSOLIDATION
    return PendingReason.RESOURCES


def _why(max_capacity: int, n: int, total_free: int) -> tuple[PendingReason, str]:
    return _reason(max_capacity, n, total_free), f"needs {gpus(n)}; {total_free} free"


def place_consolidated(cluster: Cluster, order: Sequence[Job], rules: NodeRules | None = None) -> ConsolidationResult:
    """Listing 1 without packing, one unit per job (the engine's case without policy pairs or hints)."""
    count = len(order)
    need = np.fromiter([j.num_gpus for j in order], np.int64, count)
    return _walk(cluster, [j.id for j in order], need, None, np.full(count, -1), None, rules)


_HINTS = itemgetter(1, 2)  # a Unit's (home, types)


def place_units(cluster: Cluster, units: Sequence[Unit], rules: NodeRules | None = None) -> ConsolidationResult:
    """Walk ``units`` in order (``consolidate_walk.walk``) and build the plan as a table."""
    count = len(units)
    need = np.fromiter([u.jobs[0].num_gpus for u in units], np.int64, count)
    width = np.fromiter([len(u.jobs) for u in units], np.int64, count)
    ids = [j.id for u in units for j in u.jobs]
    if set(map(_HINTS, units)) <= {(-1, None), (-1, cluster.gpu_types)}:
        return _walk(cluster, ids, need, width, np.full(count, -1), None, rules)
    home = np.fromiter([u.home for u in units], np.int64, count)
    return _walk(cluster, ids, need, width, home, [u.types for u in units], rules)


class Homes(NamedTuple):
    """Per unit of a keep-first walk (``place_kept``): its home, the flat GPU rows of the cluster's layout
    it holds now (``rows[start[k]:start[k + 1]]``; none for a unit that holds no GPUs), whether it is
    protected from being displaced (``protect[k]``), whether it may displace others (``modest[k]``:
    not, a packed partner that would leave its host only to run alone), what placing it is worth
    (``value[k]``) and what displacing it costs (``cost[k]``; GPU-seconds of work, placement/move_value.py)."""

    start: np.ndarray
    rows: np.ndarray
    protect: np.ndarray
    modest: np.ndarray
    value: np.ndarray
    cost: np.ndarray


def place_kept(cluster: Cluster, ids: list[str], need: np.ndarray, width: np.ndarray | None,
               unit_types: Sequence[tuple[str, ...] | None] | None, homes: Homes, rules: NodeRules | None = None
               ) -> ConsolidationResult:
    """Listing 1 on the physical GPUs: running units keep their GPUs (``keep_walk``); the plan's rows
    are physical, so it needs no relabeling. Units as ``_walk`` takes them."""
    hinted = unit_types is not None and any(t is not None and t != cluster.gpu_types for t in unit_types)
    return _walk(cluster, ids, need, width, np.full(len(need), -1), unit_types if hinted else None, rules, kept=homes)


def _walk(cluster: Cluster, ids: list[str], need: np.ndarray, width: np.ndarray | None, home: np.ndarray,
          unit_types: Sequence[tuple[str, ...] | None] | None, rules: NodeRules | None,
          kept: Homes | None = None) -> ConsolidationResult:
    """The walk of units needing ``need`` GPUs, ``width`` jobs each (None: one each; their ids in
    ``ids``, in unit order), homes ``home``, GPU-type orders ``unit_types`` (None: the
    cluster's, for every unit) and node rules ``rules`` (None: no unit has one); with ``kept``,
    the keep-first walk on physical GPUs (``keep_walk``) instead."""
    if rules is None:
        rules = _NO_RULES._replace(rule=np.full(len(need), -1, dtype=np.int64))
    names, sizes = cluster.shape
    types = cluster.gpu_types
    type_index = {t: k for k, t in enumerate(types)}
    node_type, max_capacity = _types_of_nodes(tuple(cluster.node_types.values()), sizes)
    layout = gpu_layout(names, sizes)
    count = len(need)
    if unit_types is None:
        type_start = np.arange(count + 1, dtype=np.int64) * len(types)
        type_list = np.tile(np.arange(len(types), dtype=np.int64), count)
    else:
        every = tuple(range(len(types)))
        orders = [every if t is None or t == types else tuple(type_index.get(x, -1) for x in t) for t in unit_types]
        type_start = np.zeros(count + 1, dtype=np.int64)
        np.cumsum([len(o) for o in orders], out=type_start[1:])
        type_list = np.fromiter(chain.from_iterable(orders), np.int64, int(type_start[-1]))
    if kept is None:
        walked = consolidate_walk.walk(layout.sizes, node_type, need, home, type_start, type_list, rules.rule,
                                       rules.allowed)
    else:
        walked = keep_walk.keep_walk(layout.sizes, node_type, need, kept.start, kept.rows, kept.protect, kept.modest,
                                     kept.value, kept.cost, type_start, type_list, rules.rule, rules.allowed)
    return _assemble(cluster, ids, need, width, rules, walked, max_capacity)


def _assemble(cluster: Cluster, ids: list[str], need: np.ndarray, width: np.ndarray | None, rules: NodeRules,
              walked: tuple[np.ndarray, ...], max_capacity: int) -> ConsolidationResult:
    """The plan and the waiting reasons of a walk's outcome (``consolidate_walk.walk``'s returns)."""
    status, free_at, first, p_node, p_start, p_count = walked[:6]
    names, sizes = cluster.shape
    layout = gpu_layout(names, sizes)
    count = len(need)
    # jobs numbered in unit order; a unit's jobs share its GPUs (its second job in column 1)
    placed_k = np.flatnonzero(status == consolidate_walk.PLACED)
    wait_k = np.flatnonzero(status == consolidate_walk.WAITS)
    number = np.full(count, -1, dtype=np.int64)  # unit -> number of its first job among the placed
    if width is None:
        start = np.arange(count + 1, dtype=np.int64)
        placed_jobs, waiting = placed_k, wait_k
        number[placed_k] = np.arange(len(placed_k))
    else:
        start = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(width, out=start[1:])
        placed_jobs = np.repeat(start[placed_k], width[placed_k]) + runs(width[placed_k])
        waiting = np.repeat(start[wait_k], width[wait_k]) + runs(width[wait_k])
        number[placed_k] = np.cumsum(width[placed_k]) - width[placed_k]
    placed = tuple(map(ids.__getitem__, placed_jobs.tolist()))
    table = np.full((len(layout.refs), 2), -1, dtype=np.int64)
    piece_unit = np.repeat(np.arange(count), np.diff(first))
    rows = np.repeat(layout.offset[p_node] + p_start, p_count) + runs(p_count)
    holder = np.repeat(piece_unit, p_count)
    table[rows, 0] = number[holder]
    if width is not None:
        two = width[holder] > 1
        table[rows[two], 1] = number[holder[two]] + 1

    pending: list[PendingJob] = []
    if len(wait_k):  # one reason per (GPU count, free GPUs)
        job_unit = np.searchsorted(start, waiting, side="right") - 1
        keys = list(zip(need[job_unit].tolist(), free_at[job_unit].tolist()))
        why = {k: _why(max_capacity, *k) for k in set(keys)}
        pending += map(_NEW_PENDING, map(add, zip(map(ids.__getitem__, waiting.tolist())), map(why.__getitem__, keys)))
        if rules.text and (rules.rule[job_unit] >= 0).any():  # the operator's rule is what keeps it waiting
            pending = [p if (r := int(rules.rule[u])) < 0 else
                       p._replace(reason=PendingReason.NODES, detail=f"{rules.text[r]}; {p.detail} in the cluster")
                       for p, u in zip(pending, job_unit.tolist())]
    stop = np.flatnonzero(status == consolidate_walk.NOT_REACHED)
    if len(stop):
        pending += map(_NEW_PENDING, zip(ids[int(start[stop[0]]):], repeat(PendingReason.PRIORITY),
                                         repeat(_NO_GPU_LEFT)))
    movable: tuple[str, ...] = ()
    if len(walked) > 7 and len(wait_k):
        could = wait_k[walked[7][wait_k] >= need[wait_k]]
        movable = tuple(ids[int(start[k])] for k in could.tolist())
    return ConsolidationResult(Placement.from_rows(PlanRows(names, sizes, placed, table)), placed, tuple(pending),
                               len(walked) > 6 and bool(walked[6]), movable)


@lru_cache(maxsize=8)
def _types_of_nodes(node_types: tuple[str, ...], sizes: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Per node, its GPU type's number (types in name order, as ``Cluster.gpu_types``), and the GPUs
    of the largest type (a job needing more never runs); once per cluster shape, read only."""
    numbers = {t: k for k, t in enumerate(sorted(set(node_types)))}
    node_type = np.array([numbers[t] for t in node_types], dtype=np.int64)
    node_type.flags.writeable = False
    capacity = np.bincount(node_type, weights=sizes, minlength=len(numbers)) if sizes else np.zeros(0)
    return node_type, int(capacity.max(initial=0))
