"""The compiled migration core (``placement/migrate_groups.py``) on random cluster-like plans where most
jobs stay, some swap nodes, some come and go: the nested matching's cost is the exact minimum over
every relabeling that keeps nodes whole (tests/oracles/migration.py, a mixed-integer program), its
result a valid relabeling costed as the paper costs it, whether the plans come as tables or as sets;
its assignment solver against scipy's by value (test_migrate.py holds small plans to brute force)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.migration import min_migration_cost

from tesserae_slurm.model import Placement
from tesserae_slurm.placement import migrate_groups
from tesserae_slurm.placement.lsap import lsap_max
from tesserae_slurm.placement.migrate import mapping_cost, migrate


@st.composite
def cluster_plans(draw):
    """Nodes of 2 and 4 GPUs (two groups), jobs of 1-8 GPUs, up to two jobs per GPU; the logical
    plan keeps most jobs where they were, moves or swaps some, drops and adds a few, and comes
    with its nodes relabeled within each size (as consolidation's logical names are)."""
    sizes = draw(st.lists(st.sampled_from([4, 4, 4, 2]), min_size=2, max_size=14))
    names = [f"n{i}" for i in range(len(sizes))]
    rows = [(n, u) for n, s in zip(names, sizes) for u in range(s)]
    counts = st.sampled_from([1, 1, 1, 2, 4, 4, 8, 3] if draw(st.booleans()) else [1, 1, 2, 4, 8])

    def place(cells, job, k):
        free = [r for r in draw(st.permutations(rows)) if len(cells[r]) < 2 and job not in cells[r]][:k]
        if len(free) == k:
            for r in free:
                cells[r].append(job)

    old = {r: [] for r in rows}
    jobs = [f"j{i}" for i in range(draw(st.integers(0, 3 * len(rows) // 2)))]
    gpus = {j: draw(counts) for j in jobs}
    for j in jobs:
        place(old, j, gpus[j])
    new = {r: [j for j in cell if j not in set(draw(st.lists(st.sampled_from(jobs), max_size=3)) if jobs else [])]
           for r, cell in old.items()}
    present = {j for cell in new.values() for j in cell}
    movers = draw(st.lists(st.sampled_from(sorted(present)), max_size=6, unique=True)) if present else []
    for j in movers:  # moved or swapped: off its GPUs, then onto any free ones
        k = sum(j in cell for cell in new.values())
        for cell in new.values():
            if j in cell:
                cell.remove(j)
        place(new, j, k)
    for i in range(draw(st.integers(0, 4))):  # arrivals
        place(new, f"a{i}", draw(counts))
    relabel = {}
    for size in set(sizes):
        group = [n for n, s in zip(names, sizes) if s == size]
        relabel.update(zip(group, draw(st.permutations(group))))

    def plan(cells, label=lambda n: n):
        return Placement.from_lists({label(n): [cells[(n, u)] for u in range(s)] for n, s in zip(names, sizes)})

    return plan(old), plan(new, relabel.__getitem__)


def _valid(old, new, res):
    """Every new node lands whole on one physical node of its size (GPUs possibly reordered); the
    reported cost and migrated jobs are those of the final plan."""
    assert sorted(res.node_map.values()) == sorted(old.nodes) and sorted(res.node_map) == sorted(new.nodes)
    for nn, on in res.node_map.items():
        assert sorted(map(sorted, new.nodes[nn])) == sorted(map(sorted, res.placement.nodes[on]))
    assert res.cost == mapping_cost(old, res.placement) or abs(res.cost - mapping_cost(old, res.placement)) < 1e-9
    before, after = old.job_gpus(), res.placement.job_gpus()
    assert res.migrated == tuple(sorted(j for j in set(before) & set(after) if before[j] != after[j]))
    assert dict(res.placement.job_gpus()) == dict(Placement(res.placement.nodes).job_gpus())


@settings(max_examples=100, deadline=None)
@given(cluster_plans(), st.booleans(), st.booleans())
def test_the_nested_matching_costs_the_exact_minimum_as_tables_and_as_sets(pair, typed, old_table):
    """The paper's optimality claim where it matters, up to 14 nodes of 4 and 2 GPUs: the cost of the
    mapping chosen equals the least cost over all node-whole relabelings, solved as one program.
    The simulator's path (the logical plan, and from the second round on the current one, a table
    over the cluster's nodes) and the plans as sets both reach it, each a valid relabeling."""
    old, new = pair
    new = Placement({n: new.nodes[n] for n in old.nodes})  # a logical plan names the nodes in cluster order
    names, sizes = tuple(old.nodes), tuple(map(len, old.nodes.values()))
    types = {n: ("a100" if len(g) == 4 else "v100") for n, g in old.nodes.items()} if typed else None
    table_new = Placement.from_rows(new.as_rows(names, sizes))
    table_old = Placement.from_rows(old.as_rows(names, sizes)) if old_table else old
    got = migrate(table_old, table_new, node_types=types)
    sets = migrate(old, new, node_types=types)
    _valid(old, new, got)
    _valid(old, new, sets)
    best = min_migration_cost(old, new, types)
    assert abs(got.cost - best) < 1e-9 and abs(sets.cost - best) < 1e-9
    gpus = got.placement.job_gpus()
    assert list(got.placement.job_nodes().items()) == [(j, g[0][0]) for j, g in gpus.items()]


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_the_compiled_assignment_is_optimal_on_ties(rows, cols, data):
    """Components are solved in the core by ``lsap_max``: a full matching as valuable as scipy's
    ``linear_sum_assignment(maximize=True)`` finds (dyadic savings tie often)."""
    from scipy.optimize import linear_sum_assignment

    cells = st.sampled_from([0.0, 0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0])
    value = np.array(data.draw(st.lists(cells, min_size=rows * cols, max_size=rows * cols))).reshape(rows, cols)
    want_r, want_c = linear_sum_assignment(value, maximize=True)
    got_r, got_c = lsap_max(value)
    _optimal(value, got_r, got_c, value[want_r, want_c].sum())


def test_the_cores_load_where_numba_cannot_write_a_cache(monkeypatch):
    """A read-only install with no writable home (the systemd unit's ProtectSystem/ProtectHome): numba
    finds no cache location and refuses ``cache=True`` at import. The cores still load, uncached."""
    import importlib

    from numba.core import caching

    from tesserae_slurm.placement import consolidate_walk

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])  # no location is usable
    try:
        importlib.reload(migrate_groups)
        importlib.reload(consolidate_walk)
        assert consolidate_walk.walk._cache.__class__.__name__ == "NullCache"  # really uncached
        status, _, _, p_node, p_start, p_count = consolidate_walk.walk(
            np.array([4, 4]), np.zeros(2, np.int64), np.array([2, 4, 1]), np.full(3, -1), np.arange(4), np.zeros(3, np.int64),
            np.full(3, -1), np.zeros((1, 2), np.bool_))  # no unit has a node rule
        assert status.tolist() == [0, 0, 0] and p_node.tolist() == [0, 1, 0] and p_count.tolist() == [2, 4, 1]
    finally:
        monkeypatch.undo()
        importlib.reload(migrate_groups)
        importlib.reload(consolidate_walk)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_the_compiled_assignment_is_optimal_on_any_floats(rows, cols, seed):
    """Packing's matrices are sums of measured speeds, not dyadic: still an optimal full matching."""
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(seed)
    value = rng.choice(rng.random(4) * 2.0, size=(rows, cols)) * (rng.random((rows, cols)) < 0.7)
    want_r, want_c = linear_sum_assignment(value, maximize=True)
    got_r, got_c = lsap_max(value)
    _optimal(value, got_r, got_c, value[want_r, want_c].sum())


def _optimal(value, rows, cols, best):
    assert len(rows) == min(value.shape) and len(set(rows.tolist())) == len(set(cols.tolist())) == len(rows)
    assert rows.tolist() == sorted(rows.tolist())
    assert abs(value[rows, cols].sum() - best) < 1e-9
