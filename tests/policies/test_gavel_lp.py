"""Gavel's LAS allocation LP: hand-solved cases, a brute-force grid oracle, feasibility properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from policies.gavel_fakes import TableSpeeds, jv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, InputError, Job
from tesserae_slurm.policies.gavel_lp import build_problem, capacity_of, solve_las_allocation


def shares_by_hand(alloc, views, lookup, capacity):
    """Each job's normalized LAS share, computed with plain loops from the allocation's own numbers."""
    total = sum(capacity.values())
    by_id = {v.id: v for v in views}
    out = {}
    for v in views:
        tprop = sum(lookup.isolated(v.job, t) * n for t, n in capacity.items()) / total
        acc = 0.0
        i = alloc.job_ids.index(v.id)
        for w, t in enumerate(alloc.gpu_types):
            acc += alloc.single[i, w] * lookup.isolated(v.job, t)
        for (a, b), row in zip(alloc.pairs, alloc.pair_x):
            if v.id in (a, b):
                other = by_id[b if v.id == a else a]
                for w, t in enumerate(alloc.gpu_types):
                    if row[w] > 0:
                        sa, _ = lookup.packed(v.job, other.job, t)
                        acc += row[w] * sa
        out[v.id] = acc * v.num_gpus / (v.priority_weight * tprop) if tprop > 0 else 0.0
    return out


def assert_feasible(alloc, views, lookup, capacity, tol=1e-7):
    gpus = {v.id: v.num_gpus for v in views}
    assert np.all(alloc.single >= -tol) and np.all(alloc.pair_x >= -tol)
    for j, total in alloc.job_totals().items():
        assert total <= 1 + tol, (j, total)
    for w, t in enumerate(alloc.gpu_types):
        used = sum(alloc.single[i, w] * gpus[j] for i, j in enumerate(alloc.job_ids))
        used += sum(row[w] * gpus[a] for (a, _), row in zip(alloc.pairs, alloc.pair_x))
        assert used <= capacity[t] + tol, (t, used)
        for i, j in enumerate(alloc.job_ids):  # no time where the job cannot run
            if alloc.single[i, w] > tol:
                assert gpus[j] <= capacity[t] and lookup.isolated(next(v.job for v in views if v.id == j), t) > 0
    by_id = {v.id: v for v in views}
    for (a, b), row in zip(alloc.pairs, alloc.pair_x):
        assert gpus[a] == gpus[b]
        for w, t in enumerate(alloc.gpu_types):
            if row[w] > tol:
                got = lookup.packed(by_id[a].job, by_id[b].job, t)
                assert got is not None and min(got) > 0 and gpus[a] <= capacity[t]


def test_hand_solved_unique_case():
    # policies.md §5: 2 GPUs; A, B (1 GPU), C (2 GPUs) -> 2/3, 2/3, 1/3, every constraint tight
    views = [jv("A"), jv("B"), jv("C", 2)]
    alloc = solve_las_allocation(views, Cluster.from_spec("1x2"), TableSpeeds())
    assert alloc.status == "optimal"
    assert alloc.single[:, 0] == pytest.approx([2 / 3, 2 / 3, 1 / 3], abs=1e-7)
    assert alloc.objective == pytest.approx(2 / 3)
    assert alloc.pairs == ()


def test_packing_beats_time_sharing_when_the_pair_is_fast():
    # one GPU, A and B packed run at 0.6 / 0.7. Packed for y, A alone for a = 1 - y: equalize
    # a + 0.6 y = 0.7 y -> a = y / 10 -> y = 10/11, share 7/11 (> 0.5 time-sharing, > 0.6 always packed)
    look = TableSpeeds(pair={("a", "b", "a100"): (0.6, 0.7)})
    alloc = solve_las_allocation([jv("A", model="a"), jv("B", model="b")], Cluster.from_spec("1x1"), look)
    assert alloc.objective == pytest.approx(7 / 11)
    assert alloc.pairs == (("A", "B"),)
    assert alloc.pair_x[0, 0] == pytest.approx(10 / 11)
    assert alloc.single[:, 0] == pytest.approx([1 / 11, 0.0], abs=1e-7)


def test_mixed_packing_and_time_sharing_by_hand():
    # pair speeds (0.9, 0.3): equalize A = 0.9 y, B = b + 0.3 y with b + y = 1 -> y = 0.625, share 0.5625
    look = TableSpeeds(pair={("a", "b", "a100"): (0.9, 0.3)})
    alloc = solve_las_allocation([jv("A", model="a"), jv("B", model="b")], Cluster.from_spec("1x1"), look)
    assert alloc.objective == pytest.approx(0.5625)
    assert alloc.pair_x[0, 0] == pytest.approx(0.625)
    assert alloc.single[:, 0] == pytest.approx([0.0, 0.375], abs=1e-7)


def grid_max_min(views, lookup, capacity, packing, steps):
    """Brute force over a grid of every combination's time fraction (one GPU type)."""
    (gtype, n_gpus), = capacity.items()
    combos = [(v,) for v in views if v.num_gpus <= n_gpus and lookup.isolated(v.job, gtype) > 0]
    if packing:
        for a, b in itertools.combinations(views, 2):
            got = lookup.packed(a.job, b.job, gtype)
            if a.num_gpus == b.num_gpus <= n_gpus and got is not None and min(got) > 0:
                combos.append((a, b))
    grid = np.linspace(0.0, 1.0, steps + 1)
    pts = np.array(list(itertools.product(grid, repeat=len(combos))))
    share = {v.id: np.zeros(len(pts)) for v in views}
    used = np.zeros(len(pts))
    time_of = {v.id: np.zeros(len(pts)) for v in views}
    for c, combo in enumerate(combos):
        x = pts[:, c]
        used += x * combo[0].num_gpus
        speeds = ((lookup.isolated(combo[0].job, gtype),) if len(combo) == 1
                  else lookup.packed(combo[0].job, combo[1].job, gtype))
        for v, s in zip(combo, speeds):
            share[v.id] += x * s * v.num_gpus / (v.priority_weight * lookup.isolated(v.job, gtype))
            time_of[v.id] += x
    ok = used <= n_gpus + 1e-12
    for t in time_of.values():
        ok &= t <= 1 + 1e-12
    runnable = [v.id for v in views if any(v in c for c in combos)]
    mins = np.min([share[j] for j in runnable], axis=0)
    return float(mins[ok].max())


