"""The matching of one group of interchangeable items for ``migrate`` (nodes of one size and GPU type
for ``tesserae``, single GPUs of one type for ``flat``), compiled (numba).

A round's migration is many tiny problems (sharing node pairs, a GPU matching per pair, connected
components, a small assignment per component); as loops compiled once they cost one call instead
of hundreds of numpy calls each paying its overhead (the simulator's big traces run thousands of
rounds). Ties are broken deterministically (GPU matchings: the first permutation in lexicographic
order, so GPU indices stay when that is optimal); tests hold the result to brute-force minima.
"""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit
from .lsap import lsap_max

EPS = 1e-12


@_jit
def group_core(o_jobs, n_jobs, o_w, n_w, w_sum, perms, n_common):  # pragma: no cover - compiled
    """Sharing pairs of one group, their savings and best GPU matching, and the node matching of
    the sharing graph's components.

    ``o_jobs``/``n_jobs``: (nodes, g, 2) common-job indices (-1: none); ``o_w``/``n_w``: (nodes, g)
    weight on each GPU; ``perms``: the g! GPU matchings, identity first, or none (0 rows) for nodes
    too big to enumerate: then each pair's GPU matching is one assignment.

    Returns ``po, pn`` (sharing pairs sorted by old, then new node), ``pair_perm`` (per pair, the
    new GPU each old GPU receives) and ``pair_a, pair_b`` (the node matching of the components that
    save anything: a one-edge component is its edge, a larger one takes one assignment).
    """
    nx, g = o_jobs.shape[0], o_jobs.shape[1]
    ny = n_jobs.shape[0]
    # new nodes of each common job (CSR), to join old and new nodes on jobs
    count = np.zeros(n_common + 1, np.int64)
    for y in range(ny):
        for v in range(g):
            for t in range(2):
                j = n_jobs[y, v, t]
                if j >= 0:
                    count[j + 1] += 1
    start = np.cumsum(count)
    fill = start[:-1].copy()
    nodes_of = np.empty(start[-1], np.int64)
    for y in range(ny):
        for v in range(g):
            for t in range(2):
                j = n_jobs[y, v, t]
                if j >= 0:
                    nodes_of[fill[j]] = y
                    fill[j] += 1
    # sharing pairs, by old node then new node
    stamp = np.full(ny, -1, np.int64)
    cand = np.empty(ny, np.int64)
    po_l = []
    pn_l = []
    for x in range(nx):
        k = 0
        for u in range(g):
            for s in range(2):
                j = o_jobs[x, u, s]
                if j < 0:
                    continue
                for q in range(start[j], start[j + 1]):
                    y = nodes_of[q]
                    if stamp[y] != x:
                        stamp[y] = x
                        cand[k] = y
                        k += 1
        if k:
            ys = np.sort(cand[:k])
            for i in range(k):
                po_l.append(x)
                pn_l.append(ys[i])
    p = len(po_l)
    po, pn = _ints(po_l), _ints(pn_l)
    # per pair: the cheapest GPU matching (first in lexicographic order) and the savings it gives
    pair_perm = np.empty((p, g), np.int64)
    savings = np.zeros(p)
    cost = np.empty((g, g))
    n_perm = perms.shape[0]
    for i in range(p):
        x, y = po[i], pn[i]
        sa = 0.0
        sb = 0.0
        for u in range(g):
            sa += o_w[x, u]
            sb += n_w[y, u]
        for u in range(g):
            for v in range(g):
                sav = 0.0
                for s in range(2):
                    j = o_jobs[x, u, s]
                    if j < 0:
                        continue
                    for t in range(2):
                        if n_jobs[y, v, t] == j:
                            sav += w_sum[j]
                cost[u, v] = o_w[x, u] + n_w[y, v] - sav
        top = np.inf
        if n_perm:
            arg = 0
            for q in range(n_perm):
                tot = 0.0
                for u in range(g):
                    tot += cost[u, perms[q, u]]
                if tot < top:
                    top = tot
                    arg = q
            pair_perm[i] = perms[arg]
        else:
            _, cols = lsap_max(-cost)
            top = 0.0
            for u in range(g):
                top += cost[u, cols[u]]
            pair_perm[i] = cols
        savings[i] = sa + sb - top
    comp = edge_components(po, pn, nx, ny)
    order = np.argsort(comp, kind="mergesort")
    e_a = po[order]
    e_b = pn[order]
    e_s = savings[order]
    c_sorted = comp[order]
    # component bounds
    bounds_l = [0]
    for i in range(1, p):
        if c_sorted[i] != c_sorted[i - 1]:
            bounds_l.append(i)
    if p:
        bounds_l.append(p)
    n_comp = len(bounds_l) - 1 if p else 0
    pair_a_l = []
    pair_b_l = []
    for c in range(n_comp):  # a component of one edge: that edge is its matching (these come first)
        if bounds_l[c + 1] - bounds_l[c] == 1:
            pair_a_l.append(e_a[bounds_l[c]])
            pair_b_l.append(e_b[bounds_l[c]])
    for c in range(n_comp):
        s, e = bounds_l[c], bounds_l[c + 1]
        if e - s > 1:
            _dense_component(e_a, e_b, e_s, s, e, pair_a_l, pair_b_l)
    return po, pn, pair_perm, _ints(pair_a_l), _ints(pair_b_l)


