"""record: the decision is in the database before any Slurm call: the round's numbers, a placement row per
placed job, each job's reason to wait; a dry run's actions as skipped intents and its placement as the shadow."""

from __future__ import annotations

import json

from tesserae_slurm.daemon.round.decide import decide_round
from tesserae_slurm.daemon.round.record import record_decision, record_dry_run
from tesserae_slurm.site.partition import scheduling_profile
from tesserae_slurm.site.scheduler import engine_config, site_policy

from ..fake_slurm import managed
from .world import inputs_of


def _decided(world, *jobs, dry_run: bool = False):
    snap, inp = inputs_of(world, *jobs, dry_run=dry_run)
    policy = site_policy(world.cfg)
    d = decide_round(policy, policy.initial_state(), inp, snap, scheduling_profile("a100"), world.cfg,
                     engine_config(world.cfg), {})
    return inp, d


def test_the_round_row_the_placements_and_the_reasons(world) -> None:
    inp, d = _decided(world, managed(1, 8, submit_time=1), managed(2, 4, submit_time=2),
                      managed(3, 16, submit_time=3))
    rid = world.begin_round()
    record_decision(world.journal, rid, inp, d, {"1": {"speed": "profiled"}}, dry_run=False)
    row = world.store.round(rid)
    assert (row.jobs_active, row.running, row.started, row.pending, row.kept) == (2, 1, 1, 1, 0)
    body = json.loads(row.decision_json)
    assert body["order"] == ["1", "2"] and body["sources"] == {"1": {"speed": "profiled"}}
    assert [(p.job_id, p.gpus) for p in world.store.placements(rid)] == [("1", "node1:0-3;node2:0-3")]
    assert world.store.job("2").reason.startswith("Priority")
    assert world.store.job("3").reason.startswith("invalid tesserae metadata: --gpus 16")  # excluded by inputs


def test_a_dry_run_records_intents_it_skips_and_keeps_its_placement(world) -> None:
    inp, d = _decided(world, managed(1, 2), dry_run=True)
    rid = world.begin_round()
    record_decision(world.journal, rid, inp, d, {}, dry_run=True)
    record_dry_run(world.journal, rid, d.plan, d.decision.placement, 1000.0, 1001.0)
    (a,) = world.store.actions(rid)
    assert (a.kind, a.job_id, a.status, a.finished_at) == ("start", "1", "skipped", 1001.0)
    assert world.journal.load_shadow() == d.decision.placement
    assert world.store.job("1").reason == ""  # a dry run leaves the jobs' rows to the real daemon


def test_a_dry_run_records_each_action_with_its_gpus_and_skips_only_its_own_rounds_intents(world) -> None:
    from tesserae_slurm.daemon.round.actions import Action, RoundPlan, Target
    from tesserae_slurm.daemon.state.journal import Intent
    from tesserae_slurm.model import Placement

    earlier = world.begin_round()  # a real round that crashed with an intent for reconciliation to settle
    world.journal.record_intents(earlier, [Intent("start", "9", {})], 900.0)
    rid = world.begin_round()
    start, moved = Target({"node1": (0, 1)}), Target({"node1": (2,)})
    plan = RoundPlan({"1": start, "3": moved}, (Action("preempt", "2", previous={"node2": (3,)}),
                                                Action("migrate", "3", target=moved, previous={"node2": (0,)}),
                                                Action("start", "1", target=start)), ())
    record_dry_run(world.journal, rid, plan, Placement({}), 1000.0, 1001.0)
    assert [(a.kind, a.job_id, json.loads(a.detail), a.status, a.error) for a in world.store.actions(rid)] == [
        ("preempt", "2", {"gpus": "", "from": "node2:3"}, "skipped", "dry run: nothing sent to Slurm"),
        ("migrate", "3", {"gpus": "node1:2", "from": "node2:0"}, "skipped", "dry run: nothing sent to Slurm"),
        ("start", "1", {"gpus": "node1:0-1", "from": ""}, "skipped", "dry run: nothing sent to Slurm")]
    assert [a.status for a in world.store.actions(earlier)] == ["intent"]


