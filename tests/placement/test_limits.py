"""Per-user and per-account GPU limits in the engine: held to the limit, never below it without cause."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from oracles.limits import exact_walk

from tesserae_slurm.bench.synthetic import perturb_order, synthetic_jobs
from tesserae_slurm.engine import EngineConfig, RoundRequest, _units, decide
from tesserae_slurm.model import Cluster, InputError, Job, PendingReason, Placement
from tesserae_slurm.model.gpu_limits import GpuLimits, limits_from
from tesserae_slurm.placement import limit_gate as limits_module
from tesserae_slurm.placement.consolidate import ConsolidationResult, place_consolidated, place_units
from tesserae_slurm.placement.limit_gate import gate
from tesserae_slurm.placement.node_rules import NodeRules, unit_rules
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


def test_a_running_job_its_limit_stops_leaves_its_gpu_to_the_jobs_ranked_ahead():
    """Moves that pay under a limit: f (alice) runs on node2's last GPU, but new (alice, cap 1) is ranked
    ahead, so f stops. Walked with f's home reserved, new took one of c's GPUs, wide then moved a away, and
    a went to f's GPU: a move that bought nothing. Without f, new takes f's GPU and nobody moves."""
    cluster = Cluster.from_spec("2x4:a100")
    jobs = [Job(i, g, "resnet50", "32", user=u) for i, g, u in (
        ("new", 1, "alice"), ("b", 1, "bob"), ("wide", 2, "bob"), ("d", 2, "bob"), ("e", 1, "bob"),
        ("a", 1, "carol"), ("f", 1, "alice"), ("c", 2, "carol"))]
    current = Placement({"node1": (frozenset({"a"}), frozenset({"b"}), frozenset({"c"}), frozenset({"c"})),
                         "node2": (frozenset({"d"}), frozenset({"d"}), frozenset({"e"}), frozenset({"f"}))})
    d = run(cluster, jobs, GpuLimits(users={"alice": 1}), current, packing="off")
    check_limits(d, jobs, GpuLimits(users={"alice": 1}))
    assert d.migrated == () and d.preempted == ("f", "c")
    assert d.placement.job_gpus()["new"] == (("node2", 3),)
    assert [(p.job_id, p.reason) for p in d.pending] == [("f", PendingReason.LIMIT), ("c", PendingReason.PRIORITY)]
    why = {m.job: m for m in d.moves}
    # f's limit stopped it, whoever took its GPU: its note names the limit (nothing bought, a cost paid)
    assert (why["f"].cause, why["f"].for_jobs, why["f"].gain) == ("limit", (), 0.0)
    assert why["f"].detail.startswith("its GPU limit stopped it (needs 1 GPU; user alice holds 1 of 1 GPUs)")
    assert why["c"].cause == "room" and why["c"].gain > why["c"].cost


def test_limits_a_keep_first_walk_cannot_settle_are_told():
    """A walk in which a running job's presence decides whether a job ranked ahead of it runs (its home
    reserved): with x, y and x run and x is over alice's 1 GPU; without x, y does not run and x is within.
    No walk is one with skips, and the gate says so (the engine then takes the paper's plan); a walk that
    no running job shapes is settled as before."""
    jobs = [Job("y", 1, "resnet50", "32", user="alice"), Job("x", 1, "resnet50", "32", user="alice"),
            Job("o", 1, "resnet50", "32", user="bob")]
    empty = Placement.empty(Cluster.from_spec("1x4:a100"))

    def place(js, _pairs):
        ids = [j.id for j in js]
        placed = tuple(i for i in ids if "x" in ids or i != "y")
        return ConsolidationResult(empty, placed, ())

    g = gate(GpuLimits(users={"alice": 1}), jobs)
    assert g is not None
    g.place_within(jobs, (), place, homed={"x"})
    assert not g.settled
    g = gate(GpuLimits(users={"alice": 1}), jobs)
    assert g is not None
    g.place_within(jobs, (), place)
    assert g.settled


def test_a_running_job_left_out_stands_where_no_walk_is_a_fixpoint_with_or_without_guesses():
    """h (alice, limit 1) runs and the keep-first walk leaves it out, but its reserved home is what lets y,
    ranked ahead (alice too), run: with h walked, h is over the limit; without it, y does not run and h is
    within it. No walk is a fixpoint, so the walk with h stands (y and o run, h waits for its limit), and
    it is settled (h is over its limit there), by guess and check and by the fallback alone."""
    jobs = [Job("y", 1, "resnet50", "32", user="alice"), Job("h", 1, "resnet50", "32", user="alice"),
            Job("o", 1, "resnet50", "32", user="bob")]
    empty = Placement.empty(Cluster.from_spec("1x4:a100"))

    def place(js, _pairs):
        ids = [j.id for j in js]
        return ConsolidationResult(empty, tuple(i for i in ids if i != "h" and ("h" in ids or i != "y")), ())

    for guesses in (limits_module._GUESSES, 0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(limits_module, "_GUESSES", guesses)
            g = gate(GpuLimits(users={"alice": 1}), jobs)
            assert g is not None
            got, _ = g.place_within(jobs, (), place, homed=frozenset({"h"}))
        assert (got.placed, set(g.limited), g.settled) == (("y", "o"), {"h"}, True), guesses


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
            # A running job the keep-first walk displaced is over its limit where it stands but may
            # still shape the walk (its home), so it may be one the walk kept: some such subset stays.
            homed = sorted(limited & (current.jobs() if current is not None else set()))
            kept_in = [set(c) for n in range(len(homed) + 1) for c in itertools.combinations(homed, n)]
            assert any(run(cluster, [j for j in order if j.id not in limited - k], None, current,
                           packing=packing).placement == d.placement for k in kept_in)
        current = d.placement
        order = perturb_order(order, rng, 0.3)


def _place(cluster, masks=None):
    """The engine's placement call (engine.decide's ``place``) for a one-type cluster without hints;
    ``masks``: job id -> the nodes an operator's rule lets it use (a pair: both members' nodes)."""
    def place(jobs, pairs):
        if masks:
            units = _units(jobs, pairs)
            ids = [j.id for j in jobs]
            ruled = [i for i in ids if i in masks]
            row = {i: r for r, i in enumerate(ruled)}
            rules = NodeRules(np.array([row.get(i, -1) for i in ids], dtype=np.int64),
                              np.array([masks[i] for i in ruled] or [[False] * len(cluster.shape[0])]),
                              tuple(f"rule of {i}" for i in ruled))
            return place_units(cluster, units, unit_rules(rules, [u.jobs for u in units], ids))
        return place_units(cluster, _units(jobs, pairs)) if pairs else place_consolidated(cluster, jobs)
    return place


@st.composite
def paired_limit_cases(draw):
    """Jobs, limits and policy pairs (members of equal size, as the engine requires) on 4x4:a100."""
    _, jobs, limits, _, _ = draw(limit_cases())
    pairs, free = [], list(jobs)
    while len(free) > 1 and draw(st.booleans()):
        a = free.pop(draw(st.integers(0, len(free) - 1)))
        same = [j for j in free if j.num_gpus == a.num_gpus]
        if same:
            b = same[0]
            free.remove(b)
            pairs.append((a.id, b.id))
    return jobs, limits, tuple(pairs)


def _issue_case():
    """A pair whose second member (j8) fits its limits beside its first member (j4), but would not at
    its own place, after j7 took account ml's last GPU: the walk keeps the pair."""
    spec = [(2, "alice", "ml"), (1, "bob", "bio"), (2, "alice", "bio"), (2, "bob", "ml"), (4, "alice", ""),
            (1, "alice", "ml"), (1, "alice", "ml"), (1, "bob", "ml"), (4, "", "ml"), (1, "alice", "ml"),
            (1, "alice", "ml"), (2, "alice", "ml"), (2, "alice", "ml"), (1, "alice", "ml")]
    jobs = tuple(Job(f"j{i}", g, "resnet50", "32", user=u, account=a) for i, (g, u, a) in enumerate(spec))
    limits = GpuLimits(users={"alice": 6}, accounts={"ml": 6, "bio": 1}, default_user=2)
    return jobs, limits, (("j0", "j2"), ("j3", "j11"), ("j4", "j8"))


