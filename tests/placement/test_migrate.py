"""Migration minimization: the paper's worked examples and brute force over every relabeling."""

from __future__ import annotations

from itertools import permutations, product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import InputError, Placement
from tesserae_slurm.placement.migrate import mapping_cost, migrate


def plan(**nodes: list) -> Placement:
    """plan(n0=[1, 2, (1, 5), None]): one entry per GPU, an int / tuple of ints / None (idle)."""
    def slot(x):
        if x is None:
            return []
        return [str(j) for j in (x if isinstance(x, tuple) else (x,))]
    return Placement.from_lists({name: [slot(x) for x in gpus] for name, gpus in nodes.items()})


# ---- the paper's examples ---------------------------------------------------------------------------
def test_section_5_1_renaming_needs_no_migration():
    # {(0,1),(1,2),(2,2),(3,4)} -> {(0,4),(1,1),(2,2),(3,2)}: renaming 0->1, 1->3, 3->0 moves nothing
    old = plan(n=[1, 2, 2, 4])
    new = plan(n=[4, 1, 2, 2])
    res = migrate(old, new)
    assert res.cost == 0 and res.migrated == ()
    assert res.placement == old
    gavel = migrate(old, new, "gavel")  # Gavel's rule moves 1, 4 and job 2 (its GPU set changed)
    assert gavel.migrated == ("1", "2", "4")


def test_appendix_example_1_cost_zero():
    old = plan(n=[1, 2, 3, 4])
    new = plan(n=[4, 1, 2, 3])
    res = migrate(old, new)
    assert (res.cost, res.migrated) == (0, ())


def test_appendix_example_2_job_5_moves():
    old = plan(n=[(1, 5), 2, 3, 4])
    new = plan(n=[(4, 5), 1, 2, 3])
    res = migrate(old, new)
    assert res.cost == pytest.approx(1.0)  # 0.5 (5 moves out of GPU 0) + 0.5 (5 moves in beside 4)
    assert res.migrated == ("5",)
    assert res.placement.nodes["n"] == (frozenset({"1"}), frozenset({"2"}), frozenset({"3"}), frozenset({"4", "5"}))


def test_appendix_example_3_jobs_in_one_round_only_are_dropped():
    old = plan(n=[(1, 6), 2, 3, 4])
    new = plan(n=[(4, 5), 1, 2, 3])
    res = migrate(old, new)
    assert (res.cost, res.migrated) == (0, ())
    assert res.placement.job_gpus()["5"] == (("n", 3),)  # new job 5 lands beside 4, where 4 already is


def test_appendix_algorithm_4_flat_may_split_node_level_does_not():
    # job 1 on node a, job 2 on node b; next round both are packed on all four GPUs of one node
    old = plan(a=[1, 1, 1, 1], b=[2, 2, 2, 2])
    new = plan(a=[(1, 2)] * 4, b=[None] * 4)
    tess = migrate(old, new)
    gpus = tess.placement.job_gpus()
    assert len({n for n, _ in gpus["1"]}) == 1 and gpus["1"] == gpus["2"]
    # Every flat GPU-level mapping of the four packed GPUs costs the same 0.25 per GPU pair, so the
    # flat matching's optimum includes mappings that split the packed pair across both nodes:
    split = Placement.from_lists({"a": [["1", "2"], ["1", "2"], [], []], "b": [["1", "2"], ["1", "2"], [], []]})
    flat = migrate(old, new, "flat")
    assert mapping_cost(old, split) == pytest.approx(flat.cost)
    assert tess.cost >= flat.cost - 1e-9


def test_gpu_count_change_counts_as_migrated():
    old = plan(n=[1, 1, 2, None])
    new = plan(n=[1, 2, 2, 2])  # job 1 shrinks from 2 GPUs to 1
    res = migrate(old, new)
    assert "1" in res.migrated


def test_shape_mismatch_and_bad_algorithm():
    with pytest.raises(InputError, match="shape mismatch"):
        migrate(plan(a=[1, 2]), plan(a=[1, 2, None]))
    with pytest.raises(InputError, match="migration algorithm"):
        migrate(plan(a=[1]), plan(a=[1]), "nope")  # type: ignore[arg-type]