def test_the_rounds_numbers_count_each_kind_of_action_and_its_stage_times_in_ms() -> None:
    from tesserae_slurm.daemon.round.actions import Action, RoundPlan, Target
    from tesserae_slurm.daemon.round.decide import Decided
    from tesserae_slurm.daemon.round.inputs import RoundInputs
    from tesserae_slurm.daemon.round.record import round_counts
    from tesserae_slurm.model import Cluster, PackedPair, Placement, RoundDecision
    from tesserae_slurm.model.decision import PendingJob, PendingReason, StageTimings

    t = Target({"n1": (0,)})
    plan = RoundPlan({"a": t, "b": t, "c": t, "d": t}, (
        Action("preempt", "x", previous={"n1": (1,)}), Action("migrate", "b", target=t, previous={"n1": (2,)}),
        Action("migrate", "c", target=t, previous={"n1": (3,)}), Action("start", "d", target=t)), ("a",))
    decision = RoundDecision(Placement({}), (), (), (), (), (PackedPair("a", "d", 0.5, 0.5),),
                             (PendingJob("y", PendingReason.PRIORITY), PendingJob("z", PendingReason.PRIORITY)),
                             timings=StageTimings(0.001, 0.002, 0.004))
    decided = Decided(decision, plan, (), None, 0.008, 0.02)
    inp = RoundInputs(Cluster(()), {j: None for j in "abcdxyz"}, (), {}, Placement({}))  # type: ignore[misc]
    c = round_counts(decided, inp)
    assert (c.scheduling_ms, c.placement_ms, c.packing_ms, c.migration_ms) == (8.0, 1.0, 2.0, 4.0)
    assert (c.jobs_active, c.running, c.kept, c.started, c.preempted, c.migrated, c.packed_pairs, c.pending) == (
        7, 4, 1, 1, 1, 2, 1, 2)


def test_the_rounds_inputs_are_recorded_and_replay_to_its_decision(world) -> None:
    """``state.record_inputs``: the engine's request beside the decision (request_codec.py); decided again
    from the record, it gives the recorded placement."""
    from tesserae_slurm.engine import decide
    from tesserae_slurm.model.codec import placement_from_json
    from tesserae_slurm.request_codec import request_from_json

    inp, d = _decided(world, managed(1, 2, submit_time=1), managed(2, 4, submit_time=2))
    rid = world.begin_round()
    record_decision(world.journal, rid, inp, d, {}, dry_run=False, inputs_of="a100")
    body = json.loads(world.store.round(rid).decision_json)
    req, profile = request_from_json(body["request"])
    assert profile == "a100" and [j.id for j in req.jobs] == ["1", "2"]
    assert decide(req, scheduling_profile(profile)).placement == placement_from_json(body["placement"])
    rid2 = world.begin_round()
    record_decision(world.journal, rid2, inp, d, {}, dry_run=False)  # off (the default): not recorded
    assert "request" not in json.loads(world.store.round(rid2).decision_json)


def test_the_inputs_carry_each_placed_jobs_recent_placements(world) -> None:
    """Hysteresis reads each placed job's GPUs in the last rounds' decisions (the placement rows), newest
    first, as the engine numbers them."""
    from tesserae_slurm.daemon.round.actions import Target
    from tesserae_slurm.daemon.round.inputs import recent_placements

    for gpus in ({"node1": (0, 1)}, {"node2": (2, 3)}):
        rid = world.begin_round()
        world.journal.record_decision(rid, d_empty(), {"7": Target(gpus)}, _counts())
    assert recent_placements(world.journal, ["7", "8"], 3) == {"7": ((("node2", 2), ("node2", 3)),
                                                                     (("node1", 0), ("node1", 1)))}
    assert recent_placements(world.journal, ["7"], 1) == {"7": ((("node2", 2), ("node2", 3)),)}


def d_empty():
    from tesserae_slurm.model import Placement, RoundDecision

    return RoundDecision(Placement({}), (), (), (), (), (), ())


def _counts():
    from tesserae_slurm.daemon.state.journal import RoundCounts

    return RoundCounts()


def test_intents_recorded_in_several_calls_of_a_round_get_their_own_ids_in_order(world) -> None:
    """The ids returned are those of the rows written, in the intents' order, after the round's earlier ones
    (the rows go in as one executemany and the ids are read back)."""
    from tesserae_slurm.daemon.state.journal import Intent

    rid = world.begin_round()
    first = world.journal.record_intents(rid, [Intent("hold", "1", {}), Intent("hold", "2", {"n": 1})], 10.0)
    assert world.journal.record_intents(rid, [], 11.0) == []
    second = world.journal.record_intents(rid, [Intent("start", "3", {}), Intent("preempt", "1", {})], 12.0)
    by_id = {a.id: a for a in world.store.actions(rid)}
    assert len(set(first + second)) == 4 and set(by_id) == set(first + second)
    assert [(by_id[i].kind, by_id[i].job_id, by_id[i].seq, by_id[i].status) for i in first + second] == [
        ("hold", "1", 0, "intent"), ("hold", "2", 1, "intent"), ("start", "3", 2, "intent"),
        ("preempt", "1", 3, "intent")]
    assert json.loads(by_id[first[1]].detail) == {"n": 1} and by_id[second[0]].created_at == 12.0
