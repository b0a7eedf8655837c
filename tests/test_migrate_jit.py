"""The compiled migration core (``placement/migrate_jit.py``) against the numpy path it replaces:
the same plan, job map (keys in the same order), cost, migrated jobs and node map (in the same
order), on random cluster-like plans where most jobs stay, some swap nodes, some come and go."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Placement
from tesserae_slurm.placement import migrate_jit
from tesserae_slurm.placement.migrate import _exact_sums, migrate


def test_the_test_setup_installs_numba():
    # ./dev test installs the [fast] extra: without numba the compiled path below would run as plain
    # Python and this file would not test what the simulator runs
    assert migrate_jit.available()


def test_only_dyadic_weights_take_the_compiled_path():
    assert _exact_sums(np.array([1, 2, 4, 8, 64]), np.array([1 << 19]))
    assert not _exact_sums(np.array([1, 2, 3]))
    assert not _exact_sums(np.array([1 << 20]))


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


def _same(a, b):
    assert a.placement == b.placement
    assert list(a.placement.job_gpus().items()) == list(b.placement.job_gpus().items())
    assert a.cost == b.cost
    assert a.migrated == b.migrated
    assert list(a.node_map.items()) == list(b.node_map.items())


@settings(max_examples=400, deadline=None)
@given(cluster_plans(), st.booleans())
def test_compiled_core_gives_the_numpy_paths_result(pair, typed):
    old, new = pair
    types = {n: ("a100" if len(g) == 4 else "v100") for n, g in old.nodes.items()} if typed else None
    _same(migrate(old, new, node_types=types, _jit=True), migrate(old, new, node_types=types, _jit=False))


@settings(max_examples=300, deadline=None)
@given(cluster_plans(), st.booleans(), st.booleans())
def test_plans_held_as_tables_migrate_as_plans_of_sets(pair, typed, old_table):
    """The simulator's path: the logical plan (and, from the second round on, the current one) is a
    table over the cluster's nodes; migration reads and returns tables, and must give what it gives
    for the same plans as sets: plan, job map (keys in order), cost, migrated jobs and node map."""
    old, new = pair
    new = Placement({n: new.nodes[n] for n in old.nodes})  # a logical plan names the nodes in cluster order
    names, sizes = tuple(old.nodes), tuple(map(len, old.nodes.values()))
    types = {n: ("a100" if len(g) == 4 else "v100") for n, g in old.nodes.items()} if typed else None
    table_new = Placement.from_rows(new.as_rows(names, sizes))
    table_old = Placement.from_rows(old.as_rows(names, sizes)) if old_table else old
    got = migrate(table_old, table_new, node_types=types)
    _same(got, migrate(old, new, node_types=types))
    counts = [len(g) for plan in (old, new) for g in plan.job_gpus().values()]
    if _exact_sums(np.array(counts, dtype=np.int64)):
        assert got.placement.rows() is not None  # the table path ran
    gpus = got.placement.job_gpus()
    assert list(got.placement.job_nodes().items()) == [(j, g[0][0]) for j, g in gpus.items()]


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_the_compiled_assignment_is_scipys_ties_included(rows, cols, data):
    """Components beyond the 2x2 rule are solved in the core by ``lsap_max``; it must pick what
    scipy's ``linear_sum_assignment(maximize=True)`` picks, ties included (dyadic savings tie often)."""
    from scipy.optimize import linear_sum_assignment

    cells = st.sampled_from([0.0, 0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0])
    value = np.array(data.draw(st.lists(cells, min_size=rows * cols, max_size=rows * cols))).reshape(rows, cols)
    want_r, want_c = linear_sum_assignment(value, maximize=True)
    got_r, got_c = migrate_jit.lsap_max(value)
    assert got_r.tolist() == want_r.tolist() and got_c.tolist() == want_c.tolist()


def test_the_cores_load_where_numba_cannot_write_a_cache(monkeypatch):
    """A read-only install with no writable home (the systemd unit's ProtectSystem/ProtectHome): numba
    finds no cache location and refuses ``cache=True`` at import. The cores still load, uncached."""
    import importlib

    from numba.core import caching

    from tesserae_slurm.placement import consolidate_jit

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])  # no location is usable
    try:
        importlib.reload(migrate_jit)
        importlib.reload(consolidate_jit)
        assert consolidate_jit.walk._cache.__class__.__name__ == "NullCache"  # really uncached
        status, _, _, p_node, p_start, p_count = consolidate_jit.walk(np.array([4, 4]), np.array([2, 4, 1]))
        assert status.tolist() == [0, 0, 0] and p_node.tolist() == [0, 1, 0] and p_count.tolist() == [2, 4, 1]
    finally:
        monkeypatch.undo()
        importlib.reload(migrate_jit)
        importlib.reload(consolidate_jit)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_the_compiled_assignment_is_scipys_on_any_floats(rows, cols, seed):
    """Packing's matrices are sums of measured speeds, not dyadic: the port must still be scipy's,
    bit for bit (the same float operations in the same order), ties among repeated values included."""
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(seed)
    value = rng.choice(rng.random(4) * 2.0, size=(rows, cols)) * (rng.random((rows, cols)) < 0.7)
    want_r, want_c = linear_sum_assignment(value, maximize=True)
    got_r, got_c = migrate_jit.lsap_max(value)
    assert got_r.tolist() == want_r.tolist() and got_c.tolist() == want_c.tolist()