def test_node_types_keep_gpu_types_apart():
    old = plan(v=[1, 2], k=[3, None])
    new = plan(x=[3, None], y=[1, 2])
    types = {"v": "v100", "k": "k80", "x": "v100", "y": "k80"}
    res = migrate(old, new, node_types=types)
    assert res.node_map == {"x": "v", "y": "k"}  # not the zero-cost swap: types must match
    untyped = migrate(old, new)
    assert untyped.cost == 0 and untyped.node_map == {"x": "k", "y": "v"}


# ---- brute force ------------------------------------------------------------------------------------
def _relabelings(old: Placement, new: Placement):
    """Every bijection of new nodes onto old nodes of the same size, with every GPU permutation."""
    old_names, new_names = list(old.nodes), list(new.nodes)
    for node_perm in permutations(old_names):
        if any(len(old.nodes[o]) != len(new.nodes[n]) for o, n in zip(node_perm, new_names)):
            continue
        per_node = [list(permutations(range(len(new.nodes[n])))) for n in new_names]
        for gpu_perms in product(*per_node):
            out = {o: [None] * len(old.nodes[o]) for o in old_names}
            for o, n, perm in zip(node_perm, new_names, gpu_perms):
                for u, v in enumerate(perm):
                    out[o][u] = new.nodes[n][v]
            yield Placement({o: tuple(out[o]) for o in old_names})


def _flat_relabelings(old: Placement, new: Placement):
    old_refs = [(n, u) for n, g in old.nodes.items() for u in range(len(g))]
    new_slots = [s for g in new.nodes.values() for s in g]
    for perm in permutations(range(len(new_slots))):
        out = {n: [None] * len(g) for n, g in old.nodes.items()}
        for (n, u), v in zip(old_refs, perm):
            out[n][u] = new_slots[v]
        yield Placement({n: tuple(s) for n, s in out.items()})


@st.composite
def plan_pair(draw, max_nodes=3, max_gpus=3):
    sizes = draw(st.lists(st.integers(1, max_gpus), min_size=1, max_size=max_nodes))
    names = [f"n{i}" for i in range(len(sizes))]
    refs = [(n, u) for n, s in zip(names, sizes) for u in range(s)]

    def one_plan():
        cells = {r: [] for r in refs}
        for j in range(draw(st.integers(0, 5))):
            k = draw(st.integers(1, min(len(refs), 4)))
            where = draw(st.permutations(refs))
            chosen = [r for r in where if len(cells[r]) < 2][:k]
            for r in chosen:
                cells[r].append(str(j))
        return Placement.from_lists({n: [cells[(n, u)] for u in range(s)] for n, s in zip(names, sizes)})

    old, new = one_plan(), one_plan()
    new_names = draw(st.permutations(names))  # logical names may be a relabeling of the physical ones
    new = Placement({nn: new.nodes[n] for nn, n in zip(new_names, names)})
    return old, new


def _check_result(old, new, res):
    gpus_old, gpus_final = old.job_gpus(), res.placement.job_gpus()
    common = set(gpus_old) & set(new.job_gpus())
    assert res.migrated == tuple(sorted(j for j in common if gpus_old[j] != gpus_final[j]))
    assert res.cost == pytest.approx(mapping_cost(old, res.placement))
    assert res.placement.jobs() == new.jobs()
    # the final plan's job_gpus is built per job from the row map: it equals a GPU-by-GPU recount,
    # keys in the same order (by first GPU in node order; jobs sharing that GPU in either order)
    seeded, counted = res.placement.job_gpus(), Placement(res.placement.nodes).job_gpus()
    assert dict(seeded) == dict(counted)
    position = {n: i for i, n in enumerate(res.placement.nodes)}
    first = lambda j: min((position[n], u) for n, u in counted[j])  # noqa: E731
    assert [first(j) for j in seeded] == [first(j) for j in counted]


@settings(max_examples=150, deadline=None)
@given(plan_pair())
def test_tesserae_is_the_brute_force_minimum_over_node_relabelings(pair):
    old, new = pair
    res = migrate(old, new)
    _check_result(old, new, res)
    best = min(mapping_cost(old, p) for p in _relabelings(old, new))
    assert res.cost == pytest.approx(best)
    # each new node lands whole on one physical node: consolidated jobs stay consolidated
    for nn, on in res.node_map.items():
        assert sorted(map(sorted, new.nodes[nn])) == sorted(map(sorted, res.placement.nodes[on]))
    assert sorted(res.node_map.values()) == sorted(old.nodes)