def _left_out_pair_case():
    """Account ml may hold 4 GPUs. j0 (1, ml) runs; each member of the pair (j1, j5) (4 GPUs, ml) is over
    the limit beside it, so the pair splits and neither runs; j4 (2, ml) still fits, the bio jobs run.
    Random search (400 examples) found it against a gate that, looking for the first job over its
    limit, passed over the members of a pair left out."""
    spec = [(1, "ml"), (4, "ml"), (8, "bio"), (2, "bio"), (2, "ml"), (4, "ml")]
    jobs = tuple(Job(f"j{i}", g, "resnet50", "32", user="alice", account=a) for i, (g, a) in enumerate(spec))
    return jobs, GpuLimits(accounts={"ml": 4}), (("j1", "j5"),)


def _same_as_the_certain_walk(jobs, limits, pairs, place):
    """The gate's walk is the reference's, by guess and check and by the fallback alone (one first job
    settled per walk). And it is settled: told that every job is running (``homed``), where ``place``
    reserves no homes, so none shapes the walk, the gate must confirm the walk with skips (its check
    finds every verdict right there), or it would report no fixpoint and the engine would drop it."""
    want, want_kept, want_limited = exact_walk(limits, jobs, pairs, place)
    if gate(limits, jobs) is None:
        assert not want_limited
        return want
    for guesses, homed in ((limits_module._GUESSES, frozenset()), (0, frozenset()),
                           (limits_module._GUESSES, frozenset(j.id for j in jobs))):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(limits_module, "_GUESSES", guesses)
            g = gate(limits, jobs)
            assert g is not None
            got, got_kept = g.place_within(jobs, pairs, place, homed)
        assert set(g.limited) == want_limited, (guesses, homed)
        assert got.placed == want.placed and got.placement == want.placement and got_kept == want_kept
        assert g.settled, (guesses, homed)
    return want


