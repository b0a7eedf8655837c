"""Compiled consolidation walk (numba) for the common case: one GPU type, no sticky homes.

Why: the walk visits every active job each round (hundreds on Philly, tens of thousands at scale)
and each visit is a few heap operations in Python. The same rules as ``consolidate._FreeMap`` as
loops over integer arrays, in one call: best fit is the node with the fewest free GPUs that still
fit, lowest index first (what the heaps return); a job larger than any node takes whole idle nodes,
largest size first and lowest index first, and the rest best fit on another node; a GPU count that
failed fails again (GPUs are only taken). Integers only, so the result is exactly the Python walk's;
tests compare the two. Python still builds the plan from the pieces (names, slots, reasons).
"""

from __future__ import annotations

import numpy as np

from .migrate_jit import _jit, available

__all__ = ["available", "walk"]

PLACED, WAITS, NOT_REACHED = 0, 1, 2


@_jit
def walk(sizes, need):  # pragma: no cover - compiled
    """Walk units needing ``need[k]`` GPUs over nodes of ``sizes`` GPUs.

    Returns ``status`` per unit (PLACED, WAITS: it did not fit, NOT_REACHED: no GPU was left),
    ``free_at`` (free GPUs when the unit was walked), and its pieces ``first[k]:first[k + 1]`` of
    ``node, start, count`` (GPUs ``start .. start + count - 1`` of the node), in taking order.
    """
    nn = sizes.shape[0]
    nu = need.shape[0]
    free = sizes.copy()
    total = 0
    max_size = 0
    for i in range(nn):
        total += sizes[i]
        if sizes[i] > max_size:
            max_size = sizes[i]
    count_at = np.zeros(max_size + 1, np.int64)  # nodes per free count
    for i in range(nn):
        count_at[sizes[i]] += 1
    idle_sizes = np.unique(sizes)[::-1]
    status = np.full(nu, 2, np.int64)
    free_at = np.zeros(nu, np.int64)
    first = np.zeros(nu + 1, np.int64)
    p_node = np.empty(total + 1, np.int64)
    p_start = np.empty(total + 1, np.int64)
    p_count = np.empty(total + 1, np.int64)
    excluded = np.zeros(nn, np.bool_)
    tmp_node = np.empty(nn, np.int64)
    fails_from = max_size + 1
    max_need = 0
    for k in range(nu):
        if need[k] > max_need:
            max_need = need[k]
    fails_multi = np.zeros(max_need + 1, np.bool_)
    np_ = 0
    for k in range(nu):
        first[k] = np_
        if total == 0:
            break
        n = need[k]
        free_at[k] = total
        m = 0  # pieces of this unit, nodes in tmp_node (counts: whole nodes, then the rest)
        rest = n
        if n <= max_size:
            b = -1
            if n < fails_from:
                b = _best_fit(free, count_at, excluded, n, max_size)
                if b < 0:
                    fails_from = n
            if b < 0:
                status[k] = 1
                first[k + 1] = np_
                continue
            tmp_node[0] = b
            m = 1
        else:
            if fails_multi[n]:
                status[k] = 1
                first[k + 1] = np_
                continue
            for s in idle_sizes:
                for i in range(nn):
                    if rest < s:
                        break
                    if sizes[i] == s and free[i] == s:
                        excluded[i] = True
                        tmp_node[m] = i
                        m += 1
                        rest -= s
            if rest:
                b = _best_fit(free, count_at, excluded, rest, max_size)
                if b < 0:
                    for q in range(m):
                        excluded[tmp_node[q]] = False
                    fails_multi[n] = True
                    status[k] = 1
                    first[k + 1] = np_
                    continue
                tmp_node[m] = b
                m += 1
            for q in range(m):
                excluded[tmp_node[q]] = False
        for q in range(m):
            i = tmp_node[q]
            c = n if m == 1 else (sizes[i] if q < m - 1 or rest == 0 else rest)
            p_node[np_] = i
            p_start[np_] = sizes[i] - free[i]
            p_count[np_] = c
            np_ += 1
            count_at[free[i]] -= 1
            free[i] -= c
            count_at[free[i]] += 1
            total -= c
        status[k] = 0
        first[k + 1] = np_
    for k in range(nu):  # units after the walk stopped
        if status[k] == 2:
            first[k + 1] = np_
    return status, free_at, first, p_node[:np_], p_start[:np_], p_count[:np_]


@_jit
def _best_fit(free, count_at, excluded, n, max_size):  # pragma: no cover - compiled
    """The node with the fewest free GPUs >= ``n``, lowest index first, not excluded; -1 if none."""
    for f in range(n, max_size + 1):
        if count_at[f] == 0:
            continue
        for i in range(free.shape[0]):
            if free[i] == f and not excluded[i]:
                return i
    return -1
