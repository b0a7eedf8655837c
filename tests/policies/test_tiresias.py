"""Tiresias 2D-LAS: the worked example of policies.md §4 round by round, and properties."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policies.policy_helpers import greedy_place, inp, view

from tesserae_slurm.model import InputError
from tesserae_slurm.policies.registry import make_policy
from tesserae_slurm.policies.tiresias import TiresiasPolicy

ROUND = 360.0


def run_rounds(policy, jobs, capacity, rounds, arrivals=None):
    """Drive the policy like the simulator: rank, place greedily with backfill, run 360 s.

    ``jobs``: id -> GPUs. Returns, per round, (time, order, placed set, queue of every job).
    """
    arrivals = arrivals or {j: 0.0 for j in jobs}
    served = {j: 0.0 for j in jobs}
    running: set[str] = set()
    state = policy.initial_state()
    log = []
    for r in range(rounds):
        now = r * ROUND
        views = [view(j, jobs[j], arrivals[j], served=served[j], running=j in running)
                 for j in sorted(jobs, key=lambda j: arrivals[j]) if arrivals[j] <= now]
        ranking, state = policy.rank(inp(views, now=now, gpus=capacity), state)
        running = greedy_place(ranking.order, jobs, capacity)
        log.append((now, list(ranking.order), set(running), {j: q.queue for j, q in state.jobs.items()}))
        for j in running:
            served[j] += ROUND
    return log, state


def test_worked_example_demotion_promotion_and_preemption():
    policy = TiresiasPolicy(queue_limits=(3250,), promote_knob=2)
    log, state = run_rounds(policy, {"A": 4, "B": 1}, capacity=4, rounds=15)
    by_time = {t: (order, placed, queues) for t, order, placed, queues in log}
    for t in (0, 360, 720):  # A runs rounds 1-3, B cannot fit
        assert by_time[t][0] == ["A", "B"] and by_time[t][1] == {"A"}
    # t=1080: A has 4320 GPU-s >= 3250 -> Q1; B runs, A waits (3 GPUs free < 4)
    assert by_time[1080][2] == {"A": 1, "B": 0}
    assert by_time[1080][0] == ["B", "A"] and by_time[1080][1] == {"B"}
    for t in (1440, 2880):
        assert by_time[t][2]["A"] == 1  # not yet: A has waited less than 2 x 1080 s
    # t=3240: A waited 2160 = 2 x 1080 -> back to Q0, behind the running B; still does not fit
    assert by_time[3240][2] == {"A": 0, "B": 0}
    assert by_time[3240][0] == ["B", "A"] and by_time[3240][1] == {"B"}
    assert by_time[4320][2]["B"] == 0  # B at 3240 GPU-s < 3250
    # t=4680: B has 3600 -> Q1; A (service reset at promotion) runs, B is preempted
    assert by_time[4680][2] == {"A": 0, "B": 1}
    assert by_time[4680][0] == ["A", "B"] and by_time[4680][1] == {"A"}
    assert state.promotions == 1 and state.demotions == 2


def test_promotion_off_by_default():
    log, state = run_rounds(TiresiasPolicy(queue_limits=(3250,)), {"A": 4, "B": 1}, capacity=4, rounds=12)
    assert all(queues.get("A") == 1 for t, _, _, queues in log if t >= 1080)
    assert state.promotions == 0


def test_running_jobs_keep_their_place_ahead_of_waiting_ones():
    # Q0 = [A(2), B(4), C(2)] on 4 GPUs: A and C run (B is skipped). Next round the order is A, C, B,
    # so a finished or grown job never makes B and C swap back and forth.
    policy = TiresiasPolicy(queue_limits=(1e9,))
    log, _ = run_rounds(policy, {"A": 2, "B": 4, "C": 2}, capacity=4, rounds=2)
    assert log[0][1] == ["A", "B", "C"] and log[0][2] == {"A", "C"}
    assert log[1][1] == ["A", "C", "B"]


def test_arrivals_join_the_tail_of_q0_and_multi_level_demotion():
    policy = TiresiasPolicy(queue_limits=(100, 200))
    state = policy.initial_state()
    r, state = policy.rank(inp([view("A", 1, 0)], now=0), state)
    assert r.order == ("A",)
    # A ran one round of 360 s: 360 >= 100 and >= 200 -> straight to Q2; new B and C join Q0
    views = [view("A", 1, 0, served=360, running=True), view("B", 1, 100), view("C", 1, 200)]
    r, state = policy.rank(inp(views, now=360), state)
    assert r.order == ("B", "C", "A")
    assert state.jobs["A"].queue == 2 and state.demotions == 1


def test_wall_time_service_variant():
    views = [view("A", 4, 0, served=1000, running=True)]
    gpu_time, wall_time = TiresiasPolicy(queue_limits=(3250,)), TiresiasPolicy(queue_limits=(3250,), service="time")
    _, s_gpu = gpu_time.rank(inp(views, now=0), gpu_time.initial_state())
    _, s_time = wall_time.rank(inp(views, now=0), wall_time.initial_state())
    assert s_gpu.jobs["A"].queue == 1  # 4000 GPU-s
    assert s_time.jobs["A"].queue == 0  # 1000 s


def test_finished_jobs_leave_the_state():
    policy = TiresiasPolicy()
    _, state = policy.rank(inp([view("A"), view("B")]), policy.initial_state())
    _, state = policy.rank(inp([view("B")], now=360), state)
    assert set(state.jobs) == {"B"}


@pytest.mark.parametrize("opts", [{"queue_limits": (100, 50)}, {"queue_limits": (0,)}, {"promote_knob": -1},
                                  {"service": "x"}])
def test_bad_options(opts):
    with pytest.raises(InputError):
        TiresiasPolicy(**opts)


def test_registry_passes_options():
    p = make_policy("tiresias", queue_limits=[3600], promote_knob=4)
    assert p.num_queues == 2 and p.promote_knob == 4


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(0, 6)), min_size=1, max_size=8),
       st.integers(2, 12))
def test_without_promotion_queue_is_a_function_of_service(jobs, rounds):
    """Oracle: with P = 0 a job's queue is the number of limits its GPU-seconds reached; the order is
    a permutation of the active jobs sorted by queue."""
    limits = (1000.0, 3000.0)
    spec = {f"j{i}": g for i, (g, _) in enumerate(jobs)}
    arrivals = {f"j{i}": a * ROUND for i, (_, a) in enumerate(jobs)}
    policy = TiresiasPolicy(queue_limits=limits)
    served = {j: 0.0 for j in spec}
    running: set[str] = set()
    state = policy.initial_state()
    for r in range(rounds):
        now = r * ROUND
        active = [j for j in sorted(spec, key=lambda j: arrivals[j]) if arrivals[j] <= now]
        views = [view(j, spec[j], arrivals[j], served=served[j], running=j in running) for j in active]
        ranking, state = policy.rank(inp(views, now=now, gpus=4), state)
        assert sorted(ranking.order) == sorted(active)
        queues = [state.jobs[j].queue for j in ranking.order]
        assert queues == sorted(queues)
        for j in active:
            assert state.jobs[j].queue == bisect.bisect_right(limits, served[j] * spec[j])
        running = greedy_place(ranking.order, spec, 4)
        for j in running:
            served[j] += ROUND


@pytest.mark.parametrize("limit, demoted_at", [(1440.0, 720.0), (1440.5, 1080.0), (1439.5, 720.0)])
def test_demotion_exactly_at_the_threshold(limit, demoted_at):
    """Worked by hand: A and B need 2 GPUs each, 2 GPUs in all, A first. A runs from t=0 and holds
    2 x 360 = 720 GPU-s per round: 720 at t=360, 1440 at t=720, 2160 at t=1080. Reaching the limit
    demotes (Tiresias: service >= limit), so with the limit at exactly 1440 A leaves Q0 at t=720 and
    B runs; half a GPU-second more and A stays one round longer."""
    log, state = run_rounds(TiresiasPolicy(queue_limits=(limit,)), {"A": 2, "B": 2}, capacity=2, rounds=4)
    for t, order, placed, queues in log:
        if t < demoted_at:
            assert (order, placed, queues) == (["A", "B"], {"A"}, {"A": 0, "B": 0}), t
        elif t == demoted_at:
            assert (order, placed, queues) == (["B", "A"], {"B"}, {"A": 1, "B": 0}), t
    assert state.demotions == 1
