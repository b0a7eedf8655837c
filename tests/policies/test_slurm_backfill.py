"""slurm-backfill: hand-worked cases per rule, the limit model, and two properties on small instances
(one node: the same starts as EASY stated with shadow time and extra GPUs, tests/oracles; several
nodes, policy + engine run forward by events: the reserved job never starts later than reserved)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.easy_backfill import easy_starts
from policies.policy_helpers import ConstantSpeeds

from tesserae_slurm.presets import get_config
from tesserae_slurm.engine import RoundRequest, decide
from tesserae_slurm.model import Cluster, InputError, Job, JobView, Placement
from tesserae_slurm.policies.base import SchedulingInput
from tesserae_slurm.policies.registry import make_policy
from tesserae_slurm.policies.slurm_backfill import LIMIT_STEPS, SlurmBackfillPolicy, modeled_limit
from tesserae_slurm.profiles import profile_from_spec
from tesserae_slurm.sim.invariants import check_kept
from tesserae_slurm.sim.rounds import without

H = 3600.0
ENGINE = get_config("slurm-backfill").engine
PROFILE = profile_from_spec("a100")


def job(jid: str, gpus: int, limit: float) -> Job:
    return Job(jid, gpus, "resnet50", "64", time_limit=limit)


def view(jid: str, gpus: int, limit: float, submit: float = 0.0, *, ran: float | None = None,
         duration: float | None = None) -> JobView:
    """``ran``: seconds it has run (then it is running)."""
    return JobView(job(jid, gpus, limit), submit, executed_time=ran or 0.0, running=ran is not None,
                   total_work=duration or limit)


def plan(views: Sequence[JobView], now: float = 0.0, cluster: str = "1x8", placement: Placement | None = None,
         policy: SlurmBackfillPolicy | None = None):
    inp = SchedulingInput(now, 360.0, tuple(views), Cluster.from_spec(cluster), ConstantSpeeds(), 0, placement)
    return (policy or SlurmBackfillPolicy()).backfill(inp)


# ---- one rule per case (one node of 8 GPUs unless said) ------------------------------------------
def test_short_job_fills_the_hole_before_the_reservation():
    # At 1 h, R has run 1 h of its 3 h limit on 6 GPUs: it ends by 3 h. A (all 8 GPUs) cannot start:
    # reserved at 3 h. B (2 GPUs, limit 1 h) fits in the 2 free GPUs and ends by 2 h, before 3 h: it starts.
    b = plan([view("R", 6, 3 * H, ran=1 * H), view("A", 8, 1 * H), view("B", 2, 1 * H)], now=1 * H)
    assert b.reservation == ("A", 3 * H)  # R's end by its limit: started at 0, limit 3 h
    assert b.started == ("B",) and b.held == ("A",)


def test_a_job_whose_limit_ends_after_the_reservation_waits_when_it_needs_the_reserved_gpus():
    # R (6 GPUs) ends by 2 h; A needs all 8 then. B (2 GPUs) fits now, but its limit (3 h) runs past
    # 2 h on GPUs A needs: B waits.
    b = plan([view("R", 6, 2 * H, ran=0.0), view("A", 8, 1 * H), view("B", 2, 3 * H)])
    assert b.reservation == ("A", 2 * H)
    assert b.started == () and b.held == ("A", "B")


def test_a_long_job_starts_when_it_leaves_the_reserved_gpus_alone():
    # A needs 4 at 2 h, when 8 are free: 4 extra. B (2 GPUs, limit 10 h) fits in those: it starts.
    b = plan([view("R", 6, 2 * H, ran=0.0), view("A", 4, 1 * H), view("B", 2, 10 * H)])
    assert b.reservation == ("A", 2 * H) and b.started == ("B",)


def test_without_backfill_room_lower_jobs_wait_even_if_short():
    # 0 GPUs free now: nothing starts, however short.
    b = plan([view("R", 8, 2 * H, ran=0.0), view("A", 4, 1 * H), view("B", 1, 60.0)])
    assert b.started == () and b.held == ("A", "B")


def test_reservation_is_per_node_on_several_nodes():
    # 2 nodes x 4. n0: R1 (4 GPUs, ends 5 h); n1: R2 (2 GPUs, ends 1 h). A (4 GPUs, one node) is reserved at
    # 1 h on n1. B (2 GPUs, limit 10 h) fits now only on n1 -- A's node -- so it waits; C (2 GPUs, limit
    # 30 min) ends before 1 h and starts.
    cluster = Cluster.from_spec("2x4")
    now, current = 0.0, Placement.empty(cluster)
    d = decide(RoundRequest(cluster, (job("R1", 4, 5 * H), job("R2", 2, 1 * H)), current, (), ENGINE), PROFILE)
    views = [view("R1", 4, 5 * H, ran=0.0), view("R2", 2, 1 * H, ran=0.0), view("A", 4, 1 * H),
             view("B", 2, 10 * H), view("C", 2, 0.5 * H)]
    b = plan(views, now, "2x4", d.placement)
    assert b.reservation == ("A", 1 * H)
    assert b.started == ("C",) and b.held == ("A", "B")


def test_priority_weights_reorder_the_queue():
    # Slurm's defaults (weights 0): submit order. PriorityWeightJobSize: the 4-GPU job first;
    # with PriorityFavorSmall: the 1-GPU job first. PriorityWeightAge: the older job first.
    views = [view("R", 8, 2 * H, ran=0.0), view("small", 1, H, submit=0.0), view("big", 4, H, submit=10.0)]
    assert plan(views).held == ("small", "big")
    assert plan(views, policy=SlurmBackfillPolicy(weight_job_size=1000)).held == ("big", "small")
    assert plan(views, policy=SlurmBackfillPolicy(weight_job_size=1000, favor_small=True)).held == ("small", "big")
    aged = [view("R", 8, 2 * H, ran=0.0), view("big", 4, H, submit=0.0), view("small", 1, H, submit=3 * H)]
    # age outweighs size here: big waited 4 h (of max 4 h: 1000), small 1 h (250 + 125 for size)
    p = SlurmBackfillPolicy(weight_age=1000, weight_job_size=1000, favor_small=True, max_age_s=4 * H)
    assert plan(aged, now=4 * H, policy=p).held == ("big", "small")
    # age factor: min(wait, max age) / max age; job size: GPUs / cluster GPUs (8): 1000 * 4 / 8
    p = SlurmBackfillPolicy(weight_age=1000, weight_job_size=1000, max_age_s=2 * H)
    assert p.priority(view("x", 4, H, submit=0.0), 1 * H, 8) == 500 + 500
    assert p.priority(view("x", 4, H, submit=0.0), 9 * H, 8) == 1000 + 500


# ---- time limits -------------------------------------------------------------------------------
def _limit_by_hand(duration: float, job_id: str, seed: int, f: float, max_s: float) -> float:
    """The module doc's model step by step: u from the hash of (seed, job id), the first round value at
    or above duration * (1 + f * u) (whole days beyond 3 days), at most max_s, never below the duration."""
    u = int(hashlib.blake2b(f"{seed}:{job_id}".encode(), digest_size=8).hexdigest(), 16) / 2.0 ** 64
    want = duration * (1.0 + f * u)
    steps = [m * 60.0 for m in (15, 30, 60, 120, 240, 480, 720)] + [d * 86400.0 for d in range(1, 400)]
    return max(duration, min(next(s for s in steps if s >= want), max_s))


def test_limit_model_is_the_documented_hash_round_values_and_never_below_the_duration():
    for d in (60.0, 1000.0, 5000.0, 50_000.0, 400_000.0, 900_000.0):
        for jid, seed in (("j1", 0), ("j2", 0), ("j1", 7)):
            lim = modeled_limit.__wrapped__(d, jid, seed, 3.0, 7 * 86400.0)  # computed, not the cached value
            assert lim == _limit_by_hand(d, jid, seed, 3.0, 7 * 86400.0)
            assert lim >= d
            assert lim in LIMIT_STEPS or lim % 86400 == 0 or lim == d
    assert modeled_limit(1000.0, "j1", 0, 0.0, 7 * 86400.0) == 30 * 60  # f = 0: 1000 s rounded up to 30 min
    assert modeled_limit(900_000.0, "j1", 0, 3.0, 7 * 86400.0) == 900_000.0  # beyond MaxTime: the duration
    # the draw depends on the seed and the job: not one factor for every job
    assert len({modeled_limit(3000.0, f"j{i}", 0, 3.0, 7 * 86400.0) for i in range(20)}) > 1
    week = 7 * 86400.0
    assert any(modeled_limit(3000.0, f"j{i}", 0, 3.0, week) != modeled_limit(3000.0, f"j{i}", 1, 3.0, week)
               for i in range(20))
    ratios = [3000.0 / modeled_limit(3000.0, f"j{i}", 0, 3.0, 7 * 86400.0) for i in range(400)]
    assert 0.2 < sum(ratios) / len(ratios) < 0.46  # users ask several times what they use


def test_limit_modes_trace_model_exact():
    v = JobView(job("a", 1, 2 * H), 0.0, total_work=1000.0)
    unknown = JobView(Job("b", 1, "resnet50", "64"), 0.0, total_work=1000.0)
    assert SlurmBackfillPolicy().time_limit(v, 0) == 2 * H
    assert SlurmBackfillPolicy().time_limit(unknown, 0) == _limit_by_hand(1000.0, "b", 0, 3.0, 7 * 86400.0)
    assert SlurmBackfillPolicy(limit="model").time_limit(v, 0) == _limit_by_hand(1000.0, "a", 0, 3.0, 7 * 86400.0)
    assert SlurmBackfillPolicy(limit="exact").time_limit(v, 0) == 1000.0
    no_duration = JobView(Job("c", 1, "resnet50", "64"), 0.0)
    assert SlurmBackfillPolicy(limit_max_s=3 * H).time_limit(no_duration, 0) == 3 * H  # Slurm: MaxTime


def test_the_limit_factor_given_by_name_sets_the_modeled_limits():
    """``--policy-opt limit_f=...`` reaches the model: limits drawn with that factor, not the default."""
    p = make_policy("slurm-backfill", limit_f=0.5)
    views = [JobView(Job(f"j{i}", 1, "resnet50", "64"), 0.0, total_work=3000.0) for i in range(20)]
    got = [p.time_limit(v, 0) for v in views]
    assert got == [_limit_by_hand(3000.0, f"j{i}", 0, 0.5, 7 * 86400.0) for i in range(20)]
    assert got != [SlurmBackfillPolicy().time_limit(v, 0) for v in views]


def test_a_running_job_past_its_limit_is_expected_to_end_now_not_in_the_past():
    # R has run 2 h of a 1 h limit (slower GPUs than the limit assumed): Slurm would end it any moment.
    # A, waiting for R's 8 GPUs, is reserved now; an end in the past would reserve it an hour ago.
    b = plan([view("R", 8, 1 * H, ran=2 * H), view("A", 8, 1 * H)], now=5 * H)
    assert b.reservation == ("A", 5 * H)


def test_only_the_first_max_job_test_waiting_jobs_are_considered():
    # bf_max_job_test = 2: the third waiting job is not tested this round, though it would fit
    views = [view("A", 1, H), view("B", 1, H), view("C", 1, H)]
    b = plan(views, policy=SlurmBackfillPolicy(max_job_test=2))
    assert b.started == ("A", "B") and b.held == ("C",)
    assert plan(views, policy=SlurmBackfillPolicy(max_job_test=3)).started == ("A", "B", "C")


# ---- properties --------------------------------------------------------------------------------
JOB = st.tuples(st.integers(1, 8), st.integers(1, 40))  # GPUs, limit in 15-minute steps


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 40), st.integers(0, 40)), max_size=4),
       st.lists(JOB, min_size=1, max_size=7))
def test_one_node_starts_match_easy(running, queue):
    running = [r for k, r in enumerate(running) if sum(g for g, _, _ in running[:k + 1]) <= 8]
    views = [view(f"r{k}", g, lim * 900.0, ran=min(ran, lim) * 900.0) for k, (g, lim, ran) in enumerate(running)]
    views += [view(f"q{k}", g, lim * 900.0, submit=1.0 + k) for k, (g, lim) in enumerate(queue)]
    now = 50 * 900.0
    b = plan(views, now=now)
    ends = [(g, now + (lim - min(ran, lim)) * 900.0) for g, lim, ran in running]
    started, reservation = easy_starts(8, ends, [(f"q{k}", g, lim * 900.0) for k, (g, lim) in enumerate(queue)], now)
    assert list(b.started) == started
    assert b.reservation == reservation


def run_forward(cluster_spec: str, jobs: Sequence[tuple[int, float, float, float]]):
    """Policy + engine by events (a job ends at start + duration, duration <= limit). Returns each job's
    start and every (time, reservation) the policy made."""
    cluster = Cluster.from_spec(cluster_spec)
    policy = SlurmBackfillPolicy()
    current = Placement.empty(cluster)
    start: dict[str, float] = {}
    done: set[str] = set()
    reservations: list[tuple[float, tuple[str, float]]] = []
    t = 0.0
    while len(done) < len(jobs):
        views = []
        for k, (g, submit, dur, lim) in enumerate(jobs):
            jid = f"j{k}"
            if submit <= t and jid not in done:
                views.append(JobView(job(jid, g, lim), submit, executed_time=t - start.get(jid, t),
                                     running=jid in start, total_work=dur))
        inp = SchedulingInput(t, 360.0, tuple(views), cluster, ConstantSpeeds(), 0, current)
        b = policy.backfill(inp)
        ranking, _ = policy.rank(inp, None)
        if b.reservation is not None:
            reservations.append((t, b.reservation))
        by_id = {v.job.id: v.job for v in views}
        d = decide(RoundRequest(cluster, tuple(by_id[j] for j in ranking.order), current, (), ENGINE,
                                held=ranking.held), PROFILE)
        check_kept(d, current, ranking.held)
        assert set(d.started) == set(b.started)
        for j in d.started:
            start[j] = t
        ends = {f"j{k}": start[f"j{k}"] + jobs[k][2] for k in range(len(jobs)) if f"j{k}" in start
                and f"j{k}" not in done}
        arrivals = [s for _, s, _, _ in jobs if s > t]
        t = min([*ends.values(), *arrivals])
        gone = {j for j, e in ends.items() if e <= t}
        done |= gone
        current = without(d.placement, gone)
    return start, reservations


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 1, 2, 3, 4, 7, 8]), st.integers(0, 6), st.integers(1, 12),
                          st.integers(0, 12)), min_size=2, max_size=9),
       st.sampled_from(["3x4", "2x4,2x2", "1x8,1x4"]))
def test_reserved_job_never_starts_later_than_reserved(raw, cluster):
    # times in 15-minute steps; limit = duration + slack; 7 GPUs spread over two nodes; nothing moves
    # (check_kept in run_forward)
    jobs = [(g, s * 900.0, d * 900.0, (d + slack) * 900.0) for g, s, d, slack in raw]
    start, reservations = run_forward(cluster, jobs)
    first: dict[str, float] = {}
    for t, (jid, at) in reservations:
        assert at >= t
        assert at <= first.setdefault(jid, at), f"{jid}'s reservation moved later: {first[jid]} -> {at}"
        assert start[jid] <= first[jid]


@pytest.mark.parametrize("options, message", [
    ({"limit": "x"}, "^slurm-backfill: limit must be one of trace, model, exact, got 'x'$"),
    ({"max_age_s": 0}, "max_age_s and limit_max_s must be > 0"), ({"limit_f": -0.5}, "limit_f >= 0"),
    ({"limit_max_s": 0}, "limit_max_s must be > 0"), ({"max_job_test": 0}, "max_job_test >= 1$"),
])
def test_bad_options_are_one_line(options, message):
    with pytest.raises(InputError, match=message):
        SlurmBackfillPolicy(**options)
    for fine in ({"max_age_s": 1}, {"limit_f": 0.0}, {"limit_max_s": 1}, {"max_job_test": 1}):
        SlurmBackfillPolicy(**fine)  # the smallest allowed values


def test_job_size_favoring_small_jobs_and_age_that_has_not_started():
    # PriorityFavorSmall on 8 GPUs: size = 1 - (GPUs - 1) / 7; a job submitted after `now` has age 0
    p = SlurmBackfillPolicy(weight_job_size=1000, favor_small=True)
    assert [p.priority(view("x", n, H), 0.0, 8) for n in (1, 4, 8)] == [1000, int(1000 * (1 - 3 / 7)), 0]
    assert SlurmBackfillPolicy(weight_job_size=1000, favor_small=True).priority(view("x", 1, H), 0.0, 1) == 1000
    aged = SlurmBackfillPolicy(weight_age=1000, max_age_s=1000.0)
    assert aged.priority(view("x", 1, H, submit=50.0), 10.0, 8) == 0 and aged.priority(view("x", 1, H), 10.0, 8) == 10


def test_the_ranking_holds_while_every_running_job_stays_within_its_limit():
    # 360 s rounds: R1 has 3600 - 700 = 2900 s of its limit left, 8 whole rounds, and the ranking holds for
    # one fewer (7); R2 past its limit: 0; with an age weight priorities move every round: 0
    def rounds(policy, views, max_rounds=50):
        inp = SchedulingInput(0.0, 360.0, tuple(views), Cluster.from_spec("1x8"), ConstantSpeeds(), 0, None)
        return policy.stable_rounds(inp, None, None, max_rounds)
    r1 = view("R1", 2, H, ran=700.0)
    assert rounds(SlurmBackfillPolicy(), [r1, view("A", 8, H)]) == 7
    assert rounds(SlurmBackfillPolicy(), [r1], max_rounds=5) == 5
    assert rounds(SlurmBackfillPolicy(), [r1, view("R2", 2, H, ran=2 * H)]) == 0
    assert rounds(SlurmBackfillPolicy(weight_age=1.0), [r1]) == 0
    assert rounds(SlurmBackfillPolicy(limit="exact"), [view("R3", 2, H, ran=700.0, duration=1800.0)]) == 2
