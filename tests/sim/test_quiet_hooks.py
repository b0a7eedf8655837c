"""The policies' quiet-round hooks against their own ``rank`` called round after round (the oracle).

A random history of arrivals, runs and waits builds a policy state; from there the running set is
frozen, the clock and the running jobs' service advance exactly as the simulator adds them, and
``rank`` is called every round. ``stable_rounds`` must say how many rounds in a row repeat the
ranking with no job changing queue (capped), and ``skip_rounds`` must give the very state those
rank calls leave.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, Job, JobView
from tesserae_slurm.policies.base import QuietRounds, SchedulingInput
from tesserae_slurm.policies.fifo import FifoPolicy
from tesserae_slurm.policies.las import LasPolicy
from tesserae_slurm.policies.srtf import SrtfPolicy
from tesserae_slurm.policies.tiresias import QueuedJob, TiresiasPolicy, TiresiasState

CLUSTER = Cluster.from_spec("1x8")
CAP = 40  # rounds replayed past the history


class NoSpeeds:
    def isolated(self, job, gpu_type):
        return 1.0

    def packed(self, a, b, gpu_type):
        return None


def advance(v: JobView, round_s: float) -> JobView:
    """One round of a running job, with the simulator's float operations (held = round_s)."""
    if not v.running:
        return v
    return v._replace(attained_service=v.attained_service + round_s * v.num_gpus,
                      executed_time=v.executed_time + round_s, rounds_run=v.rounds_run + 1)


def history(policy, steps, round_s):
    """Random past: each step adds jobs, then runs a random subset for one round."""
    views: dict[str, JobView] = {}
    state, now, n = policy.initial_state(), 0.0, 0
    ranking = None
    for arrivals, run_mask in steps:
        for _ in range(arrivals):
            views[f"j{n}"] = JobView(Job(f"j{n}", 1 + n % 3, "resnet50", "64"), now)
            n += 1
        if not views:
            continue
        inp = SchedulingInput(now, round_s, tuple(views.values()), CLUSTER, NoSpeeds())
        ranking, state = policy.rank(inp, state)
        for i, jid in enumerate(views):
            views[jid] = views[jid]._replace(running=bool(run_mask >> (i % 16) & 1))
            views[jid] = advance(views[jid], round_s)
        now += round_s
    return views, state, now


def frozen_running(views, run_mask):
    return {j: v._replace(running=bool(run_mask >> (i % 16) & 1)) for i, (j, v) in enumerate(views.items())}


def oracle(policy, views, state, now, round_s):
    """(rank input, state, ranking) at ``now``, and the rankings/states of the next CAP rounds."""
    inp = SchedulingInput(now, round_s, tuple(views.values()), CLUSTER, NoSpeeds())
    ranking, state0 = policy.rank(inp, state)
    later = []
    vs, s, t = tuple(views.values()), state0, now
    for _ in range(CAP):
        vs = tuple(advance(v, round_s) for v in vs)
        t += round_s
        r, s = policy.rank(SchedulingInput(t, round_s, vs, CLUSTER, NoSpeeds()), s)
        later.append((r, s))
    return inp, state0, ranking, later


def moved(before, after) -> bool:
    """A Tiresias job changed queue (the ranking may stay, e.g. a lone job, but the state does not
    evolve as in a quiet round, so the hook stops there too)."""
    return before is not None and (after.demotions, after.promotions) != (before.demotions, before.promotions)


def check(policy, views, state, now, round_s):
    inp, state0, ranking, later = oracle(policy, views, state, now, round_s)
    stable = next((i for i, (r, s) in enumerate(later) if r != ranking or moved(state0, s)), CAP)
    for cap in (CAP, stable, max(0, stable - 1), 3):
        assert policy.stable_rounds(inp, state0, ranking, cap) == min(cap, stable)
        if isinstance(policy, TiresiasPolicy):  # a state that is not the columns ``rank`` leaves
            plain = dataclasses.replace(state0, jobs=MappingProxyType(dict(state0.jobs)))
            assert policy.stable_rounds(inp, plain, ranking, cap) == min(cap, stable)
    for k in {1, stable // 2, stable}:
        if 0 < k <= stable:
            assert policy.skip_rounds(inp, state0, ranking, k) == later[k - 1][1]
    return stable


steps = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**16 - 1)), min_size=1, max_size=8)
round_lengths = st.sampled_from([360.0, 100.7, 0.1 + 0.2])


