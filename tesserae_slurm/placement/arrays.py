"""Small array helpers for the placement stages' hot paths.

``gpu_layout`` (in ``model.layout``, re-exported): the flat GPU rows of a cluster's node shape, built
once per shape and shared by the stages and by plans held as arrays.
"""

from __future__ import annotations

import numpy as np

from ..model.layout import GpuLayout, gpu_layout

__all__ = ["GpuLayout", "gpu_layout", "runs"]


def runs(counts: np.ndarray) -> np.ndarray:
    """0, 1, .., c-1 for each count c, concatenated (the position of each item within its group)."""
    total = int(counts.sum())
    out: np.ndarray = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return out
