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
    ``all_at``: the GPUs free at a unit's turn, homes of units not walked yet included, on the nodes its
    rule lets it use (a unit that waits with that many would have run in a plan that moved those jobs).
    """
    nn = sizes.shape[0]
    nu = need.shape[0]
    offset = np.zeros(nn + 1, np.int64)
    n_types = 0
    top = 0
    for i in range(nn):
        offset[i + 1] = offset[i] + sizes[i]
        if node_type[i] + 1 > n_types:
            n_types = node_type[i] + 1
        if sizes[i] > top:
            top = sizes[i]
    total = offset[nn]
    max_size = np.zeros(n_types, np.int64)
    for i in range(nn):
        if sizes[i] > max_size[node_type[i]]:
            max_size[node_type[i]] = sizes[i]
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
            else:
                res[node_of[r]] += 1
            held += 1
    free = sizes.copy()
    # per node, what a unit may take without displacing (avail) and displacing unprotected homes (eff1),
    # and per type the nodes at each such count: a unit that cannot fit anywhere is told in a few steps
    avail = np.empty(nn, np.int64)
    eff1 = np.empty(nn, np.int64)
    cnt0 = np.zeros((n_types, top + 1), np.int64)
    cnt1 = np.zeros((n_types, top + 1), np.int64)
    for i in range(nn):
        avail[i] = free[i] - res[i] - pres[i]
        eff1[i] = free[i] - pres[i]
        cnt0[node_type[i], avail[i]] += 1
        cnt1[node_type[i], eff1[i]] += 1
    # failures remembered until capacity grows (a home released, a home displaced): per (type, GPUs)
    epoch = 0
    max_need = 0
    for k in range(nu):
        if need[k] > max_need:
            max_need = need[k]
    fail0 = np.full((n_types, max_need + 1), -1, np.int64)
    fail1 = np.full((n_types, max_need + 1), -1, np.int64)
    fail1v = np.zeros((n_types, max_need + 1))
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
    hs_buf = np.empty(top + 1, np.int64)
    chosen = np.zeros(nn, np.bool_)
    sizes_desc = np.unique(sizes)[::-1].copy()
    np_ = 0
    for k in range(nu):
        first[k] = np_
        if total == 0:
            break
        n = need[k]
        c = rule[k]
        if c >= 0:
            for i in range(nn):
                excluded[i] = not allowed[c, i]
        nt = 0  # rows taken, in ``taken``
        hs, he = home_start[k], home_start[k + 1]
        if he - hs == n:  # its home, when every row is still free (its own reservation, or none)
            ok = True
            for q in range(hs, he):
                r = home_row[q]
                if not row_free[r] or excluded[node_of[r]] or (holder[r] >= 0 and holder[r] != k):
                    ok = False
                    break
            if ok:
                for q in range(hs, he):
                    taken[nt] = home_row[q]
                    nt += 1
        if nt == 0:  # a reservation it does not use ends with its turn: capacity grows
            ended = _end_reservation(k, home_row[hs:he], holder, row_free, node_of, protect, pres, res, cnt0, avail,
                                     cnt1, eff1, node_type)
            held -= ended
            epoch += ended
        free_at[k] = total - held  # what no running job's home holds
        all_at[k] = total
        if c >= 0:  # under a node rule, only the nodes it may use
            all_at[k] = 0
            for i in range(nn):
                if not excluded[i]:
                    all_at[k] += free[i]
        status[k] = WAITS
        if nt == 0:
            m = 0
            for displace in range(1 if modest[k] else 2):
                if c < 0 and not _may_fit(cnt1 if displace else cnt0, fail1 if displace else fail0, fail1v,
                                          displace, epoch, value[k], n, type_start[k], type_start[k + 1],
                                          type_list):
                    continue
                single = n <= top  # larger units take whole nodes: every node's count matters
                for i in range(nn):  # what this pass may take on each node, and whom that displaces
                    e = eff1[i] if displace else avail[i]
                    eff[i] = e if e > 0 else 0
                    disp[i] = 0
                    if displace and eff[i] > 0 and (eff[i] >= n or not single):
                        a = avail[i] if avail[i] > 0 else 0
                        d = (n if n < eff[i] else eff[i]) - a
                        if d > 0:
                            senior, spent = _displaced(i, d, offset, row_free, holder, protect, cost, hs_buf)
                            if spent >= value[k]:  # displacing them costs more than this unit is worth
                                eff[i] = a
                                refused = True
                            else:  # the most senior home it displaces as junior as can be, then fewest GPUs
                                disp[i] = (nu + 1 - senior) * (total + 1) + d
                for q in range(type_start[k], type_start[k + 1]):
                    t = type_list[q]
                    if t < 0:
                        continue
                    cap = max_size[t]
                    if c >= 0:  # the largest node it may use
                        cap = 0
                        for i in range(nn):
                            if node_type[i] == t and not excluded[i] and sizes[i] > cap:
                                cap = sizes[i]
                    m = _pick(eff, disp, sizes, node_type, excluded, t, n, pick_node, pick_count, chosen, sizes_desc,
                              cap)
                    if m:
                        break
                    if c < 0:  # remembered until capacity grows
                        if displace:
                            if fail1[t, n] != epoch or fail1v[t, n] < value[k]:
                                fail1v[t, n] = value[k]
                            fail1[t, n] = epoch
                        else:
                            fail0[t, n] = epoch
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
            i = node_of[r]
            row_free[r] = False
            free[i] -= 1
            u = holder[r]
            if u >= 0:
                if u != k:
                    epoch += 1  # a home displaced: the later walk of its unit sees other capacity
                if protect[u]:
                    pres[i] -= 1
                else:
                    res[i] -= 1
                    _set(cnt1, eff1, node_type, i, eff1[i] - 1)
                held -= 1
                holder[r] = -1
            else:
                _set(cnt0, avail, node_type, i, avail[i] - 1)
                _set(cnt1, eff1, node_type, i, eff1[i] - 1)
        # what is left of its reservation ends with its turn
        ended = _end_reservation(k, home_row[hs:he], holder, row_free, node_of, protect, pres, res, cnt0, avail,
                                 cnt1, eff1, node_type)
        held -= ended
        epoch += ended
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
def _set(cnt, counts, node_type, i, v):  # pragma: no cover - compiled
    """Node ``i``'s count in ``counts`` becomes ``v``; ``cnt`` (types x counts) follows (negative
    counts, a displaced home's rows, are held at 0 there)."""
    old = counts[i] if counts[i] > 0 else 0
    new = v if v > 0 else 0
    cnt[node_type[i], old] -= 1
    cnt[node_type[i], new] += 1
    counts[i] = v


