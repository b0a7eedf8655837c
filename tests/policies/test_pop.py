"""POP: random k-way partitions of jobs and cluster, one LP per part, merged allocations."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from policies.gavel_fakes import TableSpeeds, jv, sched_input
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.policies.gavel import GavelLasPolicy
from tesserae_slurm.policies.gavel_lp import solve_las_allocation
from tesserae_slurm.policies.pop import PopPolicy, merge, partition, sub_capacity

PAIRS = TableSpeeds(pair={(a, b, t): (0.7, 0.6) for a, b in itertools.product("xyz", repeat=2)
                          for t in ("k80", "v100")})


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 60), st.integers(1, 9), st.integers(0, 2**31))
def test_partition_is_disjoint_and_complete(n, k, seed):
    parts = partition(n, k, np.random.default_rng(seed))
    assert len(parts) == k
    flat = np.concatenate(parts) if parts else np.zeros(0)
    assert sorted(flat.tolist()) == list(range(n))


def test_partition_is_roughly_uniform():
    parts = partition(4000, 4, np.random.default_rng(0))
    assert all(900 < len(p) < 1100 for p in parts)


def test_sub_capacity_is_the_floor():
    assert sub_capacity({"k80": 10, "v100": 3}, 4) == {"k80": 2, "v100": 0}


def views_for(n):
    return [jv(f"j{i}", int([1, 1, 2, 4][i % 4]), "xyz"[i % 3]) for i in range(n)]


def test_parts_are_seeded_and_change_with_the_reset_count():
    policy = PopPolicy(k=3)
    inp = sched_input(views_for(30), "4x4:v100", PAIRS, seed=11)
    again = sched_input(views_for(30), "4x4:v100", PAIRS, seed=11)
    ids = lambda parts: [[v.id for v in p] for p in parts]  # noqa: E731
    assert ids(policy.parts(inp, 0)) == ids(policy.parts(again, 0))
    assert ids(policy.parts(inp, 0)) != ids(policy.parts(inp, 1))
    assert ids(policy.parts(inp, 0)) != ids(policy.parts(sched_input(views_for(30), "4x4:v100", PAIRS, seed=12), 0))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_each_part_fits_its_share_and_pairs_stay_inside_parts(k):
    views = views_for(40)
    inp = sched_input(views, "3x4:k80,4x4:v100", PAIRS, seed=5)
    policy = PopPolicy(k=k)
    state = policy.initial_state()
    alloc, _ = policy.allocate(inp, state)
    parts = [{v.id for v in p} for p in policy.parts(inp, state.rounds.resets)]
    part_of = {j: i for i, p in enumerate(parts) for j in p}
    gpus = {v.id: v.num_gpus for v in views}
    share = sub_capacity({"k80": 12, "v100": 16}, k)
    for a, b in alloc.pairs:
        assert part_of[a] == part_of[b]
    for p, members in enumerate(parts):
        for w, t in enumerate(alloc.gpu_types):
            used = sum(alloc.single[alloc.job_ids.index(j), w] * gpus[j] for j in members)
            used += sum(row[w] * gpus[a] for (a, _), row in zip(alloc.pairs, alloc.pair_x) if part_of[a] == p)
            assert used <= share[t] + 1e-7
    assert max(alloc.job_totals().values()) <= 1 + 1e-7
    assert alloc.status == "optimal"


def test_one_part_is_plain_gavel():
    views = views_for(16)
    inp = sched_input(views, "2x4", PAIRS)
    pop, _ = PopPolicy(k=1).allocate(inp, PopPolicy(k=1).initial_state())
    gavel, _ = GavelLasPolicy().allocate(inp, GavelLasPolicy().initial_state())
    assert pop.objective == pytest.approx(gavel.objective)
    assert pop.entries().keys() == gavel.entries().keys()


def test_merge_keeps_every_job_and_the_worst_status():
    a = solve_las_allocation([jv("A"), jv("B")], {"a100": 1}, PAIRS)
    b = replace(solve_las_allocation([jv("C")], {"a100": 1}, PAIRS), status="time_limit")
    m = merge([a, b], ["A", "B", "C"], ("a100",))
    assert a.status == "optimal" and m.status == "time_limit"
    assert m.job_ids == ("A", "B", "C") and m.pairs == a.pairs
    assert m.objective == pytest.approx(min(a.objective, b.objective))
    assert m.job_totals()["C"] == pytest.approx(b.job_totals()["C"])


def test_pop_rounds_use_the_whole_cluster():
    # 5 one-GPU jobs, k = 2 on 5 GPUs: parts get 2 GPUs each, but all 5 jobs can run
    views = [jv(f"j{i}") for i in range(5)]
    policy = PopPolicy(k=2, packing=False)
    ranking, state = policy.rank(sched_input(views, "1x5"), policy.initial_state())
    assert len(state.rounds.scheduled) == 5
    assert sorted(ranking.order) == [v.id for v in views]


def test_ftf_objective_in_parts():
    views = [jv(f"j{i}", remaining=1000.0 * (i + 1)) for i in range(8)]
    policy = PopPolicy(k=2, objective="ftf", packing=False)
    ranking, state = policy.rank(sched_input(views, "1x4", seed=3), policy.initial_state())
    assert set(state.ftf) == {v.id for v in views}
    assert state.last_status == "optimal"