def test_a_pair_left_out_over_its_account_limit_leaves_the_limit_to_the_jobs_after_it():
    jobs, limits, pairs = _left_out_pair_case()
    want = _same_as_the_certain_walk(jobs, limits, pairs, _place(Cluster.from_spec("4x4:a100")))
    assert set(want.placed) == {"j0", "j2", "j3", "j4"}  # ml: 1 + 2 of 4; the pair would need 8 more


def test_a_pair_member_within_its_limit_beside_its_partner_keeps_the_pair():
    jobs, limits, pairs = _issue_case()
    want = _same_as_the_certain_walk(jobs, limits, pairs, _place(Cluster.from_spec("4x4:a100")))
    assert set(want.placed) == {"j0", "j1", "j4", "j8"}  # j8 packed with j4; j7 (bob, ml) over ml's 6


def test_a_pair_its_limit_splits_is_confirmed_where_the_pair_would_run():
    """Policy pair (a, b), both alice's, 2 GPUs each, under her limit of 2. Walked as a pair, b is over
    the limit beside a, so it waits and a runs alone (beside c). In that walk b is within the limit but
    for a's GPUs: the check confirms it only by asking whether the pair, kept, would run (it would, and
    then a's GPUs count)."""
    jobs = (Job("a", 2, "resnet50", "32", user="alice"), Job("b", 2, "resnet50", "32", user="alice"),
            Job("c", 2, "PointNet", "32", user="bob"))
    want = _same_as_the_certain_walk(jobs, GpuLimits(users={"alice": 2}), (("a", "b"),),
                                     _place(Cluster.from_spec("1x4:a100")))
    assert want.placed == ("a", "c")


