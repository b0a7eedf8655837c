"""Moves that pay for themselves (EngineConfig.moves, placement/move_value.py, placement/keep_walk.py):
each kind of needless move the paper's plan makes, on small hand-made states, against the cost-aware
decision; what a move's reason says; and properties over random rounds (no shift between the GPUs of one
node that no job needed, no move back within a few rounds without a new cause)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.bench.synthetic import perturb_order, synthetic_jobs
from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.model import Cluster, Job, MoveCosts, PendingReason, Placement
from tesserae_slurm.model.moves import RecentPlacements, is_return, is_shift, partners
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.invariants import check_round

A100 = load_profile("a100")
PAPER = EngineConfig(moves=None)
PAYING = EngineConfig()


def decide_on(cluster, jobs, current=None, config=PAYING, **req):
    d = decide(RoundRequest(cluster, tuple(jobs), current, config=config, **req), A100)
    check_round(d, {j.id: j for j in jobs}, current or Placement.empty(cluster))
    return d


def plan(**nodes):
    return Placement.from_lists({n: [list(g) for g in gpus] for n, gpus in nodes.items()})


def test_a_new_order_moves_no_job_when_nothing_new_runs():
    """Every job runs and keeps running; only the policy's order changed. The paper's plan rebuilt best
    fit in the new order and swapped d and b between node1 and node2 (7 GPUs idle); nothing is bought."""
    cluster = Cluster.from_spec("3x4:a100")
    size = {"a": 2, "b": 1, "c": 1, "d": 1}
    jobs = {j: Job(j, n, "resnet50", "32") for j, n in size.items()}
    current = plan(node1=[["a"], ["a"], ["b"], ["c"]], node2=[["d"], [], [], []], node3=[[], [], [], []])
    order = [jobs[j] for j in "adcb"]
    paper = decide_on(cluster, order, current, EngineConfig(packing="off", moves=None))
    assert set(paper.migrated) == {"b", "d"} and not paper.started  # the kind of move, as recorded
    d = decide_on(cluster, order, current, EngineConfig(packing="off"))
    assert d.migrated == () and d.preempted == () and d.placement == current and d.moves == ()


def test_two_jobs_do_not_swap_back_and_forth_as_the_order_flips():
    """The issue's oscillation: half the cluster idle, nothing starting, the order flips each round, and
    the paper's plan moves a job back to where it was two rounds before; kept jobs stay."""
    cluster = Cluster.from_spec("3x4:a100")
    jobs = {j: Job(j, n, "resnet50", "32") for j, n in {"a": 2, "b": 1, "c": 1, "d": 1}.items()}
    orders = ["abcd", "adcb", "abcd", "adcb"]
    for config, expect_back in ((EngineConfig(packing="off", moves=None), True), (EngineConfig(packing="off"), False)):
        current = decide_on(cluster, [jobs[j] for j in orders[0]], None, config).placement
        history: list[Placement] = []
        back = moved = 0
        for order in orders[1:]:
            d = decide_on(cluster, [jobs[j] for j in order], current, config,
                          recent=RecentPlacements(history))
            before, after = current.job_gpus(), d.placement.job_gpus()
            earlier = [h.job_gpus() for h in history]
            back += sum(is_return(before[j], after[j], [e.get(j, ()) for e in earlier]) for j in d.migrated)
            moved += len(d.migrated)
            history.insert(0, current)
            current = d.placement
        assert (back > 0) == expect_back and (moved > 0) == expect_back


def test_a_stranded_job_gets_room_only_when_its_gain_covers_the_move():
    """A 4-GPU job waits with 3 + 3 GPUs free: moving one 1-GPU job frees a node. Over a horizon of
    1080 s the start is worth 4 x 1080 GPU-s against a 30 s restart: it moves, and the reason says whom
    it made room for; over 5 s (20 GPU-s of work against 30) it does not, and the job waits."""
    cluster = Cluster.from_spec("2x4:a100")
    small = [Job("x", 1, "resnet50", "32"), Job("y", 1, "resnet50", "32")]
    big = Job("big", 4, "resnet50", "32")
    current = plan(node1=[["x"], [], [], []], node2=[["y"], [], [], []])
    d = decide_on(cluster, [big, *small], current)
    assert d.started == ("big",) and len(d.migrated) == 1 and not d.preempted
    (m,) = d.moves
    assert m.action == "migrate" and m.cause == "room" and m.for_jobs == ("big",)
    assert m.gain == 4 * 1080 and m.cost == 30 and m.job in ("x", "y")
    short = dataclasses.replace(PAYING, moves=MoveCosts(horizon_s=5.0))
    d = decide_on(cluster, [big, *small], current, short)
    assert d.migrated == () and d.placement == current
    assert {p.job_id: p.reason for p in d.pending} == {"big": PendingReason.CONSOLIDATION}


