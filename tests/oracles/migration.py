"""Exact reference for migration minimization at real size: one mixed-integer program (HiGHS, through
scipy's ``milp``) over every relabeling that keeps nodes whole.

It shares neither the paper's nesting nor the engine's decomposition into savings: the GPU matching
inside every node pair and the node matching are decided together, by the solver, from the cost of
each (old GPU, new GPU) pair written out from the plans' job sets. So it checks the claim that the
nested matching is optimal, not only that it is computed as described.

Cost (paper, section "Minimizing Migrations", Algorithm 3): only jobs present in both plans count; a
new GPU ``v`` landing on physical GPU ``u`` costs, for each such job on exactly one of the two GPUs,
half a job amortized over its GPUs: ``1/(2*g)`` with ``g`` its GPU count in the plan it leaves (on
``u`` only) or enters (on ``v`` only). A new node lands whole on a physical node of the same size and
GPU type (consolidated jobs stay consolidated), its GPUs in any order.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import coo_matrix

from tesserae_slurm.model import Placement


def gpu_pair_cost(before: frozenset[str], after: frozenset[str], common: set[str],
                  old_count: Mapping[str, int], new_count: Mapping[str, int]) -> float:
    """The paper's cost of new job set ``after`` landing on a GPU that held ``before``."""
    out = sum(1.0 / (2 * old_count[j]) for j in (before - after) & common)
    return out + sum(1.0 / (2 * new_count[j]) for j in (after - before) & common)


def min_migration_cost(old: Placement, new: Placement, node_types: Mapping[str, str] | None = None) -> float:
    """The least cost of mapping ``new`` onto ``old`` with every new node whole on one old node."""
    types = node_types or {}
    old_gpus, new_gpus = old.job_gpus(), new.job_gpus()
    common = set(old_gpus) & set(new_gpus)
    old_count = {j: len(g) for j, g in old_gpus.items()}
    new_count = {j: len(g) for j, g in new_gpus.items()}
    o_names, n_names = list(old.nodes), list(new.nodes)

    def key(plan: Placement, name: str) -> tuple[int, str | None]:
        return len(plan.nodes[name]), types.get(name)

    # variables: x[k,l] (new node l lands on old node k), then per such pair y[k,l,u,v] (its new GPU
    # v on old GPU u); rows: one per old node and one per new node (each matched once), then per pair
    # one per GPU on either side (matched once within the pair when x[k,l] = 1, never otherwise)
    x_of = {(k, ell): 0 for k, on in enumerate(o_names) for ell, nn in enumerate(n_names)
            if key(old, on) == key(new, nn)}
    for i, pair in enumerate(x_of):
        x_of[pair] = i
    cost = [0.0] * len(x_of)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for (k, ell), x in x_of.items():
        rows += [k, len(o_names) + ell]
        cols += [x, x]
        vals += [1.0, 1.0]
    n_eq_nodes = row = len(o_names) + len(n_names)
    for (k, ell), x in x_of.items():
        og, ng = old.nodes[o_names[k]], new.nodes[n_names[ell]]
        g = len(og)
        first = len(cost)
        for u in range(g):
            for v in range(g):
                cost.append(gpu_pair_cost(og[u], ng[v], common, old_count, new_count))
        # every old GPU receives one new GPU of the pair, and every new GPU lands once, iff x[k,l]
        for u in range(g):
            rows += [row] * (g + 1)
            cols += [first + u * g + v for v in range(g)] + [x]
            vals += [1.0] * g + [-1.0]
            row += 1
        for v in range(g):
            rows += [row] * (g + 1)
            cols += [first + u * g + v for u in range(g)] + [x]
            vals += [1.0] * g + [-1.0]
            row += 1
    if not cost:
        return 0.0
    a = coo_matrix((vals, (rows, cols)), shape=(row, len(cost))).tocsr()
    lb = np.r_[np.ones(n_eq_nodes), np.zeros(row - n_eq_nodes)]
    res = milp(np.array(cost), constraints=LinearConstraint(a, lb, lb), integrality=np.ones(len(cost)),
               bounds=(0, 1), options={"mip_rel_gap": 0.0})
    if not res.success:
        raise AssertionError(f"the migration program has no solution: {res.message}")
    return float(res.fun)
