"""Straightforward implementations of the three placement stages, kept as references.

They follow the paper's text literally (Python loops, one dense assignment problem per stage) and are
slow on large clusters. Tests compare ``consolidate.py``, ``pack.py`` and ``migrate.py`` with these
on random states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from tesserae_slurm.model import Cluster, Job, PackedPair, PendingJob, PendingReason, Placement
from tesserae_slurm.profiles import ThroughputProfile
from tesserae_slurm.placement.consolidate import ConsolidationResult, Unit


# ---- Listing 1, lines 1-12 -------------------------------------------------------------------------
def place_units_reference(cluster: Cluster, units: Sequence[Unit],
                          allowed: Sequence[tuple[frozenset[int], str] | None] = ()) -> ConsolidationResult:
    """Scan every node for every job: fewest nodes, best fit, then node order; backfill. ``allowed``: per
    unit, the node indices it may use and the rule's text (None: any node)."""
    allowed = list(allowed) or [None] * len(units)
    free = [list(range(n.num_gpus)) for n in cluster.nodes]
    capacity: dict[str, int] = {}
    for n in cluster.nodes:
        capacity[n.gpu_type] = capacity.get(n.gpu_type, 0) + n.num_gpus
    slots: list[list[set[str]]] = [[set() for _ in range(n.num_gpus)] for n in cluster.nodes]
    placed: list[str] = []
    pending: list[PendingJob] = []
    for unit, rule in zip(units, allowed):
        n = unit.num_gpus
        total_free = sum(len(f) for f in free)
        if total_free == 0:
            pending.extend(PendingJob(j.id, PendingReason.PRIORITY, "no GPU left this round") for j in unit.jobs)
            continue
        pieces = None
        for gtype in unit.types or cluster.gpu_types:
            nodes = [i for i, node in enumerate(cluster.nodes) if node.gpu_type == gtype
                     and (rule is None or i in rule[0])]
            if unit.home in nodes and len(free[unit.home]) >= n:
                pieces = [(unit.home, n)]
                break
            pieces = _choose_in(cluster, free, nodes, n) if nodes else None
            if pieces is not None:
                break
        if pieces is None:
            if n > max(capacity.values(), default=0):
                reason = PendingReason.UNSATISFIABLE
            else:
                reason = PendingReason.CONSOLIDATION if total_free >= n else PendingReason.RESOURCES
            detail = f"needs {n} GPU{'' if n == 1 else 's'}; {total_free} free"
            if rule is not None:
                reason, detail = PendingReason.NODES, f"{rule[1]}; {detail} in the cluster"
            pending.extend(PendingJob(j.id, reason, detail) for j in unit.jobs)
            continue
        for node_idx, count in pieces:
            got, free[node_idx] = free[node_idx][:count], free[node_idx][count:]
            for gpu in got:
                slots[node_idx][gpu].update(j.id for j in unit.jobs)
        placed.extend(j.id for j in unit.jobs)
    plan = Placement({node.name: tuple(frozenset(s) for s in slots[i]) for i, node in enumerate(cluster.nodes)})
    return ConsolidationResult(plan, tuple(placed), tuple(pending))


def _choose_in(cluster: Cluster, free: list[list[int]], nodes: list[int], n: int) -> list[tuple[int, int]] | None:
    sizes = cluster.nodes
    fits = [i for i in nodes if len(free[i]) >= n]
    if fits:
        best = min(fits, key=lambda i: (len(free[i]), i))
        return [(best, n)]
    if n <= max((sizes[i].num_gpus for i in nodes), default=0):
        return None
    idle = sorted((i for i in nodes if len(free[i]) == sizes[i].num_gpus), key=lambda i: (-sizes[i].num_gpus, i))
    pieces: list[tuple[int, int]] = []
    remaining = n
    for i in idle:
        if remaining >= sizes[i].num_gpus:
            pieces.append((i, sizes[i].num_gpus))
            remaining -= sizes[i].num_gpus
    if remaining:
        used = {i for i, _ in pieces}
        rest = [i for i in nodes if i not in used and len(free[i]) >= remaining]
        if not rest:
            return None
        best = min(rest, key=lambda i: (len(free[i]), i))
        pieces.append((best, remaining))
    # nodes of different sizes: whole idle nodes may take more nodes than needed; then the fewest,
    # most free GPUs first
    most = sorted((i for i in nodes if free[i]), key=lambda i: (-len(free[i]), i))
    k, acc = 0, 0
    while acc < n:
        acc += len(free[most[k]])
        k += 1
    if k < len(pieces):
        left, pieces = n, []
        for i in most[:k]:
            pieces.append((i, min(len(free[i]), left)))
            left -= pieces[-1][1]
    return pieces


