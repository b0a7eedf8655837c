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

``flat`` (Algorithm 4) is the same savings matching over single GPUs: cheaper, but it may split a
consolidated job across nodes. ``gavel`` is Gavel's rule: no relabeling, a job migrates when its
GPUs change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from itertools import compress, permutations, repeat
from typing import Literal

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..model import InputError, Placement, PlanRows
from . import migrate_jit
from .arrays import GpuLayout, runs, unique_ints

MigrationAlgorithm = Literal["tesserae", "flat", "gavel"]
ALGORITHMS: tuple[str, ...] = ("tesserae", "flat", "gavel")
_PERMUTATION_LIMIT = 6  # nodes of up to 6 GPUs enumerate the g! GPU matchings; bigger ones solve one assignment
_EPS = 1e-12


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
    cost, moved = migrate_jit.final_stats(o.jobs, n.jobs[src], w_old, w_new)
    return MigrationResult(final, tuple(compress(common, moved.tolist())), cost, node_map)


def _by_first_gpu(rows: PlanRows) -> Placement:
    """The plan of the table with its jobs renumbered by first GPU row (then by number: a packed
    pair's placed job before its partner): ``job_gpus()`` in physical order."""
    table, old_of, found = migrate_jit.renumber_by_first(rows.table, len(rows.ids))
    if found != len(rows.ids):  # a listed job without a GPU: not a plan the engine builds
        raise ValueError(f"table lists {len(rows.ids)} jobs but {found} hold a GPU")
    return Placement.from_rows(rows._replace(ids=tuple(map(rows.ids.__getitem__, old_of.tolist())), table=table))