def test_a_job_about_to_finish_is_not_displaced():
    """A higher-ranked new job needs the only node; the running job has 20 s of work left, less than a
    restart (30 s): preempting it would cost more than the new job waits."""
    cluster = Cluster.from_spec("1x4:a100")
    new, old = Job("new", 4, "resnet50", "32", no_pack=True), Job("old", 4, "resnet50", "32", no_pack=True)
    current = plan(node1=[["old"]] * 4)
    assert decide_on(cluster, [new, old], current).preempted == ("old",)
    d = decide_on(cluster, [new, old], current, remaining={"old": 20.0})
    assert d.preempted == () and d.kept == ("old",) and [p.job_id for p in d.pending] == ["new"]


def test_a_preemption_pays_for_the_preempted_job_or_is_not_made():
    """Priority displaces a running job only when the job that takes its GPUs is worth more over the
    horizon than the stop costs (the daemon's dev settings: 5 s rounds, restart and stop 55 s)."""
    cluster = Cluster.from_spec("1x4:a100")
    new, old = Job("new", 1, "resnet50", "32", no_pack=True), Job("old", 4, "resnet50", "32", no_pack=True)
    current = plan(node1=[["old"]] * 4)
    dev = dataclasses.replace(PAYING, moves=MoveCosts(stop_s=25.0, horizon_s=15.0))
    d = decide_on(cluster, [new, old], current, dev)  # 1 GPU x 15 s of gain against 4 x 55 s of cost
    assert d.preempted == () and d.kept == ("old",)
    d = decide_on(cluster, [new, old], current)  # 1 x 1080 s against 4 x 30 s
    assert d.preempted == ("old",) and d.moves[0].cause == "room" and d.moves[0].for_jobs == ("new",)
    assert d.moves[0].action == "preempt" and d.moves[0].speed_after == 0.0


def test_a_job_that_moved_lately_costs_more_to_move_again():
    """Hysteresis: a move that pays once (gain 40 GPU-s > cost 30) does not pay for a job that moved in
    the last rounds (cost 60)."""
    cluster = Cluster.from_spec("2x4:a100")
    small = [Job("x", 1, "resnet50", "32"), Job("y", 1, "resnet50", "32")]
    big = Job("big", 4, "resnet50", "32")
    current = plan(node1=[["x"], [], [], []], node2=[["y"], [], [], []])
    config = dataclasses.replace(PAYING, moves=MoveCosts(horizon_s=10.0))
    assert len(decide_on(cluster, [big, *small], current, config).migrated) == 1
    earlier = plan(node1=[[], ["x"], [], []], node2=[[], ["y"], [], []])
    d = decide_on(cluster, [big, *small], current, config, recent={"x": (earlier.job_gpus()["x"],),
                                                                   "y": (earlier.job_gpus()["y"],)})
    assert d.migrated == () and [p.job_id for p in d.pending] == ["big"]


def test_a_pair_splits_only_when_running_alone_pays_for_the_move():
    """Two packed 1-GPU jobs and idle GPUs: the lower-ranked one leaves to run alone when both gain
    more speed over the horizon than its restart costs; with a horizon too short, the pair stays."""
    cluster = Cluster.from_spec("1x4:a100")
    a, b = Job("a", 1, "resnet50", "32"), Job("b", 1, "vgg19", "32")
    current = plan(node1=[["a", "b"], [], [], []])
    d = decide_on(cluster, [a, b], current)
    assert d.migrated == ("b",) and d.moves[0].cause == "unpack" and d.moves[0].for_jobs == ("a",)
    assert d.moves[0].action == "migrate"
    assert d.moves[0].gain > d.moves[0].cost and d.moves[0].speed_after == 1.0 > d.moves[0].speed_before
    assert d.gpus_of("a") == (("node1", 0),)  # the higher-ranked job keeps its GPU
    d = decide_on(cluster, [a, b], current, dataclasses.replace(PAYING, moves=MoveCosts(horizon_s=1.0)))
    assert d.migrated == () and d.placement == current and len(d.packed) == 1