def test_a_pair_member_over_its_limit_without_its_partner_is_confirmed_where_the_pair_would_not_run():
    """Policy pair (a, b) has no node both may use (a's rule: node1, b's: node2), so it never runs, and
    a runs alone. b (alice's) is over her limit of 2 by x's GPUs alone, whoever a's count against (bob):
    the check confirms it without the pair; a's GPUs are not b's user's."""
    jobs = (Job("x", 2, "resnet50", "32", user="alice"), Job("a", 2, "resnet50", "32", user="bob"),
            Job("b", 2, "resnet50", "32", user="alice"))
    cluster = Cluster.from_spec("2x4:a100")
    place = _place(cluster, {"a": np.array([True, False]), "b": np.array([False, True])})
    want = _same_as_the_certain_walk(jobs, GpuLimits(users={"alice": 2}), (("a", "b"),), place)
    assert want.placed == ("x", "a")


@settings(max_examples=150, deadline=None)
@given(paired_limit_cases())
@example(_issue_case())
@example(_left_out_pair_case())
def test_property_guess_and_check_equals_the_certain_walk(case):
    """placement/limit_gate.py's guess-and-check gives exactly the reference's walk with skips
    (tests/oracles/limits.py), policy pairs included."""
    jobs, limits, pairs = case
    _same_as_the_certain_walk(jobs, limits, pairs, _place(Cluster.from_spec("4x4:a100")))


def _rules_case():
    """Pair (j3, j7) has no node both members may use, so it never runs, though j3 alone would. j7 is
    over user b's limit (3) only through j3's GPUs, so beside j3, the pair being unplaced, it is
    within it: the pair is kept and waits, and j4 (user b) runs."""
    spec = [(4, "a", "y"), (2, "a", "x"), (2, "a", ""), (2, "b", ""), (2, "b", "x"), (1, "a", "y"), (4, "b", ""),
            (2, "b", "x"), (1, "a", "")]
    jobs = tuple(Job(f"j{i}", g, "resnet50", "32", user=u, account=a) for i, (g, u, a) in enumerate(spec))
    limits = GpuLimits(users={"a": 5, "b": 3}, accounts={"x": 6})
    pairs = (("j7", "j3"), ("j8", "j5"), ("j0", "j6"), ("j4", "j2"))
    rows = [None] * 3 + [[False, True]] + [None] + [[False, True]] + [None] + [[True, False], [False, True]]
    return (jobs, limits, pairs), rows + [None] * (40 - len(rows)), "2x4:a100"


@settings(max_examples=100, deadline=None)
@given(paired_limit_cases(), st.lists(st.none() | st.lists(st.booleans(), min_size=4, max_size=4), min_size=40,
                                      max_size=40), st.sampled_from(["2x4:a100", "4x4:a100"]))
@example(*_rules_case())
def test_property_guess_and_check_equals_the_certain_walk_under_node_rules(case, rows, spec):
    """The same under operators' node rules: a pair may use only the nodes both members may, so a
    first member walked alone may be placed where its pair would not fit."""
    jobs, limits, pairs = case
    cluster = Cluster.from_spec(spec)
    nodes = len(cluster.shape[0])
    masks = {j.id: np.array(r[:nodes]) for j, r in zip(jobs, rows) if r is not None}
    _same_as_the_certain_walk(jobs, limits, pairs, _place(cluster, masks))


def test_bench_decision_with_a_user_limit():
    """`tesserae bench decision --user-limit N` times the engine under limits that bind."""
    from tesserae_slurm.bench.decision import bench_decision
    free = bench_decision(32, 128, repeats=1)
    none = bench_decision(32, 128, repeats=1, limits=GpuLimits(default_user=0))  # every synthetic job has a user
    assert free.packed_median > 0 and none.packed_median == 0 and none.migrations_median == 0
