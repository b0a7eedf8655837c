"""Per-user and per-account GPU limits in the engine: held to the limit, never below it without cause."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.limits import exact_walk

from tesserae_slurm.bench.synthetic import perturb_order, synthetic_jobs
from tesserae_slurm.engine import EngineConfig, RoundRequest, _units, decide
from tesserae_slurm.model import Cluster, InputError, Job, PendingReason, Placement
from tesserae_slurm.model.gpu_limits import GpuLimits, limits_from
from tesserae_slurm.placement.consolidate import place_consolidated, place_units
from tesserae_slurm.placement import limit_gate as limits_module
from tesserae_slurm.placement.limit_gate import gate
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim import invariants
from tesserae_slurm.sim.invariants import check_round

A100 = load_profile("a100")


def run(cluster, jobs, limits, current=None, pairs=(), **cfg):
    d = decide(RoundRequest(cluster, tuple(jobs), current, tuple(pairs), EngineConfig(**cfg), limits=limits), A100)
    check_round(d, {j.id: j for j in jobs}, current or Placement.empty(cluster))
    return d


def check_limits(d, jobs, limits):
    invariants.check_limits(d, jobs, limits)


def test_a_user_over_the_limit_waits_with_the_reason_and_others_run():
    cluster = Cluster.from_spec("2x4:a100")
    jobs = [Job("a1", 4, "resnet50", "64", user="alice", no_pack=True),
            Job("a2", 4, "resnet50", "64", user="alice", no_pack=True),
            Job("b1", 4, "resnet50", "64", user="bob", no_pack=True)]
    d = run(cluster, jobs, GpuLimits(users={"alice": 4}))
    assert d.placement.jobs() == {"a1", "b1"}
    [p] = d.pending
    assert (p.job_id, p.reason) == ("a2", PendingReason.LIMIT)
    assert "user alice holds 4 of 4 GPUs" in p.detail
    free = run(cluster, jobs, None)  # without limits alice's second job runs and bob's waits
    assert free.placement.jobs() == {"a1", "a2"}


def test_jobs_that_got_no_gpus_do_not_count_toward_the_limit():
    # alice's 8-GPU job comes first but does not fit (bob holds a node): her 4-GPU job behind it must
    # run, since a limit of 8 counts GPUs held, not GPUs asked for; then the 8-GPU one is over (4 + 8)
    cluster = Cluster.from_spec("2x4:a100")
    jobs = [Job("b1", 4, "resnet50", "64", user="bob", no_pack=True),
            Job("a8", 8, "resnet50", "64", user="alice", no_pack=True),
            Job("a4", 4, "resnet50", "64", user="alice", no_pack=True)]
    d = run(cluster, jobs, GpuLimits(users={"alice": 8}, default_user=4))
    assert d.placement.jobs() == {"b1", "a4"}
    [p] = d.pending
    assert (p.job_id, p.reason, p.detail) == ("a8", PendingReason.LIMIT, "needs 8 GPUs; user alice holds 4 of 8 GPUs")


def test_account_limits_and_defaults():
    cluster = Cluster.from_spec("4x4:a100")
    jobs = [Job(f"j{i}", 4, "resnet50", "64", user=f"u{i}", account="ml" if i < 3 else "bio", no_pack=True)
            for i in range(4)]
    d = run(cluster, jobs, GpuLimits(accounts={"ml": 8}, default_user=4))
    assert d.placement.jobs() == {"j0", "j1", "j3"}
    assert [(p.job_id, p.reason) for p in d.pending] == [("j2", PendingReason.LIMIT)]
    assert "account ml holds 8 of 8 GPUs" in d.pending[0].detail


def test_packing_never_takes_a_user_over_the_limit():
    cluster = Cluster.from_spec("1x4:a100")
    jobs = [Job("a", 2, "resnet50", "32", user="alice"), Job("b", 2, "resnet50", "32", user="bob"),
            Job("c", 2, "PointNet", "32", user="alice"), Job("d", 2, "DCGAN", "64", user="bob")]
    packed = run(cluster, jobs, None)
    assert {p.partner for p in packed.packed} == {"c", "d"}  # both would pack without limits
    d = run(cluster, jobs, GpuLimits(users={"alice": 2}))
    assert {p.partner for p in d.packed} == {"d"}
    assert [(p.job_id, p.reason) for p in d.pending] == [("c", PendingReason.LIMIT)]


def test_a_partner_over_its_limit_leaves_the_place_to_the_next_best():
    # one host (b) and two candidates; the one packing would choose belongs to alice, who is at her
    # limit already: the other one packs instead of nobody (two users' pairs scored as one user's, so
    # that the pairs form at all: the A100 table has no time-sliced speeds)
    cluster = Cluster.from_spec("2x4:a100")
    base = [Job("a1", 4, "resnet50", "64", user="alice", no_pack=True), Job("b", 4, "resnet50", "32", user="bob"),
            Job("c", 4, "PointNet", "32"), Job("d", 4, "DCGAN", "64")]
    [best] = run(cluster, base, None, cross_user="mps").packed
    other = ({"c", "d"} - {best.partner}).pop()
    jobs = [j if j.id not in ("c", "d") else replace(j, user="alice" if j.id == best.partner else "carol")
            for j in base]
    d = run(cluster, jobs, GpuLimits(users={"alice": 4}), cross_user="mps")
    assert [(p.placed, p.partner) for p in d.packed] == [("b", other)]
    assert [(p.job_id, p.reason) for p in d.pending] == [(best.partner, PendingReason.LIMIT)]


def test_policy_pairs_with_a_limited_member_are_split():
    cluster = Cluster.from_spec("1x4:a100")
    jobs = [Job("a", 2, "resnet50", "32", user="alice"), Job("b", 2, "resnet50", "32", user="alice"),
            Job("c", 2, "PointNet", "32", user="bob")]
    d = run(cluster, jobs, GpuLimits(users={"alice": 2}), pairs=[("a", "b")], packing="off")
    assert d.placement.jobs() == {"a", "c"} and d.packed == ()
    assert [(p.job_id, p.reason) for p in d.pending] == [("b", PendingReason.LIMIT)]


def test_limits_that_cannot_bind_change_nothing():
    cluster = Cluster.from_spec("4x4:a100")
    jobs = synthetic_jobs(60, np.random.default_rng(1))
    lim = GpuLimits(default_user=10_000)
    assert gate(lim, jobs) is None  # and so the round costs one pass over the jobs
    assert run(cluster, jobs, lim) == run(cluster, jobs, None)


def test_limits_from_yaml_shape_and_bad_values():
    lim = limits_from({"users": {"alice": 8}, "accounts": {"ml": 16}, "default_user": 4})
    assert lim == GpuLimits({"alice": 8}, {"ml": 16}, 4, None)
    assert limits_from({}) is None and limits_from(None) is None
    with pytest.raises(InputError, match="unknown key"):
        limits_from({"user": {"alice": 8}})
    with pytest.raises(InputError, match=r"limits.users.alice: a GPU limit must be an integer >= 0"):
        limits_from({"users": {"alice": -1}})
    with pytest.raises(InputError, match="limits.default_user"):
        limits_from({"default_user": "many"})


USERS = ("alice", "bob", "carol", "")
ACCOUNTS = ("ml", "bio", "")


@st.composite
def limit_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    n = draw(st.integers(1, 40))
    jobs = tuple(replace(j, user=draw(st.sampled_from(USERS)), account=draw(st.sampled_from(ACCOUNTS)))
                 for j in synthetic_jobs(n, rng))
    users = draw(st.dictionaries(st.sampled_from(USERS[:3]), st.integers(0, 12), max_size=3))
    accounts = draw(st.dictionaries(st.sampled_from(ACCOUNTS[:2]), st.integers(0, 16), max_size=2))
    default = draw(st.none() | st.integers(1, 8))
    spec = draw(st.sampled_from(["2x4:a100", "4x4:a100", "3x8:a100", "2x4:a100,2x8:a100"]))
    packing = draw(st.sampled_from(["on", "off", "single"]))
    return Cluster.from_spec(spec), jobs, GpuLimits(users, accounts, default), packing, rng


@settings(max_examples=60, deadline=None)
@given(limit_cases())
def test_property_limits_hold_every_round_and_are_not_conservative(case):
    """Over consecutive rounds (orders churning, the placement carried over): no user or account ever
    holds more GPUs than allowed, and a job waits for its limit only when it would go over it."""
    cluster, jobs, limits, packing, rng = case
    current = None
    order = jobs
    for _ in range(4):
        d = run(cluster, order, limits, current, packing=packing)
        check_limits(d, order, limits)
        if packing == "off":  # the walk without the limited jobs: exactly what the limits leave
            limited = {p.job_id for p in d.pending if p.reason is PendingReason.LIMIT}
            rest = run(cluster, [j for j in order if j.id not in limited], None, current, packing=packing)
            assert rest.placement == d.placement
        current = d.placement
        order = perturb_order(order, rng, 0.3)


def _place(cluster):
    """The engine's placement call (engine.decide's ``place``) for a one-type cluster without hints."""
    def place(jobs, pairs):
        return place_units(cluster, _units(jobs, pairs)) if pairs else place_consolidated(cluster, jobs)
    return place


@settings(max_examples=150, deadline=None)
@given(limit_cases(), st.data())
def test_property_guess_and_check_equals_the_certain_walk(case, data):
    """placement/limit_gate.py's guess-and-check gives exactly the reference's walk with skips
    (tests/oracles/limits.py), policy pairs included."""
    cluster, jobs, limits, _, rng = case
    cluster = Cluster.from_spec("4x4:a100")  # one GPU type: the engine's call has no type hints
    pairs, free = [], list(jobs)
    while len(free) > 1 and data.draw(st.booleans()):
        a = free.pop(data.draw(st.integers(0, len(free) - 1)))
        same = [j for j in free if j.num_gpus == a.num_gpus]
        if same:
            b = same[0]
            free.remove(b)
            pairs.append((a.id, b.id))
    want, want_kept, want_limited = exact_walk(limits, jobs, pairs, _place(cluster))
    g = gate(limits, jobs)
    if g is None:
        assert not want_limited
        return
    got, got_kept = g.place_within(jobs, pairs, _place(cluster))
    assert set(g.limited) == want_limited
    assert got.placed == want.placed and got.placement == want.placement and got_kept == want_kept
    with pytest.MonkeyPatch.context() as mp:  # the fallback, one first job settled per walk, alone
        mp.setattr(limits_module, "_GUESSES", 0)
        slow = gate(limits, jobs)
        assert slow is not None
        got, got_kept = slow.place_within(jobs, pairs, _place(cluster))
    assert set(slow.limited) == want_limited
    assert got.placed == want.placed and got.placement == want.placement and got_kept == want_kept


def test_bench_decision_with_a_user_limit():
    """`tesserae bench decision --user-limit N` times the engine under limits that bind."""
    from tesserae_slurm.bench.decision import bench_decision
    free = bench_decision(32, 128, repeats=1)
    none = bench_decision(32, 128, repeats=1, limits=GpuLimits(default_user=0))  # every synthetic job has a user
    assert free.packed_median > 0 and none.packed_median == 0 and none.migrations_median == 0
