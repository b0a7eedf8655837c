"""The one assignment solver of the engine: a maximum-value assignment of a rectangular matrix,
compiled (numba) so that the compiled packing and migration cores call it without leaving compiled
code."""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit


@_jit
def lsap_max(value):  # pragma: no cover - compiled
    """A maximum-value assignment of a rectangular matrix (every row or every column matched), by
    the shortest augmenting path method (Crouse 2016, as scipy's ``linear_sum_assignment``), for
    callers that are compiled themselves. Returns (rows, columns), rows ascending."""
    nr0, nc0 = value.shape
    transpose = nc0 < nr0
    if transpose:
        nr, nc = nc0, nr0
        cost = np.empty((nr, nc))
        for i in range(nr0):
            for j in range(nc0):
                cost[j, i] = -value[i, j]
    else:
        nr, nc = nr0, nc0
        cost = np.empty((nr, nc))
        for i in range(nr):
            for j in range(nc):
                cost[i, j] = -value[i, j]
    u = np.zeros(nr)
    v = np.zeros(nc)
    spc = np.empty(nc)
    path = np.full(nc, -1, np.int64)
    col4row = np.full(nr, -1, np.int64)
    row4col = np.full(nc, -1, np.int64)
    sr = np.zeros(nr, np.bool_)
    sc = np.zeros(nc, np.bool_)
    remaining = np.empty(nc, np.int64)
    for cur in range(nr):
        # shortest augmenting path from row ``cur``
        min_val = 0.0
        num_remaining = nc
        for it in range(nc):
            remaining[it] = nc - it - 1
        sr[:] = False
        sc[:] = False
        spc[:] = np.inf
        sink = -1
        i = cur
        while sink == -1:
            index = -1
            lowest = np.inf
            sr[i] = True
            for it in range(num_remaining):
                j = remaining[it]
                r = min_val + cost[i, j] - u[i] - v[j]
                if r < spc[j]:
                    path[j] = i
                    spc[j] = r
                if spc[j] < lowest or (spc[j] == lowest and row4col[j] == -1):
                    lowest = spc[j]
                    index = it
            min_val = lowest
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            sc[j] = True
            num_remaining -= 1
            remaining[index] = remaining[num_remaining]
        # dual update
        u[cur] += min_val
        for i in range(nr):
            if sr[i] and i != cur:
                u[i] += min_val - spc[col4row[i]]
        for j in range(nc):
            if sc[j]:
                v[j] -= min_val - spc[j]
        # augment
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break
    rows = np.empty(nr, np.int64)
    cols = np.empty(nr, np.int64)
    if transpose:
        by = np.argsort(col4row)
        for k in range(nr):
            rows[k] = col4row[by[k]]
            cols[k] = by[k]
    else:
        for k in range(nr):
            rows[k] = k
            cols[k] = col4row[k]
    return rows, cols