@pytest.mark.parametrize("packing", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_lp_optimum_matches_a_grid_oracle(seed, packing):
    rng = np.random.default_rng(seed)
    models = ["a", "b", "c"]
    pair = {(x, y, "a100"): (float(rng.uniform(0.2, 0.95)), float(rng.uniform(0.2, 0.95)))
            for x, y in itertools.combinations_with_replacement(models, 2)}
    iso = {(m, "a100"): float(rng.uniform(0.5, 2.0)) for m in models}
    look = TableSpeeds(iso, pair)
    views = [jv("A", 1, "a", weight=float(rng.choice([1.0, 2.0]))), jv("B", 1, "b"), jv("C", 1, "c")]
    cap = {"a100": 2}
    alloc = solve_las_allocation(views, cap, look, packing=packing)
    assert_feasible(alloc, views, look, cap)
    by_hand = shares_by_hand(alloc, views, look, cap)
    assert alloc.objective == pytest.approx(min(by_hand.values()), abs=1e-7)
    steps = 6 if packing else 24  # 6 combos x 7 points / 3 combos x 25 points
    oracle = grid_max_min(views, look, cap, packing, steps)
    # the LP's point is feasible with the share it claims (so <= the optimum) and at least as good
    # as every grid point: it is optimal up to the grid's resolution
    assert alloc.objective >= oracle - 1e-7


def test_grid_oracle_equals_the_lp_when_the_optimum_is_on_the_grid():
    look = TableSpeeds(pair={("a", "b", "a100"): (0.9, 0.3)})
    views = [jv("A", model="a"), jv("B", model="b")]
    oracle = grid_max_min(views, look, {"a100": 1}, True, 40)  # 0.625 and 0.375 are on the grid
    alloc = solve_las_allocation(views, {"a100": 1}, look)
    assert oracle == pytest.approx(0.5625)
    assert alloc.objective == pytest.approx(oracle)


def test_pair_variables_only_for_equal_gpu_counts_and_feasible_pairs():
    look = TableSpeeds(pair={("a", "a", "a100"): (0.5, 0.5), ("a", "b", "a100"): (0.0, 0.8),
                             ("a", "c", "a100"): (0.7, 0.7)})
    views = [jv("A1", 1, "a"), jv("A2", 1, "a"), jv("B", 1, "b"), jv("C2", 2, "c"), jv("A3", 2, "a"),
             jv("N", 1, "a", no_pack=True), jv("Big", 8, "a"), jv("Big2", 8, "a")]
    prob = build_problem(views, Cluster.from_spec("1x4"), look, packing=True)
    pairs = {(prob.job_ids[a], prob.job_ids[b]) for a, b in zip(prob.var_a, prob.var_b) if b >= 0}
    # A1-A2 (same model, 1 GPU) and C2-A3 (2 GPUs); not A-B (a zero speed), not 1 GPU with 2 GPUs,
    # not the no-pack job, not the 8-GPU jobs (they exceed the 4 GPUs)
    assert pairs == {("A1", "A2"), ("C2", "A3")}
    singles = {prob.job_ids[a] for a, b in zip(prob.var_a, prob.var_b) if b < 0}
    assert singles == {"A1", "A2", "B", "C2", "A3", "N"}
    assert build_problem(views, Cluster.from_spec("1x4"), look, packing=False).num_vars == 6


def test_jobs_that_cannot_run_are_left_out_of_the_minimum():
    views = [jv("A"), jv("Huge", 8)]
    alloc = solve_las_allocation(views, Cluster.from_spec("1x4"), TableSpeeds())
    assert alloc.single[:, 0] == pytest.approx([1.0, 0.0])
    assert alloc.objective == pytest.approx(4.0 / 4.0)  # A alone: share = X * 1 GPU


def test_heterogeneous_types_use_the_proportional_normalization():
    # A is 3x faster on v100 than on k80, B the same on both; one GPU of each.
    look = TableSpeeds(iso={("a", "v100"): 3.0, ("a", "k80"): 1.0})
    views = [jv("A", model="a"), jv("B", model="b")]
    cap = {"k80": 1, "v100": 1}
    alloc = solve_las_allocation(views, cap, look)
    assert_feasible(alloc, views, look, cap)
    by_hand = shares_by_hand(alloc, views, look, cap)
    # B can reach at most 1 (all its time at speed 1, T_prop = 1); A alone on the v100 gets 3 / 2 > 1
    assert alloc.objective == pytest.approx(1.0)
    assert min(by_hand.values()) == pytest.approx(1.0)


@st.composite
def instances(draw):
    n_types = draw(st.integers(1, 2))
    types = ["k80", "v100"][:n_types]
    cap = {t: draw(st.integers(1, 6)) for t in types}
    models = ["a", "b", "c"]
    iso = {(m, t): draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) for m in models for t in types}
    pair = {}
    for x, y in itertools.combinations_with_replacement(models, 2):
        for t in types:
            if draw(st.booleans()):
                pair[(x, y, t)] = (draw(st.sampled_from([0.0, 0.3, 0.6, 0.9])), draw(st.sampled_from([0.3, 0.6, 0.9])))
    n = draw(st.integers(1, 9))
    views = [jv(f"j{i}", draw(st.sampled_from([1, 1, 2, 4])), draw(st.sampled_from(models)),
                weight=draw(st.sampled_from([1.0, 2.0]))) for i in range(n)]
    return views, cap, TableSpeeds(iso, pair), draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_allocations_are_feasible_and_at_least_equal_share(case):
    views, cap, look, packing = case
    alloc = solve_las_allocation(views, cap, look, packing=packing)
    assert_feasible(alloc, views, look, cap)
    by_hand = shares_by_hand(alloc, views, look, cap)
    prob = build_problem(views, cap, look, packing)
    runnable = [prob.job_ids[i] for i in np.flatnonzero(prob.runnable())]
    if not runnable:
        assert alloc.status == "empty"
        return
    assert alloc.status == "optimal"
    assert alloc.objective == pytest.approx(min(by_hand[j] for j in runnable), abs=1e-6)
    # Gavel's isolated equal share is feasible, so the optimum is at least as good
    iso_alloc = prob.to_allocation(prob.isolated_share(), "fallback", 0.0)
    iso_share = shares_by_hand(iso_alloc, views, look, cap)
    assert alloc.objective >= min(iso_share[j] for j in runnable) - 1e-7