@_jit
def edge_components(ea, eb, na, nb):  # pragma: no cover - compiled
    """Per edge of a bipartite graph (a-item ``ea[i]`` to b-item ``eb[i]``), the smallest a-item of
    its connected component: min-label sweeps with pointer jumping. Multi-node jobs chain nodes into
    paths, and jumping to a label's own label shortens a path's propagation to a few sweeps."""
    p = ea.shape[0]
    label_a = np.arange(na)
    label_b = np.empty(nb, np.int64)
    while True:
        label_b[:] = na
        for i in range(p):
            if label_a[ea[i]] < label_b[eb[i]]:
                label_b[eb[i]] = label_a[ea[i]]
        nxt = label_a.copy()
        for i in range(p):
            if label_b[eb[i]] < nxt[ea[i]]:
                nxt[ea[i]] = label_b[eb[i]]
        changed = False
        for x in range(na):
            nxt[x] = nxt[nxt[x]]  # a label's label is in the same component and no larger
            if nxt[x] != label_a[x]:
                changed = True
        label_a = nxt
        if not changed:
            break
    comp = np.empty(p, np.int64)
    for i in range(p):
        comp[i] = label_a[ea[i]]
    return comp


@_jit
def _dense_component(e_a, e_b, e_s, s, e, pair_a, pair_b):  # pragma: no cover - compiled
    """The saving-maximizing node matching of the component on edges ``s:e``: one dense assignment
    over its old and new nodes (sorted), keeping the pairs that save."""
    ra = np.unique(e_a[s:e])
    rb = np.unique(e_b[s:e])
    dense = np.zeros((ra.shape[0], rb.shape[0]))
    for k in range(s, e):
        dense[np.searchsorted(ra, e_a[k]), np.searchsorted(rb, e_b[k])] = e_s[k]
    rows, cols = lsap_max(dense)
    for k in range(rows.shape[0]):
        if dense[rows[k], cols[k]] > EPS:
            pair_a.append(ra[rows[k]])
            pair_b.append(rb[cols[k]])


@_jit
def _ints(values):  # pragma: no cover - compiled
    """A list of integers built in a core, as an int64 array (what the caller gets back)."""
    out = np.empty(len(values), np.int64)
    for i in range(len(values)):
        out[i] = values[i]
    return out


@_jit
def group_finish(pair_a, pair_b, po, pn, pair_perm, o_name, n_name, n_names):  # pragma: no cover - compiled
    """Pair the nodes no component matched (same name first, so idle nodes stay put, then in order)
    and give every pair its GPU matching: the sharing pair's best one, else the identity.

    ``o_name``/``n_name``: per node of the group, an index into one table of names (-1: a name the
    other plan lacks). Returns the full pair lists and each pair's GPU matching (m, g)."""
    nx = o_name.shape[0]
    ny = n_name.shape[0]
    used_a = np.zeros(nx, np.bool_)
    used_b = np.zeros(ny, np.bool_)
    for i in range(pair_a.shape[0]):
        used_a[pair_a[i]] = True
        used_b[pair_b[i]] = True
    at_name = np.full(n_names, -1, np.int64)
    for j in range(ny):
        if not used_b[j] and n_name[j] >= 0:
            at_name[n_name[j]] = j
    xs = list(pair_a)
    ys = list(pair_b)
    rest_a = []
    for i in range(nx):
        if used_a[i]:
            continue
        k = o_name[i]
        j = at_name[k] if k >= 0 else -1
        if j >= 0:
            xs.append(i)
            ys.append(j)
            at_name[k] = -2  # popped
        else:
            rest_a.append(i)
    r = 0
    for j in range(ny):
        if used_b[j]:
            continue
        k = n_name[j]
        if k >= 0 and at_name[k] == -2:
            continue  # taken by the same name
        if r < len(rest_a):
            xs.append(rest_a[r])
            ys.append(j)
            r += 1
    m = len(xs)
    g = pair_perm.shape[1]
    perm = np.empty((m, g), np.int64)
    for i in range(m):
        for u in range(g):
            perm[i, u] = u
    # sharing pairs of old node x: po is sorted, so they are a run
    first = np.full(nx + 1, 0, np.int64)
    for i in range(po.shape[0]):
        first[po[i] + 1] += 1
    first = np.cumsum(first)
    for i in range(m):
        x, y = xs[i], ys[i]
        for q in range(first[x], first[x + 1]):
            if pn[q] == y:
                perm[i] = pair_perm[q]
                break
    return _ints(xs), _ints(ys), perm
