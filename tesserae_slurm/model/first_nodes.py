"""Compiled reader of a plan table (numba): the shells ask each plan for its jobs' nodes every round."""

from __future__ import annotations

import numpy as np

from ..jit import jit as _jit


@_jit
def first_nodes(table, node_of, name_rank, n_jobs):  # pragma: no cover - compiled
    """Per job number, the name rank of the first (by name) node among its GPU rows."""
    best = np.full(n_jobs, name_rank.shape[0], np.int64)
    for r in range(table.shape[0]):
        rank = name_rank[node_of[r]]
        for c in range(2):
            j = table[r, c]
            if j >= 0 and rank < best[j]:
                best[j] = rank
    return best
