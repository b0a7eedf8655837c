"""Gavel's round mechanism: the §7 round-by-round sequence, resets, deficits, time accounting, selection."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest
from policies.gavel_fakes import TableSpeeds, jv, place_in_order, sched_input

from tesserae_slurm.policies.gavel import GavelLasPolicy
from tesserae_slurm.policies.gavel_rounds import (
    NO_FRACTION_PRIORITY, RoundState, needs_reset, observe, priorities, reset, select,
)


def run_rounds(policy, jobs, gpus, rounds, arrivals=None, round_s=360.0):
    """Drive the policy: place its order on one node, advance executed time; yields per round."""
    arrivals = arrivals or {}
    state, executed = policy.initial_state(), {}
    spec = dict(jobs)
    for r in range(rounds):
        now = r * round_s
        for jid, (g, t) in arrivals.items():
            if t == now:
                spec[jid] = g
        for jid in spec:
            executed.setdefault(jid, 0.0)
        views = [jv(j, g, submit=0.0, executed=executed[j], remaining=1e9) for j, g in spec.items()]
        ranking, state = policy.rank(sched_input(views, f"1x{gpus}", now=now, round_s=round_s), state)
        placed = place_in_order(ranking.order, ranking.pairs, spec, gpus)
        yield r + 1, ranking, state, placed
        for j in placed:
            executed[j] += round_s


def test_worked_round_by_round_sequence():
    # policies.md §7: X = 2/3, 2/3, 1/3 on 2 GPUs, 360 s rounds, no reset in between. By hand: every
    # combination starts at half a round (180 s) and the type's total at 3 x 180; a round adds 360 s
    # to each combination that ran and to the total. Priority = X / (time / total); the two GPUs go
    # to A and B or to C, whichever pair of priorities is higher.
    #   round  A     B     C    total  ran (priorities A, C)
    #   1      180   180   180  540    A B  (2, 1)
    #   2      540   540   180  1260   C    (14/9, 7/3)
    #   3      540   540   540  1620   A B  (2, 1)
    #   4      900   900   540  2340   A B  (26/15, 13/9)
    #   5      1260  1260  540  3060   C    (34/21, 17/9)
    times = {1: (180, 180, 180, 540), 2: (540, 540, 180, 1260), 3: (540, 540, 540, 1620),
             4: (900, 900, 540, 2340), 5: (1260, 1260, 540, 3060)}
    prio = {1: (2, 1), 2: (14 / 9, 7 / 3), 3: (2, 1), 4: (26 / 15, 13 / 9), 5: (34 / 21, 17 / 9)}
    ran = {1: ["A", "B"], 2: ["C"], 3: ["A", "B"], 4: ["A", "B"], 5: ["C"]}
    policy = GavelLasPolicy(packing=False)
    for r, _, state, placed in run_rounds(policy, {"A": 1, "B": 1, "C": 2}, 2, 5):
        a, b, c, total = times[r]
        assert {e[0]: t[0] for e, t in state.rounds.job_time.items()} == {"A": a, "B": b, "C": c}, r
        assert state.rounds.worker_time == (total,) and state.rounds.resets == 1
        got = {e[0]: p[0] for e, p in priorities(state.rounds).items()}
        assert (got["A"], got["B"], got["C"]) == pytest.approx((prio[r][0], prio[r][0], prio[r][1])), r
        assert sorted(placed) == ran[r], r


def test_a_new_job_waits_for_the_next_reset():
    # D arrives at t = 360 into a full cluster; no allocation (priority 0) until the first round at
    # least 1920 s after the first reset (t = 2160 with 360 s rounds)
    policy = GavelLasPolicy(packing=False)
    got = {}
    for r, _, state, placed in run_rounds(policy, {"A": 1, "B": 1}, 2, 8, arrivals={"D": (1, 360.0)}):
        got[r] = (state.rounds.allocation.get(("D",)), state.rounds.last_reset, placed)
    for r in range(2, 7):  # t = 360 .. 1800: still the t = 0 allocation
        assert got[r][0] is None and got[r][1] == 0.0 and sorted(got[r][2]) == ["A", "B"]
    assert got[7][1] == 2160.0 and got[7][0] == pytest.approx((2 / 3,))
    assert sorted(got[7][2]) == ["A", "B"]  # all tied (priority 2, deficit 0): arrival order
    assert "D" in got[8][2]  # D ran least since the reset


def test_reset_every_round_option_reacts_at_once():
    policy = GavelLasPolicy(packing=False, reset_interval_s=0.0)
    rounds = list(run_rounds(policy, {"A": 1, "B": 1}, 2, 3, arrivals={"D": (1, 360.0)}))
    _, _, state, _ = rounds[1]
    assert state.rounds.last_reset == 360.0
    assert state.rounds.allocation[("D",)] == pytest.approx((2 / 3,))
    _, _, state, _ = rounds[2]  # nothing changed since: no reset
    assert state.rounds.last_reset == 360.0 and state.rounds.resets == 2


def test_deficits_settle_at_a_reset():
    # §7 rounds 1-2 (A, B ran 360 s; C ran 360 s), then D arrives at t = 720 with resets allowed
    policy = GavelLasPolicy(packing=False, reset_interval_s=0.0)
    rounds = list(run_rounds(policy, {"A": 1, "B": 1, "C": 2}, 2, 3, arrivals={"D": (1, 720.0)}))
    _, _, state, _ = rounds[2]
    d = state.rounds.deficits
    # should have received X * 720 s; received = time since reset - the initial 180 s
    assert d[("A",)] == pytest.approx((2 / 3 * 720 - 360,))
    assert d[("C",)] == pytest.approx((1 / 3 * 720 - 360,))
    assert d[("D",)] == (0.0,)
    assert state.rounds.job_time[("A",)] == (180.0,)
    assert state.rounds.worker_time == (720.0,)  # 4 combinations x 180


def test_pair_time_is_counted_once_per_combination():
    st = RoundState()
    views = [jv("A"), jv("B"), jv("C")]
    st = observe(st, views, ("a100",), 360.0)
    st = reset(st, 0.0, 360.0, {("A", "B"): (0.8,), ("C",): (0.5,)}, ["A", "B", "C"])
    st = replace(st, scheduled=((("A", "B"), 0), (("C",), 0)))
    views = [jv("A", executed=360.0), jv("B", executed=300.0), jv("C", executed=100.0)]
    st = observe(st, views, ("a100",), 360.0)
    assert st.job_time[("A", "B")] == (180.0 + 360.0,)  # the longer of the two
    assert st.job_time[("A",)] == (180.0,) and st.job_time[("C",)] == (280.0,)
    assert st.worker_time == (4 * 180.0 + 360.0 + 100.0,)


def test_a_job_run_without_being_chosen_is_credited_alone():
    st = observe(RoundState(), [jv("A"), jv("B")], ("a100",), 360.0)
    st = reset(st, 0.0, 360.0, {("A",): (1.0,)}, ["A", "B"])
    st = observe(st, [jv("A", executed=360.0), jv("B", executed=360.0)], ("a100",), 360.0)
    assert st.job_time[("A",)] == (540.0,) and st.job_time[("B",)] == (540.0,)


def test_departures_drop_combinations_and_mark_the_state_dirty():
    st = observe(RoundState(), [jv("A"), jv("B")], ("a100",), 360.0)
    st = reset(st, 0.0, 360.0, {("A", "B"): (1.0,)}, ["A", "B"])
    assert not st.dirty
    st = observe(st, [jv("A")], ("a100",), 360.0)
    assert st.dirty and set(st.job_time) == {("A",)} and ("A", "B") not in st.allocation


def test_selection_skips_taken_jobs_and_backfills():
    st = observe(RoundState(), [jv("A"), jv("B"), jv("C", 2), jv("D")], ("a100",), 360.0)
    alloc = {("A", "B"): (0.9,), ("A",): (0.1,), ("C",): (0.5,), ("D",): (0.3,)}
    st = reset(st, 0.0, 360.0, alloc, ["A", "B", "C", "D"])
    prios = priorities(st)
    chosen = select(st, prios, {"A": 1, "B": 1, "C": 2, "D": 1}, [2], [0], lambda j, w: True)
    # (A,B) first (0.9 / 0.2), then C (2 GPUs) does not fit in the 1 left: skipped, D backfills;
    # A alone is skipped because A already runs in the pair
    assert chosen == [(("A", "B"), 0), (("D",), 0)]


def test_pairs_are_considered_only_where_the_lp_gave_them_time():
    st = observe(RoundState(), [jv("A"), jv("B")], ("k80", "v100"), 360.0)
    st = reset(st, 0.0, 360.0, {("A", "B"): (0.0, 1.0)}, ["A", "B"])
    chosen = select(st, priorities(st), {"A": 1, "B": 1}, [1, 0], [0, 1], lambda j, w: True)
    assert chosen == [(("A",), 0)]  # on k80 only singles (priority 0); v100 has no GPU


def test_policy_chooses_pairs_and_puts_them_first():
    look = TableSpeeds(pair={("a", "b", "a100"): (0.9, 0.9)})
    policy = GavelLasPolicy()
    views = [jv("A", 1, "a"), jv("B", 1, "b"), jv("C", 2, "c")]
    ranking, state = policy.rank(sched_input(views, "1x2", look), policy.initial_state())
    assert ("A", "B") in state.rounds.allocation
    assert set(ranking.order) == {"A", "B", "C"} and len(ranking.order) == 3
    for a, b in ranking.pairs:
        assert {a, b} == {"A", "B"}


def test_a_reset_is_due_exactly_when_the_interval_has_passed_since_the_last():
    st = replace(RoundState(), dirty=True, last_reset=100.0)
    assert [needs_reset(st, now, 1920.0) for now in (2019.0, 2020.0)] == [False, True]
    assert not needs_reset(replace(st, dirty=False), 5000.0, 1920.0)
    assert needs_reset(replace(st, last_reset=None), 0.0, 1920.0)


def test_a_job_run_without_being_chosen_counts_on_its_likeliest_gpu_type():
    # two types; A's X favours the second (0.2, 0.8), B's ties (0.5, 0.5): the first type wins a tie
    st = observe(RoundState(), [jv("A"), jv("B")], ("k80", "v100"), 360.0)
    st = reset(st, 0.0, 360.0, {("A",): (0.2, 0.8), ("B",): (0.5, 0.5)}, ["A", "B"])
    st = observe(st, [jv("A", executed=300.0), jv("B", executed=100.0)], ("k80", "v100"), 360.0)
    assert st.job_time[("A",)] == (180.0, 480.0) and st.job_time[("B",)] == (280.0, 180.0)
    assert st.worker_time == (360.0 + 100.0, 360.0 + 300.0)


def test_selection_keeps_walking_past_what_cannot_run_or_does_not_fit():
    st = observe(RoundState(), [jv("A", 2), jv("B"), jv("C"), jv("D")], ("a100",), 360.0)
    st = reset(st, 0.0, 360.0, {("A",): (0.9,), ("B",): (0.5,), ("C",): (0.3,), ("C", "D"): (0.0,),
                                 ("D",): (0.1,)}, ["A", "B", "C", "D"])
    gpus = {"A": 2, "B": 1, "C": 1, "D": 1}
    # 1 GPU: A (2 GPUs) does not fit, B may not run on the type, (C, D) has no time there: C
    chosen = select(st, priorities(st), gpus, [1], [0], lambda j, w: j != "B")
    assert chosen == [(("C",), 0)]
    assert select(st, priorities(st), gpus, [3], [0], lambda j, w: True) == [(("A",), 0), (("B",), 0)]


def test_no_allocation_means_priority_zero_and_no_run_time_the_no_fraction_stand_in():
    st = observe(RoundState(), [jv("A"), jv("B")], ("a100",), 360.0)
    st = reset(st, 0.0, 360.0, {("A",): (0.0,)}, ["A", "B"])
    assert priorities(st) == {("A",): (0.0,), ("B",): (0.0,)}
    st = replace(st, allocation=MappingProxyType({("A",): (0.5,)}), job_time=MappingProxyType({("A",): (0.0,)}),
                 worker_time=(0.0,))
    assert priorities(st) == {("A",): (0.5 * NO_FRACTION_PRIORITY,)}
