"""The flat GPU rows of a node shape: node by node, GPU by GPU.

The placement stages work on GPU rows (consolidation takes a job's GPU references as a slice of them,
migration maps references to rows and back), and a plan the engine built can be held as a table
over them (``plan.PlanRows``). Every plan of one cluster shares one layout.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np


class GpuLayout(NamedTuple):
    """Flat GPU rows of a node shape (node by node, GPU by GPU): every plan of one cluster shares
    it, so a (node, GPU) reference maps to its row with one dict lookup, and back by indexing."""

    sizes: np.ndarray  # GPUs per node (read only)
    offset: np.ndarray  # row of each node's GPU 0 (read only)
    row_of: dict[tuple[str, int], int]  # (node, GPU index) -> row
    refs: list[tuple[str, int]]  # row -> (node, GPU index)
    node_of: np.ndarray  # row -> node index (read only)
    name_rank: np.ndarray  # node index -> position of its name in name order (read only)
    by_name: tuple[str, ...]  # node names in name order


@lru_cache(maxsize=16)
def gpu_layout(names: tuple[str, ...], sizes: tuple[int, ...]) -> GpuLayout:
    """The layout of nodes ``names`` with ``sizes`` GPUs each, in that order (built once per shape)."""
    size = np.array(sizes, dtype=np.int64)
    offset = np.zeros(len(names), dtype=np.int64)
    np.cumsum(size[:-1], out=offset[1:])
    node_of = np.repeat(np.arange(len(names), dtype=np.int64), size)
    by_name = sorted(range(len(names)), key=names.__getitem__)
    name_rank = np.empty(len(names), dtype=np.int64)
    name_rank[by_name] = np.arange(len(names))
    size.flags.writeable = offset.flags.writeable = node_of.flags.writeable = name_rank.flags.writeable = False
    refs = [(name, gpu) for name, g in zip(names, sizes) for gpu in range(g)]
    return GpuLayout(size, offset, {ref: row for row, ref in enumerate(refs)}, refs, node_of, name_rank,
                     tuple(map(names.__getitem__, by_name)))
