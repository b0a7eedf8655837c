"""The compiled keep-first walk (placement/keep_walk.py) against the plain reference
(tests/oracles/keep_walk.py): the same units get the same GPU rows, over random homes, protections,
values and costs; and its counts of free GPUs for the waiting reasons."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.placement import keep_walk as compiled

from oracles import keep_walk as reference


def _instance(seed: int, sizes: list[int]):
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    offset = np.r_[0, np.cumsum(sizes)]
    units = int(rng.integers(1, 3 * len(sizes) + 4))
    need = [int(rng.choice([1, 1, 2, 2, 4, 8])) for _ in range(units)]
    homes: list[list[int]] = [[] for _ in range(units)]
    free = np.ones(total, dtype=bool)
    for k in rng.permutation(units).tolist():  # a valid current placement: homes on one node where they fit
        if rng.random() < 0.6 and need[k] <= max(sizes):
            nodes = [i for i in range(len(sizes)) if free[offset[i]:offset[i + 1]].sum() >= need[k]]
            if nodes:
                i = int(rng.choice(nodes))
                rows = np.flatnonzero(free[offset[i]:offset[i + 1]])[:need[k]] + offset[i]
                rng.shuffle(rows)
                homes[k] = sorted(rows.tolist()[:need[k]])
                free[homes[k]] = False
    protect = [bool(homes[k]) and rng.random() < 0.2 for k in range(units)]
    modest = [not homes[k] and rng.random() < 0.2 for k in range(units)]
    value = [float(rng.choice([10.0, 100.0, 1000.0])) * need[k] for k in range(units)]
    cost = [float(rng.choice([5.0, 60.0, 600.0])) * need[k] if homes[k] else 0.0 for k in range(units)]
    return need, homes, protect, modest, value, cost


def _run(sizes, need, homes, protect, modest, value, cost, allowed=None):
    """``allowed``: unit -> the nodes its rule lets it use (one rule row each)."""
    start = np.r_[0, np.cumsum([len(h) for h in homes])].astype(np.int64)
    rows = np.array([r for h in homes for r in h], dtype=np.int64)
    n = len(need)
    allowed = allowed or {}
    rule = np.array([list(allowed).index(k) if k in allowed else -1 for k in range(n)], dtype=np.int64)
    masks = np.array([[i in allowed[k] for i in range(len(sizes))] for k in allowed] or [[False] * len(sizes)])
    status, free_at, first, p_node, p_start, p_count, refused, all_at = compiled.keep_walk(
        np.array(sizes, dtype=np.int64), np.zeros(len(sizes), dtype=np.int64), np.array(need, dtype=np.int64),
        start, rows, np.array(protect), np.array(modest), np.array(value), np.array(cost),
        np.arange(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int64), rule, masks)
    offset = np.r_[0, np.cumsum(sizes)]
    out = []
    for k in range(n):
        got = [int(offset[p_node[q]] + p_start[q] + c) for q in range(first[k], first[k + 1]) for c in range(p_count[q])]
        out.append(sorted(got) if status[k] == compiled.PLACED else None)
    return out, free_at, all_at, status


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([[4, 4], [4, 4, 4], [4, 4, 4, 4, 4], [2, 4, 4], [4, 8, 4], [8, 8]]))
def test_the_compiled_walk_places_as_the_reference(seed, sizes):
    need, homes, protect, modest, value, cost = _instance(seed, sizes)
    got, _, _, _ = _run(sizes, need, homes, protect, modest, value, cost)
    assert got == reference.keep_walk(sizes, need, homes, protect, modest, value, cost)


def test_a_unit_waiting_for_gpus_running_jobs_keep_is_told_none_are_free():
    """Node of 4: a running 4-GPU job at home, ranked last; a new 2-GPU job before it cannot displace it
    (its stop costs more than the new job is worth): it waits with 0 GPUs free for it, though 4 would be
    free if the running job moved (``all_at``: what a plan that moves jobs could use)."""
    got, free_at, all_at, status = _run([4], [2, 4], [[], [0, 1, 2, 3]], [False, False], [False, False],
                                        [10.0, 100.0], [0.0, 600.0])
    assert got == [None, [0, 1, 2, 3]] and status[0] == compiled.WAITS
    assert (free_at[0], all_at[0]) == (0, 4)
    got, _, _, _ = _run([4], [2, 4], [[], [0, 1, 2, 3]], [False, False], [False, False], [1000.0, 100.0],
                        [0.0, 600.0])
    assert got == [[0, 1], None]  # worth more than the stop: it displaces, and the running job waits


def test_a_unit_under_a_node_rule_counts_only_the_gpus_of_its_nodes():
    """Two nodes of 4: a running 4-GPU job keeps node 1; a 2-GPU job pinned to node 1 waits. Node 0's 4
    free GPUs are no use to it: no plan that moves jobs would run it there (``all_at`` 0 on node 1 once
    the running job, ranked ahead, took it), so the engine does not count it as stranded."""
    got, free_at, all_at, status = _run([4, 4], [4, 2], [[4, 5, 6, 7], []], [False, False], [False, False],
                                        [100.0, 10.0], [600.0, 0.0], allowed={1: {1}})
    assert got == [[4, 5, 6, 7], None] and status[1] == compiled.WAITS
    assert (free_at[1], all_at[1]) == (4, 0)
    _, _, all_at, _ = _run([4, 4], [4, 2], [[4, 5, 6, 7], []], [False, False], [False, False],
                           [100.0, 10.0], [600.0, 0.0])
    assert all_at[1] == 4  # with no rule, every free GPU counts