@_jit
def _end_reservation(k, rows, holder, row_free, node_of, protect, pres, res, cnt0, avail, cnt1, eff1,
                     node_type):  # pragma: no cover - compiled
    """Job ``k``'s home rows it still holds go back to everyone; returns how many were free ones (the GPUs
    the walk can count again)."""
    ended = 0
    for r in rows:
        if holder[r] == k:
            holder[r] = -1
            if row_free[r]:
                i = node_of[r]
                if protect[k]:
                    pres[i] -= 1
                    _set(cnt1, eff1, node_type, i, eff1[i] + 1)
                else:
                    res[i] -= 1
                _set(cnt0, avail, node_type, i, avail[i] + 1)
                ended += 1
    return ended


@_jit
def _may_fit(cnt, fail, fail_value, displace, epoch, value, n, lo, hi, type_list):  # pragma: no cover - compiled
    """Whether a unit of ``n`` GPUs may fit on some type it tries (``type_list[lo:hi]``), from the nodes
    per count ``cnt``: one node with ``n`` or more, or (larger than a node) ``n`` in all; and unless the
    same (type, GPUs) failed since capacity last grew (displacing: at a value no lower)."""
    for q in range(lo, hi):
        t = type_list[q]
        if t < 0:
            continue
        if fail[t, n] == epoch and (not displace or value <= fail_value[t, n]):
            continue
        top = cnt.shape[1] - 1
        if n <= top:
            for v in range(n, top + 1):
                if cnt[t, v] > 0:
                    return True
        else:
            acc = 0
            for v in range(1, top + 1):
                acc += v * cnt[t, v]
            if acc >= n:
                return True
    return False


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
def _displaced(i, d, offset, row_free, holder, protect, cost, hs):  # pragma: no cover - compiled
    """Of the ``d`` rows of node ``i`` that ``_take`` would take from homes (the latest holders' rows
    first): the earliest holder in the walk among them, and what displacing all their holders costs
    (``hs``: a buffer of at least the node's GPUs)."""
    m = 0
    for r in range(offset[i], offset[i + 1]):
        if row_free[r] and holder[r] >= 0 and not protect[holder[r]]:
            hs[m] = holder[r]
            m += 1
    for a in range(1, m):  # latest holders first (a node's few GPUs: insertion sort, no allocation)
        x = hs[a]
        b = a - 1
        while b >= 0 and hs[b] < x:
            hs[b + 1] = hs[b]
            b -= 1
        hs[b + 1] = x
    m = min(d, m)
    spent = 0.0
    for q in range(m):
        if q == 0 or hs[q] != hs[q - 1]:
            spent += cost[hs[q]]
    return hs[m - 1], spent


@_jit
def _pick(eff, disp, sizes, node_type, excluded, t, n, pick_node, pick_count, chosen, sizes_desc,
          cap):  # pragma: no cover - compiled
    """Nodes of type ``t`` for ``n`` GPUs when ``eff[i]`` GPUs of node ``i`` may be taken: one node when
    one fits (fewest displaced GPUs ``disp``, then best fit, lowest index first), else whole nodes
    (largest first, lowest index first) and the rest best fit on one more node, or the fewest nodes
    when that takes fewer (``cap``: the largest node of type ``t`` it may use). Returns the number of
    nodes (0: no fit)."""
    nn = eff.shape[0]
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
    chosen[:] = False
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
