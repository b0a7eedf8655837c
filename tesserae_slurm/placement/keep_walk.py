"""Compiled keep-first walk (numba): the walk of ``consolidate.place_kept``, for decisions in which a
move must pay for itself.

The walk of ``consolidate_walk`` rebuilds the plan from nothing each round, so when the policy's order
changes, best fit groups jobs onto nodes differently and migration minimization can only relabel whole
nodes: jobs move although nothing new runs. This walk goes over the units in the same policy order
but on the physical GPU rows, and a running unit keeps exactly its rows (its *home*) while they are
free. Homes are reserved from the start: a unit walked earlier (a new job, or one that cannot stay)
takes the free rows no later unit holds (best fit on those, as ``consolidate_walk`` would), and only
when those do not fit it does it take reserved rows (the node where it displaces fewest GPUs, the
lowest-ranked holders first): the policy's priority then displaces a running unit, which moves or
waits when its turn comes. A *protected* unit (one that would finish before a move pays off) is
never displaced. Rules otherwise as ``consolidate_walk``: GPU types in the unit's order, whole idle
nodes for a unit larger than a node with the rest best fit on one more node (or the fewest nodes),
node rules as masks, the walk stops when no GPU is free.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit
from .consolidate_walk import NOT_REACHED, PLACED, WAITS

__all__ = ["keep_walk"]


@_jit
def keep_walk(sizes, node_type, need, home_start, home_row, protect, modest, value, cost, type_start, type_list,
              rule, allowed):  # pragma: no cover - compiled
    """Walk units needing ``need[k]`` GPUs over nodes of ``sizes`` GPUs of type ``node_type``.

    Unit ``k``'s home is the rows ``home_row[home_start[k]:home_start[k + 1]]`` (flat GPU rows, node by
    node; none: a unit that did not run); ``protect[k]``: its home is never displaced; ``modest[k]``: it
    never displaces a home (a packed partner that would leave its host to run alone: it has a place);
    ``value[k]``: what placing unit ``k`` is worth, ``cost[k]``: what displacing its home costs (the same
    units): a unit displaces homes only where what they cost is less than it is worth. Types and rules
    as in ``consolidate_walk.walk``.

    Returns ``status``, ``free_at`` and pieces ``first``/``p_node``/``p_start``/``p_count`` as
    ``consolidate_walk.walk`` does (GPUs ``start .. start + count - 1`` of the node), where a piece is a
    run of consecutive physical GPUs; ``free_at`` counts the GPUs free and no running unit's home (a
    unit that waits for GPUs running jobs hold waits for resources, not for consolidation);
    ``refused``: whether a displacement was refused for its cost (what moves cost decided the walk); and
    ``all_at``: the GPUs free at a unit's turn, homes of units not walked yet included (a unit that
    waits with that many would have run in a plan that moved those jobs).
    """
    nn = sizes.shape[0]
    nu = need.shape[0]
    offset = np.zeros(nn + 1, np.int64)
    for i in range(nn):
        offset[i + 1] = offset[i] + sizes[i]
    total = offset[nn]
    node_of = np.empty(total, np.int64)
    for i in range(nn):
        for r in range(offset[i], offset[i + 1]):
            node_of[r] = i
    row_free = np.ones(total, np.bool_)
    holder = np.full(total, -1, np.int64)  # the not yet walked unit whose home holds the row
    res = np.zeros(nn, np.int64)  # free rows reserved by unprotected homes, per node
    pres = np.zeros(nn, np.int64)  # ... by protected homes
    held = 0  # free rows reserved by any home
    refused = False  # a displacement was refused for its cost
    for k in range(nu):  # a row two units call home (a packed pair split up) is held by the first
        for q in range(home_start[k], home_start[k + 1]):
            r = home_row[q]
            if holder[r] >= 0:
                continue
            holder[r] = k
            if protect[k]:
                pres[node_of[r]] += 1
                held += 1
            else:
                res[node_of[r]] += 1
                held += 1
    free = sizes.copy()
    status = np.full(nu, NOT_REACHED, np.int64)
    free_at = np.zeros(nu, np.int64)
    all_at = np.zeros(nu, np.int64)
    first = np.zeros(nu + 1, np.int64)
    p_node = np.empty(total + 1, np.int64)
    p_start = np.empty(total + 1, np.int64)
    p_count = np.empty(total + 1, np.int64)
    excluded = np.zeros(nn, np.bool_)
    eff = np.zeros(nn, np.int64)
    disp = np.zeros(nn, np.int64)
    pick_node = np.empty(nn, np.int64)
    pick_count = np.empty(nn, np.int64)
    taken = np.empty(total + 1, np.int64)
    np_ = 0
    for k in range(nu):
        first[k] = np_
        for q in range(home_start[k], home_start[k + 1]):  # its own reservation ends with its turn
            r = home_row[q]
            if holder[r] == k:
                holder[r] = -1
                if row_free[r]:
                    if protect[k]:
                        pres[node_of[r]] -= 1
                        held -= 1
                    else:
                        res[node_of[r]] -= 1
                        held -= 1
        if total == 0:
            break
        n = need[k]
        c = rule[k]
        if c >= 0:
            for i in range(nn):
                excluded[i] = not allowed[c, i]
        free_at[k] = total - held  # what no running job's home holds
        all_at[k] = total
        status[k] = WAITS
        nt = 0  # rows taken, in ``taken``
        hs, he = home_start[k], home_start[k + 1]
        if he - hs == n:
            ok = True
            for q in range(hs, he):
                if not row_free[home_row[q]] or excluded[node_of[home_row[q]]]:
                    ok = False
                    break
            if ok:
                for q in range(hs, he):
                    taken[nt] = home_row[q]
                    nt += 1
        if nt == 0:
            m = 0
            for displace in range(1 if modest[k] else 2):
                for i in range(nn):  # what this pass may take on each node, and whom that displaces
                    e = free[i] - pres[i] - (0 if displace else res[i])
                    eff[i] = e if e > 0 else 0
                    disp[i] = 0
                    if displace and eff[i] > 0:
                        a = free[i] - pres[i] - res[i]
                        a = a if a > 0 else 0
                        d = (n if n < eff[i] else eff[i]) - a
                        if d > 0:
                            senior, spent = _displaced(i, d, offset, row_free, holder, protect, cost)
                            if spent >= value[k]:  # displacing them costs more than this unit is worth
                                eff[i] = a
                                refused = True
                            else:  # the most senior home it displaces as junior as can be, then fewest GPUs
                                disp[i] = (nu + 1 - senior) * (total + 1) + d
                for q in range(type_start[k], type_start[k + 1]):
                    t = type_list[q]
                    if t < 0:
                        continue
                    m = _pick(eff, disp, sizes, node_type, excluded, t, n, pick_node, pick_count)
                    if m:
                        break
                if m:
                    break
            for q in range(m):
                nt = _take(pick_node[q], pick_count[q], offset, row_free, holder, protect, taken, nt)
        if c >= 0:
            excluded[:] = False
        if nt == 0:
            first[k + 1] = np_
            continue
        for q in range(nt):  # take the rows; a displaced home's reservation goes with its row
            r = taken[q]
            row_free[r] = False
            free[node_of[r]] -= 1
            u = holder[r]
            if u >= 0:
                if protect[u]:
                    pres[node_of[r]] -= 1
                    held -= 1
                else:
                    res[node_of[r]] -= 1
                    held -= 1
        total -= nt
        rows = np.sort(taken[:nt])
        q = 0
        while q < nt:  # runs of consecutive GPUs of one node
            e = q + 1
            while e < nt and rows[e] == rows[e - 1] + 1 and node_of[rows[e]] == node_of[rows[q]]:
                e += 1
            i = node_of[rows[q]]
            p_node[np_] = i
            p_start[np_] = rows[q] - offset[i]
            p_count[np_] = e - q
            np_ += 1
            q = e
        status[k] = PLACED
        first[k + 1] = np_
    for k in range(nu):  # units after the walk stopped
        if status[k] == NOT_REACHED:
            first[k + 1] = np_
    return status, free_at, first, p_node[:np_], p_start[:np_], p_count[:np_], refused, all_at


@_jit
def _take(i, count, offset, row_free, holder, protect, taken, nt):  # pragma: no cover - compiled
    """``count`` free rows of node ``i`` into ``taken``: rows no home holds first, then held rows of
    the latest units in the walk (the policy's lowest-ranked) first. Returns the new count."""
    got = 0
    for r in range(offset[i], offset[i + 1]):
        if got == count:
            break
        if row_free[r] and holder[r] < 0:
            taken[nt] = r
            nt += 1
            got += 1
    while got < count:
        best = -1
        for r in range(offset[i], offset[i + 1]):
            if row_free[r] and holder[r] >= 0 and not protect[holder[r]] and (best < 0 or holder[r] > holder[best]):
                already = False
                for q in range(nt - got, nt):
                    if taken[q] == r:
                        already = True
                        break
                if not already:
                    best = r
        taken[nt] = best
        nt += 1
        got += 1
    return nt


@_jit
def _displaced(i, d, offset, row_free, holder, protect, cost):  # pragma: no cover - compiled
    """Of the ``d`` rows of node ``i`` that ``_take`` would take from homes (the latest holders' rows
    first): the earliest holder in the walk among them, and what displacing all their holders costs."""
    hs = np.empty(offset[i + 1] - offset[i], np.int64)
    m = 0
    for r in range(offset[i], offset[i + 1]):
        if row_free[r] and holder[r] >= 0 and not protect[holder[r]]:
            hs[m] = holder[r]
            m += 1
    hs = np.sort(hs[:m])[::-1][:min(d, m)]
    spent = 0.0
    for q in range(hs.shape[0]):
        if q == 0 or hs[q] != hs[q - 1]:
            spent += cost[hs[q]]
    return hs[hs.shape[0] - 1], spent


@_jit
def _pick(eff, disp, sizes, node_type, excluded, t, n, pick_node, pick_count):  # pragma: no cover - compiled
    """Nodes of type ``t`` for ``n`` GPUs when ``eff[i]`` GPUs of node ``i`` may be taken: one node when
    one fits (fewest displaced GPUs ``disp``, then best fit, lowest index first), else whole nodes
    (largest first, lowest index first) and the rest best fit on one more node, or the fewest nodes
    when that takes fewer. Returns the number of nodes (0: no fit)."""
    nn = eff.shape[0]
    cap = 0
    for i in range(nn):
        if node_type[i] == t and not excluded[i] and sizes[i] > cap:
            cap = sizes[i]
    if n <= cap:
        b = -1
        for i in range(nn):
            if node_type[i] != t or excluded[i] or eff[i] < n:
                continue
            if b < 0 or disp[i] < disp[b] or (disp[i] == disp[b] and eff[i] < eff[b]):
                b = i
        if b < 0:
            return 0
        pick_node[0] = b
        pick_count[0] = n
        return 1
    m = 0
    rest = n
    chosen = np.zeros(nn, np.bool_)
    sizes_desc = np.unique(sizes)[::-1]
    for s in sizes_desc:
        for i in range(nn):
            if rest < s:
                break
            if node_type[i] == t and sizes[i] == s and eff[i] == s and not excluded[i]:
                chosen[i] = True
                pick_node[m] = i
                pick_count[m] = s
                m += 1
                rest -= s
    if rest:
        b = -1
        for i in range(nn):
            if node_type[i] != t or excluded[i] or chosen[i] or eff[i] < rest:
                continue
            if b < 0 or eff[i] < eff[b]:
                b = i
        if b < 0:
            return 0
        pick_node[m] = b
        pick_count[m] = rest
        m += 1
    # the fewest nodes, most takeable GPUs first, when that is fewer
    order = np.argsort(-eff * (nn + 1) + np.arange(nn), kind="mergesort")
    acc = 0
    k = 0
    for q in range(nn):
        i = order[q]
        if node_type[i] != t or excluded[i] or eff[i] <= 0:
            continue
        acc += eff[i]
        k += 1
        if acc >= n:
            break
    if acc >= n and k < m:
        left = n
        m = 0
        for q in range(nn):
            i = order[q]
            if left == 0:
                break
            if node_type[i] != t or excluded[i] or eff[i] <= 0:
                continue
            pick_node[m] = i
            pick_count[m] = eff[i] if eff[i] < left else left
            left -= pick_count[m]
            m += 1
    return m