def _common_table(rows: PlanRows, number: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """A table's (GPUs, 2) common-job numbers (``number``; -1: none or not common), a GPU's lower
    number in column 0, and each common job's GPU count."""
    common_of = np.fromiter(map(number.get, rows.ids, repeat(-1)), np.int64, len(rows.ids))
    table, counts = migrate_jit.common_table(rows.table, common_of, len(number))
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


# ---- array form ------------------------------------------------------------------------------------
def _common_savings(a_jobs: np.ndarray, b_jobs: np.ndarray, w_sum: np.ndarray) -> np.ndarray:
    """Savings of putting GPU b onto GPU a: total (old + new) weight of the jobs both hold.

    ``a_jobs``/``b_jobs`` broadcast against each other with a trailing axis of 2 slots.
    """
    eq = (a_jobs[..., :, None] == b_jobs[..., None, :]) & (a_jobs[..., :, None] >= 0)
    w = np.append(w_sum, 0.0)[a_jobs]  # -1 -> the appended 0
    out: np.ndarray = (eq * w[..., :, None]).sum(axis=(-1, -2))
    return out


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


def _max_savings_matching(edges_a: np.ndarray, edges_b: np.ndarray, savings: np.ndarray,
                          a_names: Sequence[str], b_names: Sequence[str]) -> list[tuple[int, int]]:
    """A perfect matching of ``len(a_names)`` a-items onto as many b-items maximizing total savings.

    Only the given edges save anything (savings > 0); components of the edge graph are solved
    exactly with one assignment each, the remaining items are paired by equal name, then in order.
    """
    na, nb = len(a_names), len(b_names)
    pairs: list[tuple[int, int]] = []
    if len(edges_a):
        comp = _component_of_edges(edges_a, edges_b, na, nb)
        order = np.argsort(comp, kind="stable")
        bounds = np.flatnonzero(np.r_[True, comp[order][1:] != comp[order][:-1], True])
        sizes = np.diff(bounds)
        single = order[bounds[:-1][sizes == 1]]  # a component of one edge: that edge is its matching
        pairs += list(zip(edges_a[single].tolist(), edges_b[single].tolist()))
        # edges in component order, as lists: a component's edges are a slice of each
        ea_l, eb_l, sv_l = edges_a[order].tolist(), edges_b[order].tolist(), savings[order].tolist()
        for s, e in zip(bounds[:-1][sizes > 1].tolist(), bounds[1:][sizes > 1].tolist()):
            pairs += _dense_component(ea_l[s:e], eb_l[s:e], sv_l[s:e])
    used_a = {a for a, _ in pairs}
    used_b = {b for _, b in pairs}
    free_a = [i for i in range(na) if i not in used_a]
    free_b = [j for j in range(nb) if j not in used_b]
    by_name = {b_names[j]: j for j in free_b}
    rest_a = []
    for i in free_a:
        j = by_name.pop(a_names[i], None)
        if j is None:
            rest_a.append(i)
        else:
            pairs.append((i, j))
    rest_b = [j for j in free_b if b_names[j] in by_name]
    pairs += list(zip(rest_a, rest_b))
    return pairs


def _dense_component(ea: list[int], eb: list[int], sv: list[float]) -> list[tuple[int, int]]:
    """The saving-maximizing matching of one component (its edges), by one dense assignment."""
    ra, rb = sorted(set(ea)), sorted(set(eb))  # a few edges: index them with lists, not np.unique
    at_a, at_b = {v: i for i, v in enumerate(ra)}, {v: i for i, v in enumerate(rb)}
    dense = np.zeros((len(ra), len(rb)))
    dense[[at_a[v] for v in ea], [at_b[v] for v in eb]] = sv
    r, c = linear_sum_assignment(dense, maximize=True)
    keep = dense[r, c] > _EPS
    return [(ra[i], rb[j]) for i, j in zip(r[keep].tolist(), c[keep].tolist())]


def _component_of_edges(edges_a: np.ndarray, edges_b: np.ndarray, na: int, nb: int) -> np.ndarray:
    """Per edge, the smallest a-item of its connected component: components numbered in the order
    scipy's ``connected_components`` numbers them (by smallest vertex, a-items first), without
    building a sparse graph (cheaper at a few hundred edges). Min-label sweeps with pointer jumping:
    multi-node jobs chain nodes into paths (a median of 10 plain sweeps on the Philly rounds, up to
    50), and jumping to a label's own label shortens a path's propagation to a few sweeps."""
    label_a = np.arange(na)
    while True:
        label_b = np.full(nb, na)
        np.minimum.at(label_b, edges_b, label_a[edges_a])
        nxt = label_a.copy()
        np.minimum.at(nxt, edges_a, label_b[edges_b])
        nxt = nxt[nxt]  # a label's label is in the same component and no larger (labels only fall)
        if (nxt == label_a).all():  # then a plain sweep changes nothing either: labels are the minima
            out: np.ndarray = label_a[edges_a]
            return out
        label_a = nxt


# ---- algorithms ------------------------------------------------------------------------------------
def _identity_nodes(old: Placement, new: Placement) -> dict[str, str]:
    """Gavel's rule: no relabeling. Same names map to themselves; otherwise the i-th node to the i-th."""
    if set(old.nodes) == set(new.nodes):
        mapping = {name: name for name in new.nodes}
    else:
        mapping = dict(zip(new.nodes, old.nodes))
    for nn, on in mapping.items():
        if len(new.nodes[nn]) != len(old.nodes[on]):
            raise InputError(f"gavel: new node {nn!r} has {len(new.nodes[nn])} GPUs but physical node {on!r} has "
                             f"{len(old.nodes[on])}; without relabeling the i-th nodes must match")
    return mapping


def _node_groups(o: _Slots, n: _Slots, old_key: Sequence[tuple[int, str | None]],
                 new_key: Sequence[tuple[int, str | None]],
                 ) -> Iterator[tuple[int, list[int], list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per (size, GPU type) group: GPUs per node, the group's old and new node indices (as lists and
    as arrays) and their GPU rows, (nodes, g) each (the two plans have the same groups: ``migrate``
    checked the shapes)."""
    new_groups = _groups(new_key)
    for key, old_nodes in _groups(old_key).items():
        new_nodes, g = new_groups[key], key[0]
        oi, ni = np.array(old_nodes), np.array(new_nodes)
        rows_o, rows_n = o.offset[oi][:, None] + np.arange(g), n.offset[ni][:, None] + np.arange(g)
        yield g, old_nodes, new_nodes, oi, ni, rows_o, rows_n


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
    for g, old_nodes, new_nodes, oi, ni, rows_o, rows_n in _node_groups(o, n, old_key, new_key):
        perms = _permutations(g) if g <= _PERMUTATION_LIMIT else np.zeros((0, g), dtype=np.int64)
        po, pn, pair_perm, pa, pb = migrate_jit.group_core(
            o.jobs[rows_o], n.jobs[rows_n], o.weight[rows_o], n.weight[rows_n], w_sum, perms, len(w_sum))
        if old_nodes is new_nodes and o.names == n.names:  # two tables over the cluster's nodes: names agree
            n_name = np.arange(len(new_nodes), dtype=np.int64)
        else:  # the group position of the old node of each new node's name (-1: none)
            at_name = {o.names[i]: k for k, i in enumerate(old_nodes)}
            n_name = np.fromiter(map(at_name.get, map(n.names.__getitem__, new_nodes), repeat(-1)), np.int64,
                                 len(new_nodes))
        x, y, perm = migrate_jit.group_finish(pa, pb, po, pn, pair_perm,
                                              np.arange(len(old_nodes), dtype=np.int64), n_name, len(old_nodes))
        _land_group(node_map, src, o, n, oi[x], ni[y], perm)
    return node_map, src


def _sharing_pairs(o_jobs: np.ndarray, n_jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(old node, new node) index pairs of one group that hold at least one common job."""
    def node_job(jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        count = jobs.shape[0]
        nodes = np.broadcast_to(np.arange(count)[:, None, None], jobs.shape).ravel()
        flat = jobs.ravel()
        keys = unique_ints(flat[flat >= 0] * count + nodes[flat >= 0])  # sorted by job, then node
        return keys // count, keys % count

    (oj, on), (nj, nn) = node_job(o_jobs), node_job(n_jobs)
    if not len(oj) or not len(nj):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # join on job: every old node of a job x every new node of it (jobs span only a few nodes)
    lo = np.searchsorted(nj, oj, side="left")
    hi = np.searchsorted(nj, oj, side="right")
    counts = hi - lo
    rep = np.repeat(np.arange(len(oj)), counts)
    width = n_jobs.shape[0]
    keys = unique_ints(on[rep] * width + nn[np.repeat(lo, counts) + runs(counts)])
    return keys // width, keys % width


@cache
def _permutations(g: int) -> np.ndarray:
    return np.array(list(permutations(range(g))), dtype=np.int64)


def _flat(o: _Slots, n: _Slots, w_old: np.ndarray, w_new: np.ndarray,
          old_key: Sequence[tuple[int, str | None]], new_key: Sequence[tuple[int, str | None]],
          ) -> np.ndarray:
    """Appendix Algorithm 4: one GPU-level matching over the whole cluster (per GPU type)."""
    w_sum = w_old + w_new
    o_ref = [(name, u) for name, size in zip(o.names, o.sizes) for u in range(int(size))]
    n_ref = [(name, v) for name, size in zip(n.names, n.sizes) for v in range(int(size))]
    o_type = np.repeat([k[1] or "" for k in old_key], o.sizes)
    n_type = np.repeat([k[1] or "" for k in new_key], n.sizes)
    src = np.empty(len(o.jobs), dtype=np.int64)
    for t in dict.fromkeys(o_type.tolist()):
        oi, ni = np.flatnonzero(o_type == t), np.flatnonzero(n_type == t)
        po, pn = _sharing_pairs(o.jobs[oi][:, None, :], n.jobs[ni][:, None, :])
        savings = _common_savings(o.jobs[oi][po], n.jobs[ni][pn], w_sum) if len(po) else np.zeros(0)
        pairs = _max_savings_matching(po, pn, savings, [f"{o_ref[i][0]}:{o_ref[i][1]}" for i in oi],
                                      [f"{n_ref[i][0]}:{n_ref[i][1]}" for i in ni])
        for x, y in pairs:
            src[oi[x]] = ni[y]
    return src


def _shape_text(keys: Sequence[tuple[int, str | None]]) -> str:
    counts: dict[str, int] = {}
    for size, t in keys:
        label = f"{size}" + (f":{t}" if t else "")
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{c}x{label}" for label, c in sorted(counts.items())) or "no nodes"