def test_a_partner_stays_with_its_host_while_both_run():
    """Packing from nothing would pair the new job with the host of a running pair; the running pair
    stays, and the new job packs elsewhere or waits."""
    cluster = Cluster.from_spec("1x2:a100")
    host, guest, other = Job("h", 1, "resnet50", "32"), Job("g", 1, "vgg19", "32"), Job("o", 1, "resnet50", "32")
    new = Job("n", 1, "PointNet", "32")
    current = plan(node1=[["h", "g"], ["o"]])
    d = decide_on(cluster, [host, other, new, guest], current)
    assert d.migrated == () and not d.preempted
    assert {frozenset((p.placed, p.partner)) for p in d.packed} >= {frozenset(("h", "g"))}


def test_settle_undoes_a_move_no_job_needed():
    """A plan that moves a job off GPUs nobody takes (a relabeling artefact) gets the move undone."""
    from tesserae_slurm.placement.move_value import MoveValue

    cluster = Cluster.from_spec("1x4:a100")
    a = Job("a", 2, "resnet50", "32")
    current = plan(node1=[[], ["a"], ["a"], []])
    shifted = plan(node1=[["a"], ["a"], [], []])
    mv = MoveValue(cluster, current, (a,), MoveCosts(), A100, {}, {}, frozenset())
    assert mv.settle(shifted, ("a",)) == current
    assert mv.reasons(shifted, ("a",), (), (), {"a": 1.0})[0].cause == "none"


def test_a_plan_replaces_the_kept_one_only_if_the_first_job_they_differ_on_is_its_own():
    """The paper's plan may replace the kept plan only when it places a job of higher priority: the
    first job in the policy's order that one plan places and the other does not decides, and gaining
    more does not make up for dropping a job ranked higher. Ids run against the order (``z`` first)."""
    from tesserae_slurm.placement.move_value import MoveValue, Plan

    cluster = Cluster.from_spec("1x4:a100")
    z, *small = Job("z", 2, "resnet50", "32"), *(Job(j, 1, "resnet50", "32") for j in "abc")
    mv = MoveValue(cluster, Placement.empty(cluster), (z, *small), MoveCosts(), A100, {}, {}, frozenset())

    def placing(*ids):
        gpus = [[j] for j in ids for _ in range(2 if j == "z" else 1)]
        return Plan(plan(node1=gpus + [[]] * (4 - len(gpus))), (), (), frozenset())

    worth = {j: mv.value(j) for j in "zabc"}
    assert mv.net_gain(placing("a"), placing("z")) == worth["z"] - worth["a"] > 0  # z ranks first
    assert worth["a"] + worth["b"] + worth["c"] > worth["z"]
    assert mv.net_gain(placing("z"), placing("a", "b", "c")) is None  # worth more, but drops z
    assert mv.net_gain(placing("a"), placing("a", "b")) == worth["b"]  # alike up to b, which it places