# ---- Algorithm 3 -----------------------------------------------------------------------------------
def pack_value_reference(placed: Sequence[Job], pending: Sequence[Job], profile: ThroughputProfile,
                         gpu_type_of: Mapping[str, str], *, mode: str = "on", objective: str = "throughput",
                         cross_user: str = "timeslice", below_one: bool = False,
                         ) -> tuple[float, tuple[PackedPair, ...]]:
    """One dense job x job matrix per GPU count, every edge looked up pair by pair (two users' jobs
    with the time-sliced speeds unless ``cross_user`` is "mps"; no pair summing below 1.0 unless
    ``below_one``); returns the optimal objective value and one optimal matching."""
    if mode == "off":
        return 0.0, ()
    hosts = [j for j in placed if not j.no_pack and (mode == "on" or j.num_gpus == 1)]
    guests = [j for j in pending if not j.no_pack and (mode == "on" or j.num_gpus == 1)]
    total, pairs = 0.0, []
    for n in sorted({j.num_gpus for j in hosts} & {j.num_gpus for j in guests}):
        rows = [j for j in hosts if j.num_gpus == n]
        cols = [j for j in guests if j.num_gpus == n]
        value = np.zeros((len(rows), len(cols)))
        options = {}
        for r, a in enumerate(rows):
            gpu = gpu_type_of[a.id]
            alone = profile.best_isolated(a, gpu)[0]
            for c, b in enumerate(cols):
                if a.group != b.group:  # Job.group: never packed across groups
                    continue
                sharing = "timeslice" if cross_user == "timeslice" and a.user != b.user else "mps"
                opt = profile.best_pair(a, b, gpu, sharing)
                if opt is None or opt.total - alone <= 1e-6 or (not below_one and opt.total < 1.0 - 1e-9):
                    continue
                value[r, c] = opt.total - alone if objective == "throughput" else opt.total
                options[(r, c)] = opt
        ri, ci = linear_sum_assignment(value, maximize=True)
        for r, c in zip(ri, ci):
            if value[r, c] > 0:
                total += value[r, c]
                o = options[(r, c)]
                pairs.append(PackedPair(rows[r].id, cols[c].id, o.a_speed, o.b_speed, o.a_strategy, o.b_strategy))
    return total, tuple(pairs)


# ---- Algorithms 2 and 3 (migration) ----------------------------------------------------------------
def migration_cost_reference(old: Placement, new: Placement, node_types: Mapping[str, str] | None = None) -> float:
    """Minimum cost by the paper's nesting, literally: a GPU-level Hungarian for every node pair,
    then one node-level Hungarian (incompatible node pairs get a prohibitive cost)."""
    old_gpus, new_gpus = old.job_gpus(), new.job_gpus()
    common = set(old_gpus) & set(new_gpus)
    types = node_types or {}
    o_names, n_names = list(old.nodes), list(new.nodes)
    big = 1e9
    node_cost = np.full((len(o_names), len(n_names)), big)
    for k, on in enumerate(o_names):
        for ell, nn in enumerate(n_names):
            og, ng = old.nodes[on], new.nodes[nn]
            if len(og) != len(ng) or types.get(on) != types.get(nn):
                continue
            c = np.zeros((len(og), len(ng)))
            for u, ju in enumerate(og):
                for v, jv in enumerate(ng):
                    for j in (ju ^ jv) & common:
                        c[u, v] += 1.0 / (2 * len(old_gpus[j] if j in ju else new_gpus[j]))
            r, cc = linear_sum_assignment(c)
            node_cost[k, ell] = c[r, cc].sum()
    r, c = linear_sum_assignment(node_cost)
    return float(node_cost[r, c].sum())
