"""Compiled passes of ``migrate`` over plan tables (numba): the common jobs of a table, the cost
and the moved jobs of a final table, and a table's jobs renumbered in GPU order. Each is one pass
over a round's GPU rows, which the simulator's big traces make thousands of times."""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit


@_jit
def final_stats(before, after, w_old, w_new):  # pragma: no cover - compiled
    """Cost of the chosen mapping (``migrate.mapping_cost``, over tables) and which common jobs changed GPUs.

    ``before``/``after``: (GPUs, 2) common-job indices on each physical GPU in the old and the final
    plan. A job kept its GPUs when every GPU that held it before holds it after, and no other does."""
    n = w_old.shape[0]
    was = np.zeros(n, np.int64)
    now = np.zeros(n, np.int64)
    both = np.zeros(n, np.int64)
    cost = 0.0
    for r in range(before.shape[0]):
        for s in range(2):
            j = before[r, s]
            if j >= 0:
                was[j] += 1
                if after[r, 0] == j or after[r, 1] == j:
                    both[j] += 1
                else:
                    cost += w_old[j]
            k = after[r, s]
            if k >= 0:
                now[k] += 1
                if before[r, 0] != k and before[r, 1] != k:
                    cost += w_new[k]
    moved = np.zeros(n, np.bool_)
    for j in range(n):
        moved[j] = was[j] != both[j] or now[j] != both[j]
    return cost, moved


@_jit
def common_table(table, common_of, n_common):  # pragma: no cover - compiled
    """``migrate._common_table`` over a plan's job table: per GPU row the common-job numbers
    (``common_of[job]``, -1: not common), the lower in column 0, and each common job's GPU count."""
    out = np.full(table.shape, -1, np.int64)
    counts = np.zeros(n_common, np.int64)
    for r in range(table.shape[0]):
        a, b = table[r, 0], table[r, 1]
        ca = common_of[a] if a >= 0 else -1
        cb = common_of[b] if b >= 0 else -1
        if ca > cb:
            ca, cb = cb, ca
        if ca < 0:
            ca, cb = cb, -1
        out[r, 0], out[r, 1] = ca, cb
        if ca >= 0:
            counts[ca] += 1
        if cb >= 0:
            counts[cb] += 1
    return out, counts


@_jit
def renumber_by_first(table, n):  # pragma: no cover - compiled
    """Jobs renumbered by (first GPU row, old number), in one pass over the rows: the new table and
    the old number of each new one. ``found`` < ``n`` when a listed job holds no GPU (the caller
    then does not use the result)."""
    new_of = np.full(n, -1, np.int64)
    found = 0
    for r in range(table.shape[0]):
        a, b = table[r, 0], table[r, 1]
        if a > b:
            a, b = b, a
        for j in (a, b):
            if j >= 0 and new_of[j] < 0:
                new_of[j] = found
                found += 1
    out = np.full(table.shape, -1, np.int64)
    for r in range(table.shape[0]):
        for c in range(2):
            j = table[r, c]
            if j >= 0:
                out[r, c] = new_of[j]
    old_of = np.zeros(n, np.int64)
    for j in range(n):
        if new_of[j] >= 0:
            old_of[new_of[j]] = j
    return out, old_of, found