def test_time_limit_is_reported_and_the_fallback_is_feasible():
    views = [jv(f"j{i}", 1, "abc"[i % 3]) for i in range(150)]
    look = TableSpeeds(pair={(x, y, "a100"): (0.6, 0.7) for x, y in itertools.product("abc", repeat=2)})
    cap = {"a100": 32}
    alloc = solve_las_allocation(views, cap, look, time_limit_s=1e-9)
    assert alloc.hit_time_limit
    assert_feasible(alloc, views, look, cap)


@pytest.mark.parametrize("kw", [{"time_limit_s": 0}, {"time_limit_s": -1.0}, {"time_limit_s": True},
                                {"method": "simplex"}])
def test_bad_solver_options(kw):
    with pytest.raises(InputError):
        solve_las_allocation([jv("A")], {"a100": 1}, TableSpeeds(), **kw)


def test_bad_inputs():
    with pytest.raises(InputError):
        solve_las_allocation([jv("A"), jv("A")], {"a100": 1}, TableSpeeds())
    with pytest.raises(InputError):
        solve_las_allocation([jv("A", weight=0.0)], {"a100": 1}, TableSpeeds())
    with pytest.raises(InputError):
        capacity_of({"a100": -1})


def test_capacity_of_keeps_a_type_with_no_gpus_and_sorts_types_by_name():
    """A GPU type with none free (all drained, say) is a type with capacity 0, not bad input."""
    assert list(capacity_of({"v100": 0, "a100": 2}).items()) == [("a100", 2), ("v100", 0)]
    assert capacity_of(Cluster.from_spec("1x2:v100,1x4:a100,1x4:v100")) == {"a100": 4, "v100": 6}


def test_empty_problems():
    alloc = solve_las_allocation([], {"a100": 4}, TableSpeeds())
    assert alloc.status == "empty" and alloc.entries() == {}
    alloc = solve_las_allocation([Job("A", 1, "m")], {"a100": 1}, TableSpeeds({("m", "a100"): 0.0}))
    assert alloc.status == "empty" and alloc.single.sum() == 0.0