@settings(max_examples=120, deadline=None)
@given(steps, round_lengths, st.sampled_from([0.0, 0.3, 1.0, 4.0]), st.sampled_from(["gpu-time", "time"]),
       st.integers(0, 2**16 - 1))
def test_tiresias_hooks_match_round_by_round_ranking(hist, round_s, knob, service, run_mask):
    policy = TiresiasPolicy(queue_limits=(700.0, 2000.0), promote_knob=knob, service=service)
    views, state, now = history(policy, hist, round_s)
    views = frozen_running(views, run_mask)
    if views:
        check(policy, views, state, now, round_s)


@settings(max_examples=60, deadline=None)
@given(steps, round_lengths, st.sampled_from(["gpu-time", "time"]), st.integers(0, 2**16 - 1))
def test_las_hook_matches_round_by_round_ranking(hist, round_s, service, run_mask):
    policy = LasPolicy(service=service)
    views, state, now = history(policy, hist, round_s)
    views = frozen_running(views, run_mask)
    if views:
        check(policy, views, state, now, round_s)


@settings(max_examples=30, deadline=None)
@given(steps, st.booleans(), st.integers(0, 2**16 - 1))
def test_fifo_is_stable_while_the_running_set_is(hist, preemptive, run_mask):
    policy = FifoPolicy(preemptive=preemptive)
    views, state, now = history(policy, hist, 360.0)
    views = frozen_running(views, run_mask)
    if views:
        assert check(policy, views, state, now, 360.0) == CAP


def test_tiresias_stability_ends_at_the_exact_demotion_round():
    """Worked example: a 1-GPU job runs from 0 service, Q0 limit 3250 GPU-s, 360 s rounds: at the
    i-th following round it has 360 i GPU-s (the round just ranked counts), which reaches 3250 at
    i = 10: rounds 1..9 keep the ranking, round 10 demotes it behind the waiting job."""
    policy = TiresiasPolicy()
    a = JobView(Job("a", 1, "resnet50", "64"), 0.0, running=True)
    b = JobView(Job("b", 1, "resnet50", "64"), 0.0)
    inp = SchedulingInput(0.0, 360.0, (a, b), CLUSTER, NoSpeeds())
    _, state = policy.rank(inp, policy.initial_state())
    ranking, state = policy.rank(inp, state)
    assert ranking.order == ("a", "b") and policy.stable_rounds(inp, state, ranking, 100) == 9
    assert check(policy, {"a": a, "b": b}, policy.initial_state(), 0.0, 360.0) == 9


def test_promotion_limits_stability():
    """Both jobs ran 360 s and sit in the last queue; b runs, a waits. With knob 3, a is promoted to
    Q0 (ahead of b) once it has waited 3 x 360 s: at the third following round, so two stay quiet."""
    policy = TiresiasPolicy(queue_limits=(100.0,), promote_knob=3.0)
    a = JobView(Job("a", 1, "resnet50", "64"), 0.0, attained_service=360.0, executed_time=360.0, rounds_run=1)
    b = a._replace(job=Job("b", 1, "resnet50", "64"), running=True)
    state = TiresiasState(MappingProxyType({"a": QueuedJob(1, 0, 0.0, 0.0), "b": QueuedJob(1, 1, 0.0, 0.0)}), 2, 0.0)
    assert check(policy, {"a": a, "b": b}, state, 0.0, 360.0) == 2


def test_which_policies_offer_the_hook():
    assert all(isinstance(p, QuietRounds) for p in (FifoPolicy(), LasPolicy(), TiresiasPolicy()))
    assert not isinstance(SrtfPolicy(), QuietRounds)  # needs true speeds it cannot know