# ---- properties over random rounds ---------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 5))
def test_jobs_that_all_run_keep_their_gpus_whatever_the_new_order(seed, nodes):
    """Nothing arrives, nothing ends, every job runs: a new order changes nothing at all."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_spec(f"{nodes}x4:a100")
    jobs = list(synthetic_jobs(int(rng.integers(2, 5 * nodes)), rng))
    first = decide_on(cluster, jobs)
    running = [j for j in jobs if j.id in first.placement.jobs()]
    current = decide_on(cluster, running, first.placement).placement
    d = decide_on(cluster, perturb_order(tuple(running), rng, swap_frac=0.8), current)
    assert d.placement == current and d.migrated == () and d.preempted == () and d.moves == ()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.sampled_from([1080.0, 60.0, 15.0]))
def test_every_move_has_a_cause_no_idle_shift_and_no_return_without_a_new_cause(seed, nodes, horizon):
    """Over rounds of arrivals, ends and new orders, with each round's history as a shell keeps it:
    every migrated or preempted job gets one reason; a migration never lacks a cause; a move between
    GPUs of the job's own node(s), its partner unchanged, happens only when a job took its old GPUs; a
    job moved back to GPUs it held within the last rounds was moved for a new cause (a job named in
    its reason)."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_spec(f"{nodes}x4:a100")
    config = dataclasses.replace(PAYING, moves=MoveCosts(horizon_s=horizon))
    pool = list(synthetic_jobs(6 * nodes, rng))
    active = pool[:2 * nodes]
    waiting = pool[2 * nodes:]
    current: Placement | None = None
    history: list[Placement] = []
    for _ in range(5):
        remaining = {j.id: float(rng.uniform(10, 3000)) for j in active if rng.random() < 0.5}
        d = decide_on(cluster, active, current, config, remaining=remaining, recent=RecentPlacements(history[:3]))
        moved = set(d.migrated) | set(d.preempted)
        assert sorted(m.job for m in d.moves) == sorted(moved)
        assert all(m.action == ("migrate" if m.job in d.migrated else "preempt") for m in d.moves)
        why = {m.job: m for m in d.moves}
        assert all(why[j].cause != "none" for j in d.migrated)
        if current is not None:
            before, after = current.job_gpus(), d.placement.job_gpus()
            was, now = partners(current), partners(d.placement)
            earlier = [h.job_gpus() for h in history]
            for j in d.migrated:
                if is_shift(before[j], after[j], was.get(j, ""), now.get(j, "")):
                    assert why[j].cause == "room" and why[j].for_jobs, (j, why[j])
                if is_return(before[j], after[j], [e.get(j, ()) for e in earlier]):
                    assert why[j].for_jobs, (j, why[j])
            history.insert(0, current)
        current = d.placement
        ended = {j.id for j in active if j.id in current.jobs() and rng.random() < 0.2}
        active = [j for j in perturb_order(tuple(active), rng, swap_frac=0.5) if j.id not in ended]
        active += [waiting.pop() for _ in range(min(len(waiting), int(rng.integers(0, 3))))]
        current = Placement({n: tuple(frozenset(x for x in s if x not in ended) for s in gs)
                             for n, gs in current.nodes.items()})


def test_two_users_pairs_are_valued_time_sliced_as_packing_scores_them():
    """A pair of two users' jobs time-slices the GPU: what a move buys or costs uses those speeds (one
    user's pair, or a site that scores every pair as MPS, the MPS ones), and a running pair of two users
    whose time-sliced speeds sum below one is not kept together, as packing would not form it."""
    from tesserae_slurm.placement.move_value import MoveValue

    cluster = Cluster.from_spec("1x2:a100")
    host, guest = Job("h", 1, "resnet50", "32", user="u1"), Job("g", 1, "vgg19", "32", user="u2")
    mate = dataclasses.replace(guest, id="m", user="u1")
    current = plan(node1=[["h", "g"], []])
    sliced, mps = A100.best_pair(host, guest, "a100", "timeslice"), A100.best_pair(host, guest, "a100")
    assert sliced is not None and mps is not None and sliced.a_speed + sliced.b_speed < 1.0 < mps.a_speed + mps.b_speed
    mv = MoveValue(cluster, current, (host, guest), MoveCosts(), A100, {}, {}, frozenset())
    assert mv.pair(host, guest, "a100") == sliced and mv.pair(host, mate, "a100") == mps
    assert mv.speed_now("h") == sliced.a_speed
    mv = MoveValue(cluster, current, (host, guest), MoveCosts(), A100, {}, {}, frozenset(), cross_user="mps")
    assert mv.pair(host, guest, "a100") == mps and mv.speed_now("h") == mps.a_speed

    other, new = Job("o", 1, "resnet50", "32", user="u1"), Job("n", 1, "PointNet", "32", user="u1")
    current = plan(node1=[["h", "g"], ["o"]])
    jobs = [host, other, new, guest]
    kept = decide_on(cluster, jobs, current, dataclasses.replace(PAYING, cross_user="mps"))
    assert {frozenset(("h", "g"))} <= {frozenset((p.placed, p.partner)) for p in kept.packed}
    d = decide_on(cluster, jobs, current)
    assert frozenset(("h", "g")) not in {frozenset((p.placed, p.partner)) for p in d.packed}
    assert all(p.placed_speed + p.partner_speed >= 1.0 - 1e-9 for p in d.packed)
