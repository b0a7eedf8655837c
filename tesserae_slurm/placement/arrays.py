"""Small array helpers for the placement stages' hot paths.

``gpu_layout`` (in ``model.layout``, re-exported): the flat GPU rows of a cluster's node shape, built
once per shape and shared by the stages and by plans held as arrays.

``np.unique`` on a few hundred integers costs ~25 us, most of it argument handling; the engine calls
it several times a round on arrays that small, so a plain sort-and-mask does the same in a quarter of
the time. Same result as ``np.unique`` for 1-D integer arrays (a test compares them).
"""

from __future__ import annotations

import numpy as np

from ..model.layout import GpuLayout, gpu_layout

__all__ = ["GpuLayout", "gpu_layout", "runs", "unique_ints"]


def unique_ints(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for a 1-D integer array."""
    s = np.sort(values)
    if len(s) < 2:
        return s
    first = np.empty(len(s), dtype=bool)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    return s[first]


def runs(counts: np.ndarray) -> np.ndarray:
    """0, 1, .., c-1 for each count c, concatenated (the position of each item within its group)."""
    total = int(counts.sum())
    out: np.ndarray = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return out
