"""Compiled consolidation walk (numba): the walk of ``consolidate.place_units``.

The walk visits every active job each round (hundreds on Philly, tens of thousands at scale); as
loops over integer arrays it is one call. Rules (paper Listing 1, lines 1-12): per unit, GPU types
in the unit's order; on each type, a unit's sticky home when it still fits there, else best fit for a
unit that fits in one node (the node of that type with the fewest free GPUs that still fit it,
lowest index first), else whole idle nodes (largest size first, lowest index first) and the rest
best fit on one more node; where nodes of different sizes make that more nodes than needed, the
fewest nodes instead (most free GPUs first). A GPU count that failed on a type fails again (GPUs
are only taken). A unit with a node rule (an operator's pin or keep-off) sees only its allowed nodes;
its failures say nothing about other units, so they are not remembered.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit

__all__ = ["walk", "PLACED", "WAITS", "NOT_REACHED"]

PLACED, WAITS, NOT_REACHED = 0, 1, 2


@_jit
def walk(sizes, node_type, need, home, type_start, type_list, rule, allowed):  # pragma: no cover - compiled
    """Walk units needing ``need[k]`` GPUs over nodes of ``sizes`` GPUs of type ``node_type``.

    Unit ``k`` tries the types ``type_list[type_start[k]:type_start[k + 1]]`` in order (-1: a type
    the cluster lacks) and its node ``home[k]`` first (-1: none). A unit with ``rule[k] >= 0`` is placed
    only on the nodes where ``allowed[rule[k]]`` is True.

    Returns ``status`` per unit (PLACED, WAITS: it did not fit, NOT_REACHED: no GPU was left),
    ``free_at`` (free GPUs when the unit was walked), and its pieces ``first[k]:first[k + 1]`` of
    ``node, start, count`` (GPUs ``start .. start + count - 1`` of the node), in taking order.
    """
    nn = sizes.shape[0]
    nu = need.shape[0]
    n_types = 0
    for i in range(nn):
        if node_type[i] + 1 > n_types:
            n_types = node_type[i] + 1
    free = sizes.copy()
    total = 0
    top = 0
    max_size = np.zeros(n_types, np.int64)
    for i in range(nn):
        total += sizes[i]
        if sizes[i] > max_size[node_type[i]]:
            max_size[node_type[i]] = sizes[i]
        if sizes[i] > top:
            top = sizes[i]
    count_at = np.zeros((n_types, top + 1), np.int64)  # nodes per (type, free count)
    for i in range(nn):
        count_at[node_type[i], sizes[i]] += 1
    idle_sizes = np.unique(sizes)[::-1]
    status = np.full(nu, NOT_REACHED, np.int64)
    free_at = np.zeros(nu, np.int64)
    first = np.zeros(nu + 1, np.int64)
    p_node = np.empty(total + 1, np.int64)
    p_start = np.empty(total + 1, np.int64)
    p_count = np.empty(total + 1, np.int64)
    excluded = np.zeros(nn, np.bool_)
    tmp_node = np.empty(nn, np.int64)
    tmp_count = np.empty(nn, np.int64)
    fails_from = max_size + 1  # per type: the smallest single-node count that found no node
    max_need = 0
    for k in range(nu):
        if need[k] > max_need:
            max_need = need[k]
    fails_multi = np.zeros((n_types, max_need + 1), np.bool_)
    np_ = 0
    for k in range(nu):
        first[k] = np_
        if total == 0:
            break
        n = need[k]
        c = rule[k]
        if c >= 0:  # the nodes it may not use are out of reach, as chosen nodes are below
            for i in range(nn):
                excluded[i] = not allowed[c, i]
        free_at[k] = total
        status[k] = WAITS
        m = 0  # pieces of this unit, nodes in tmp_node (counts: whole nodes, then the rest)
        rest = n
        for q in range(type_start[k], type_start[k + 1]):
            t = type_list[q]
            if t < 0:
                continue
            h = home[k]
            if h >= 0 and node_type[h] == t and n <= free[h] and not excluded[h]:
                tmp_node[0] = h
                tmp_count[0] = n
                m = 1
                break
            cap = max_size[t]
            if c >= 0:  # one node suffices among the nodes it may use
                cap = 0
                for i in range(nn):
                    if node_type[i] == t and not excluded[i] and sizes[i] > cap:
                        cap = sizes[i]
            if n <= cap:  # one node suffices: best fit; never spread such a unit
                if c >= 0 or n < fails_from[t]:
                    b = _best_fit(free, node_type, count_at[t], excluded, n, max_size[t], t)
                    if b >= 0:
                        tmp_node[0] = b
                        tmp_count[0] = n
                        m = 1
                        break
                    if c < 0:
                        fails_from[t] = n
                continue
            if c < 0 and fails_multi[t, n]:
                continue
            rest = n
            for s in idle_sizes:
                for i in range(nn):
                    if rest < s:
                        break
                    if node_type[i] == t and sizes[i] == s and free[i] == s and not excluded[i]:
                        excluded[i] = True
                        tmp_node[m] = i
                        tmp_count[m] = s
                        m += 1
                        rest -= s
            if rest:
                b = _best_fit(free, node_type, count_at[t], excluded, rest, max_size[t], t)
                if b < 0:
                    for q2 in range(m):
                        excluded[tmp_node[q2]] = False
                    m = 0
                    if c < 0:
                        fails_multi[t, n] = True
                    continue
                tmp_node[m] = b
                tmp_count[m] = rest
                m += 1
            for q2 in range(m):
                excluded[tmp_node[q2]] = False
            m = _fewest_nodes(free, node_type, excluded, t, n, m, top, tmp_node, tmp_count)
            break
        if c >= 0:
            excluded[:] = False
        if m == 0:
            first[k + 1] = np_
            continue
        for q in range(m):
            i = tmp_node[q]
            c = tmp_count[q]
            p_node[np_] = i
            p_start[np_] = sizes[i] - free[i]
            p_count[np_] = c
            np_ += 1
            count_at[node_type[i], free[i]] -= 1
            free[i] -= c
            count_at[node_type[i], free[i]] += 1
            total -= c
        status[k] = PLACED
        first[k + 1] = np_
    for k in range(nu):  # units after the walk stopped
        if status[k] == NOT_REACHED:
            first[k + 1] = np_
    return status, free_at, first, p_node[:np_], p_start[:np_], p_count[:np_]


@_jit
def _best_fit(free, node_type, count_at, excluded, n, max_size, t):  # pragma: no cover - compiled
    """The node of type ``t`` with the fewest free GPUs >= ``n``, lowest index first, not excluded;
    -1 if none (``count_at``: that type's nodes per free count)."""
    for f in range(n, max_size + 1):
        if count_at[f] == 0:
            continue
        for i in range(free.shape[0]):
            if free[i] == f and node_type[i] == t and not excluded[i]:
                return i
    return -1


@_jit
def _fewest_nodes(free, node_type, excluded, t, n, m, top, tmp_node, tmp_count):  # pragma: no cover - compiled
    """Pieces of ``n`` GPUs on the fewest nodes of type ``t`` not excluded, when the ``m`` pieces chosen are more:
    nodes by most free GPUs, lowest index first, each given all its free GPUs but the last. Returns
    the number of pieces (``tmp_node``/``tmp_count`` rewritten when fewer)."""
    nn = free.shape[0]
    key = np.empty(nn, np.int64)
    cnt = 0
    for i in range(nn):
        if node_type[i] == t and free[i] > 0 and not excluded[i]:
            key[cnt] = (top - free[i]) * nn + i
            cnt += 1
    order = np.sort(key[:cnt])
    acc = 0
    k = 0
    while acc < n:
        acc += free[order[k] % nn]
        k += 1
    if k >= m:
        return m
    left = n
    for q in range(k):
        i = order[q] % nn
        tmp_node[q] = i
        tmp_count[q] = min(free[i], left)
        left -= tmp_count[q]
    return k
