"""Migration minimization (paper Algorithms 2 and 3, appendix Algorithm 4): map the next round's
logical plan onto the physical GPUs so that as few jobs as possible change GPUs.

Cost (paper): jobs present in only one of the two plans are dropped; mapping new GPU ``v`` onto
physical GPU ``u`` costs ``1/(2*num_gpus(j))`` for every job ``j`` in the symmetric difference of the
two GPUs' job sets (a move-out and a move-in each cost half a job, amortized over its GPUs).

``tesserae``: every new node goes whole onto one physical node of the same size and GPU type, so
multi-GPU jobs stay consolidated. For each (old node, new node) pair a GPU-level assignment gives the
pair's cost, and one node-level assignment picks the node bijection: the exact minimum over all
relabelings that keep nodes whole. Two facts make it cheap:

* a node pair that shares no job costs ``A_old + B_new`` (the total weight on each side) under *any*
  GPU matching, so only pairs that share a job are solved (a batch of tiny assignment problems);
* hence the node-level problem is "maximize the savings ``A + B - C``" over a sparse graph whose
  edges are the sharing pairs. Its connected components are solved independently (one dense
  assignment each); every other node pair saves nothing, so the rest are paired freely (same name
  first, so idle nodes stay put).

``flat`` (Algorithm 4) is the same matching with single GPUs in place of nodes (one group per GPU
type, the same code): cheaper, but it may split a consolidated job across nodes. ``gavel`` is
Gavel's rule: no relabeling, a job migrates when its GPUs change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from itertools import compress, permutations, repeat
from typing import Literal

import numpy as np

from ..model import InputError, Placement, PlanRows
from . import migrate_groups, migrate_tables
from .arrays import GpuLayout

MigrationAlgorithm = Literal["tesserae", "flat", "gavel"]
ALGORITHMS: tuple[str, ...] = ("tesserae", "flat", "gavel")
_PERMUTATION_LIMIT = 6  # nodes of up to 6 GPUs enumerate the g! GPU matchings; bigger ones solve one assignment


@dataclass(frozen=True)
class MigrationResult:
    placement: Placement  # the new plan on the physical node names and GPU indices of ``old``
    migrated: tuple[str, ...]  # jobs in both plans whose physical GPUs changed (sorted)
    cost: float  # the paper's cost of the chosen mapping
    node_map: Mapping[str, str] = field(default_factory=dict)  # new node -> physical node ({} for flat)


@dataclass(frozen=True)
class _Slots:
    """A plan as arrays: per node, per GPU, up to two job indices of the common jobs (-1 = none)."""

    names: tuple[str, ...]
    jobs: np.ndarray  # (total GPUs, 2) common-job indices, -1 padded
    weight: np.ndarray  # (total GPUs,) summed weight of the common jobs on each GPU
    layout: GpuLayout  # the plan's node shape (shared by every plan of the same cluster)

    @property
    def sizes(self) -> np.ndarray:  # GPUs per node
        return self.layout.sizes

    @property
    def offset(self) -> np.ndarray:  # index of each node's GPU 0 in the flat GPU arrays
        return self.layout.offset


def migrate(old: Placement, new: Placement, algorithm: MigrationAlgorithm = "tesserae",
            node_types: Mapping[str, str] | None = None) -> MigrationResult:
    """Map ``new`` (logical) onto ``old`` (physical); ``node_types`` keeps GPU types apart."""
    if algorithm not in ALGORITHMS:
        raise InputError(f"migration algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    types = node_types or {}
    ro, rn = old.rows(), new.rows()
    old_key = list(zip(ro.sizes, map(types.get, ro.names)))
    new_key = list(zip(rn.sizes, map(types.get, rn.names)))
    if old_key != new_key and Counter(old_key) != Counter(new_key):
        raise InputError(f"shape mismatch: the two plans must have the same node sizes (and GPU types); "
                         f"old {_shape_text(old_key)}, new {_shape_text(new_key)}")
    common = sorted(set(ro.ids).intersection(rn.ids))
    number = dict(zip(common, range(len(common))))
    o_jobs, n_old = _common_table(ro, number)
    n_jobs, n_new = _common_table(rn, number)
    w_old, w_new = 1.0 / (2 * n_old), 1.0 / (2 * n_new)
    o = _Slots(ro.names, o_jobs, _row_weight(o_jobs, w_old), ro.layout)
    n = _Slots(rn.names, n_jobs, _row_weight(n_jobs, w_new), rn.layout)

    node_map: dict[str, str] = {}
    if algorithm == "gavel":
        node_map = _identity_nodes(old, new)
        src = _identity_rows(o, n, node_map)
    elif algorithm == "tesserae":
        node_map, src = _tesserae(o, n, w_old, w_new, old_key, new_key)
    else:
        src = _flat(o, n, w_old, w_new, old_key, new_key)
    # src[r]: the new plan's GPU row that lands on physical GPU row r
    final = _by_first_gpu(PlanRows(ro.names, ro.sizes, rn.ids, rn.table[src]))
    cost, moved = migrate_tables.final_stats(o.jobs, n.jobs[src], w_old, w_new)
    return MigrationResult(final, tuple(compress(common, moved.tolist())), cost, node_map)


def _by_first_gpu(rows: PlanRows) -> Placement:
    """The plan of the table with its jobs renumbered by first GPU row (then by number: a packed
    pair's placed job before its partner): ``job_gpus()`` in physical order."""
    table, old_of, found = migrate_tables.renumber_by_first(rows.table, len(rows.ids))
    if found != len(rows.ids):  # a listed job without a GPU: not a plan the engine builds
        raise ValueError(f"table lists {len(rows.ids)} jobs but {found} hold a GPU")
    return Placement.from_rows(rows._replace(ids=tuple(map(rows.ids.__getitem__, old_of.tolist())), table=table))


def _common_table(rows: PlanRows, number: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """A table's (GPUs, 2) common-job numbers (``number``; -1: none or not common), a GPU's lower
    number in column 0, and each common job's GPU count."""
    common_of = np.fromiter(map(number.get, rows.ids, repeat(-1)), np.int64, len(rows.ids))
    table, counts = migrate_tables.common_table(rows.table, common_of, len(number))
    return table, counts


def _row_weight(jobs: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per GPU row, the summed weight of the common jobs on it (``_Slots.weight``)."""
    w = np.append(weight, 0.0)  # -1 -> the appended 0
    out: np.ndarray = w[jobs[:, 0]] + w[jobs[:, 1]]
    return out


def _place_rows(src: np.ndarray, o: _Slots, n: _Slots, x: np.ndarray, y: np.ndarray, perm: np.ndarray) -> None:
    """Fill the row map for node pairs of one size: old node ``x[i]`` receives new node ``y[i]``,
    its GPU ``u`` the new node's GPU ``perm[i, u]``."""
    g = perm.shape[1]
    src[o.offset[x][:, None] + np.arange(g)] = n.offset[y][:, None] + perm


def _identity_rows(o: _Slots, n: _Slots, node_map: Mapping[str, str]) -> np.ndarray:
    """Row map of a node bijection that keeps every GPU index (Gavel's rule)."""
    o_index = {name: i for i, name in enumerate(o.names)}
    n_index = {name: i for i, name in enumerate(n.names)}
    x = np.fromiter((o_index[on] for on in node_map.values()), np.int64, len(node_map))
    y = np.fromiter((n_index[nn] for nn in node_map), np.int64, len(node_map))
    src = np.empty(len(o.jobs), dtype=np.int64)
    sizes = o.sizes[x]
    for g in np.unique(sizes).tolist():
        same = sizes == g
        _place_rows(src, o, n, x[same], y[same], np.broadcast_to(np.arange(g), (int(same.sum()), g)))
    return src


def mapping_cost(old: Placement, final: Placement) -> float:
    """The paper's cost of moving from ``old`` to ``final`` (same node names), GPU by GPU."""
    old_gpus, new_gpus = old.job_gpus(), final.job_gpus()
    common = set(old_gpus) & set(new_gpus)
    total = 0.0
    for name, gpus in old.nodes.items():
        for u, before in enumerate(gpus):
            after = final.nodes[name][u]
            total += sum(1.0 / (2 * len(old_gpus[j])) for j in (before - after) & common)
            total += sum(1.0 / (2 * len(new_gpus[j])) for j in (after - before) & common)
    return total


def _groups(keys: Sequence[tuple[int, str | None]]) -> dict[tuple[int, str | None], list[int]]:
    """Node indices per (size, GPU type), in node order; read only (shared between calls)."""
    return _groups_of(tuple(keys))


@lru_cache(maxsize=16)
def _groups_of(keys: tuple[tuple[int, str | None], ...]) -> dict[tuple[int, str | None], list[int]]:
    """Built once per cluster shape: both plans of every round share the cluster's node keys."""
    out: dict[tuple[int, str | None], list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return out


# ---- algorithms ------------------------------------------------------------------------------------
def _identity_nodes(old: Placement, new: Placement) -> dict[str, str]:
    """Gavel's rule: no relabeling. Same names map to themselves; otherwise the i-th node to the i-th."""
    ro, rn = old.rows(), new.rows()  # the tables' node names and sizes: no per-GPU sets built
    if set(ro.names) == set(rn.names):
        mapping = {name: name for name in rn.names}
    else:
        mapping = dict(zip(rn.names, ro.names))
    size_old, size_new = dict(zip(ro.names, ro.sizes)), dict(zip(rn.names, rn.sizes))
    for nn, on in mapping.items():
        if size_new[nn] != size_old[on]:
            raise InputError(f"gavel: new node {nn!r} has {size_new[nn]} GPUs but physical node {on!r} has "
                             f"{size_old[on]}; without relabeling the i-th nodes must match")
    return mapping


def _node_groups(o: _Slots, n: _Slots, old_key: Sequence[tuple[int, str | None]],
                 new_key: Sequence[tuple[int, str | None]],
                 ) -> Iterator[tuple[list[int], list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per (size, GPU type) group: the group's old and new node indices (as lists and as arrays) and
    their GPU rows, (nodes, GPUs per node) each (the two plans have the same groups: ``migrate``
    checked the shapes)."""
    new_groups = _groups(new_key)
    for key, old_nodes in _groups(old_key).items():
        new_nodes, g = new_groups[key], key[0]
        oi, ni = np.array(old_nodes), np.array(new_nodes)
        rows_o, rows_n = o.offset[oi][:, None] + np.arange(g), n.offset[ni][:, None] + np.arange(g)
        yield old_nodes, new_nodes, oi, ni, rows_o, rows_n


def _land_group(node_map: dict[str, str], src: np.ndarray, o: _Slots, n: _Slots, x: np.ndarray, y: np.ndarray,
                perm: np.ndarray) -> None:
    """Record a group's node bijection (old node ``x[i]`` receives new node ``y[i]``, by index into
    the plans) in ``node_map``, and its GPU rows in ``src``."""
    node_map.update(zip(map(n.names.__getitem__, y.tolist()), map(o.names.__getitem__, x.tolist())))
    _place_rows(src, o, n, x, y, perm)


def _tesserae(o: _Slots, n: _Slots, w_old: np.ndarray, w_new: np.ndarray,
              old_key: Sequence[tuple[int, str | None]], new_key: Sequence[tuple[int, str | None]],
              ) -> tuple[dict[str, str], np.ndarray]:
    """Node bijection (new node -> physical node) and row map, group by group of equal nodes."""
    w_sum = w_old + w_new
    node_map: dict[str, str] = {}
    src = np.empty(len(o.jobs), dtype=np.int64)
    for old_nodes, new_nodes, oi, ni, rows_o, rows_n in _node_groups(o, n, old_key, new_key):
        same = old_nodes is new_nodes and o.names == n.names  # two tables over the cluster's nodes
        n_name = None if same else _name_positions(list(map(o.names.__getitem__, old_nodes)),
                                                    list(map(n.names.__getitem__, new_nodes)))
        x, y, perm = _match_group(o.jobs[rows_o], n.jobs[rows_n], o.weight[rows_o], n.weight[rows_n], w_sum, n_name)
        _land_group(node_map, src, o, n, oi[x], ni[y], perm)
    return node_map, src


def _match_group(o_jobs: np.ndarray, n_jobs: np.ndarray, o_w: np.ndarray, n_w: np.ndarray, w_sum: np.ndarray,
                 n_name: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The savings-maximizing bijection of one group of interchangeable items (nodes of one size and
    GPU type for ``tesserae``, single GPUs of one type for ``flat``): ``o_jobs``/``n_jobs`` (items, g,
    2) common-job numbers, ``o_w``/``n_w`` (items, g) weights; ``n_name``: per new item, the position
    of the old item of its name (-1: none; None: the same names in the same order). Returns old
    item ``x[i]`` receiving new item ``y[i]``, its GPU ``u`` the new item's GPU ``perm[i, u]``."""
    count, g = o_jobs.shape[0], o_jobs.shape[1]
    perms = _permutations(g) if g <= _PERMUTATION_LIMIT else np.zeros((0, g), dtype=np.int64)
    po, pn, pair_perm, pa, pb = migrate_groups.group_core(o_jobs, n_jobs, o_w, n_w, w_sum, perms, len(w_sum))
    positions = np.arange(count, dtype=np.int64)
    x, y, perm = migrate_groups.group_finish(pa, pb, po, pn, pair_perm, positions,
                                          positions if n_name is None else n_name, count)
    return x, y, perm


def _name_positions(old_names: Sequence[object], new_names: Sequence[object]) -> np.ndarray:
    """Per new item, the position of the old item of the same name (-1: none)."""
    at_name = {name: k for k, name in enumerate(old_names)}
    return np.fromiter(map(at_name.get, new_names, repeat(-1)), np.int64, len(new_names))


@cache
def _permutations(g: int) -> np.ndarray:
    return np.array(list(permutations(range(g))), dtype=np.int64)


def _flat(o: _Slots, n: _Slots, w_old: np.ndarray, w_new: np.ndarray,
          old_key: Sequence[tuple[int, str | None]], new_key: Sequence[tuple[int, str | None]],
          ) -> np.ndarray:
    """Appendix Algorithm 4: ``tesserae``'s group matching with single GPUs as the items, one group
    per GPU type."""
    w_sum = w_old + w_new
    o_type = np.repeat([k[1] or "" for k in old_key], o.sizes)
    n_type = np.repeat([k[1] or "" for k in new_key], n.sizes)
    same = o.names == n.names and old_key == new_key  # two tables over the cluster's nodes
    o_ref = [] if same else [(name, u) for name, size in zip(o.names, o.sizes) for u in range(int(size))]
    n_ref = [] if same else [(name, v) for name, size in zip(n.names, n.sizes) for v in range(int(size))]
    src = np.empty(len(o.jobs), dtype=np.int64)
    for t in dict.fromkeys(o_type.tolist()):
        oi, ni = np.flatnonzero(o_type == t), np.flatnonzero(n_type == t)
        n_name = None if same else _name_positions([o_ref[i] for i in oi.tolist()], [n_ref[i] for i in ni.tolist()])
        x, y, _ = _match_group(o.jobs[oi][:, None, :], n.jobs[ni][:, None, :], o.weight[oi][:, None],
                               n.weight[ni][:, None], w_sum, n_name)
        src[oi[x]] = ni[y]
    return src


def _shape_text(keys: Sequence[tuple[int, str | None]]) -> str:
    counts: dict[str, int] = {}
    for size, t in keys:
        label = f"{size}" + (f":{t}" if t else "")
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{c}x{label}" for label, c in sorted(counts.items())) or "no nodes"