@settings(max_examples=100, deadline=None)
@given(plan_pair(max_nodes=2, max_gpus=3))
def test_flat_is_the_brute_force_minimum_over_gpu_relabelings(pair):
    old, new = pair
    res = migrate(old, new, "flat")
    _check_result(old, new, res)
    best = min(mapping_cost(old, p) for p in _flat_relabelings(old, new))
    assert res.cost == pytest.approx(best)
    assert res.cost <= migrate(old, new).cost + 1e-9  # fewer constraints, never worse


@settings(max_examples=60, deadline=None)
@given(plan_pair())
def test_gavel_rule_relabels_nothing(pair):
    old, new = pair
    same_names = Placement({o: new.nodes[n] for o, n in zip(old.nodes, new.nodes)
                            if len(old.nodes[o]) == len(new.nodes[n])})
    if set(same_names.nodes) != set(old.nodes):
        return  # sizes differ position by position: covered by the error test below
    res = migrate(old, same_names, "gavel")
    _check_result(old, same_names, res)
    assert res.placement == same_names
    assert res.cost >= migrate(old, same_names).cost - 1e-9


def test_gavel_rule_refuses_misaligned_nodes():
    with pytest.raises(InputError, match="without relabeling"):
        migrate(plan(a=[1], b=[2, None]), plan(x=[None, 2], y=[1]), "gavel")


def test_large_nodes_use_the_solver_path():
    # 8-GPU nodes solve one assignment per node pair instead of enumerating 8! permutations
    old = plan(a=[1, 1, 2, 2, 3, 3, 3, 3], b=[4, 4, 4, 4, 4, 4, 4, 4])
    new = plan(a=[4, 4, 4, 4, 4, 4, 4, 4], b=[3, 3, 3, 3, 2, 2, 1, 1])
    res = migrate(old, new)
    assert (res.cost, res.migrated) == (0, ())
    assert res.node_map == {"a": "b", "b": "a"}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.data())
def test_edge_components_match_scipy_connected_components(na, nb, data):
    """The compiled min-label sweep finds scipy's connected components, each labelled by its smallest
    a-item."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from tesserae_slurm.placement.migrate_groups import edge_components

    edges = sorted(data.draw(st.sets(st.tuples(st.integers(0, na - 1), st.integers(0, nb - 1)), min_size=1)))
    ea = np.array([a for a, _ in edges])
    eb = np.array([b for _, b in edges])
    got = edge_components(ea, eb, na, nb)
    graph = coo_matrix((np.ones(len(ea)), (ea, na + eb)), shape=(na + nb, na + nb))
    label = connected_components(graph, directed=False)[1][ea]
    assert len(set(zip(got.tolist(), label.tolist()))) == len(set(got.tolist())) == len(set(label.tolist()))
    assert np.argsort(got, kind="stable").tolist() == np.argsort(label, kind="stable").tolist()
    assert all(got[i] == min(a for a, c in zip(ea.tolist(), got.tolist()) if c == got[i]) for i in range(len(ea)))


@pytest.mark.parametrize("n", [2, 7, 40, 129])
def test_edge_components_on_long_paths(n):
    """Multi-node jobs chain nodes into paths: the smallest a-item sits at the far end of a path and in
    the middle of another; every edge must get it (what the pointer jumping shortens)."""
    import numpy as np

    from tesserae_slurm.placement.migrate_groups import edge_components

    # path 1 on a-items n-1 .. 0 walked backwards through b-items; path 2 on a-items n .. 2n-1 with its
    # smallest item joined in the middle
    edges = {(i, i) for i in range(n)} | {(i, i - 1) for i in range(1, n)}
    mid = n + n // 2
    edges |= {(n + i, n + i) for i in range(n)} | {(n + i + 1, n + i) for i in range(n - 1)} | {(n, mid)}
    ea, eb = (np.array(c) for c in zip(*sorted(edges)))
    got = edge_components(ea, eb, 2 * n, 2 * n)
    assert got.tolist() == [0 if a < n else n for a in ea.tolist()]
