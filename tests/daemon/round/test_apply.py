"""apply: a start onto GPUs no stopping job holds goes ahead while the stopping job checkpoints; a start
onto a stopping job's GPUs waits until it is requeue-held; a daemon asked to stop starts nothing more.
(Each call's own protocol: test_applier.py.)"""

from __future__ import annotations

import json

from tesserae_slurm.daemon.round.actions import Action, RoundPlan, Target
from tesserae_slurm.daemon.round.apply import apply_plan
from tesserae_slurm.daemon.service.metrics import Metrics
from tesserae_slurm.daemon.state.store import JobRow
from tesserae_slurm.harness.assignment import Assignment
from tesserae_slurm.slurm import SlurmJobState as S

from ..fake_slurm import managed
from .world import look

A_ON = {"node1": (0,)}


def _world(world) -> RoundPlan:
    """A runs on node1 GPU 0 and is preempted; B starts on GPU 1, C on A's GPU 0."""
    ours = Assignment("1", 1, A_ON)
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING, assignment=ours), "2": managed(2), "3": managed(3)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:0",
                     assignment=ours.encode()))
        for j in "23":
            s.add(JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="PENDING"))
    b, c = Target({"node1": (1,)}), Target({"node1": (0,)})
    return RoundPlan({"2": b, "3": c}, (Action("preempt", "1", previous=A_ON), Action("start", "2", target=b),
                                       Action("start", "3", target=c)), ())


def test_a_free_start_overlaps_the_checkpoint_and_one_on_the_stopping_jobs_gpu_waits(world) -> None:
    plan, metrics = _world(world), Metrics()
    rid = world.begin_round()
    result = apply_plan(rid, plan, look(world), {"1": A_ON}, world.applier(), world.guard(), world.journal, metrics,
                        world.stop)
    assert world.slurm.writes() == [
        ("signal", ("1",)), ("place", ("2",)), ("release", ("2",)),
        ("requeue_hold", ("1",)), ("place", ("3",)), ("release", ("3",)),
        ("admin_hold", ("1",))]  # the preempted job's requeue-hold made the daemon's
    assert result.stopped == {"1"} and result.started == {"2", "3"} and not result.failed
    assert metrics.actions == {"preempt": 1, "start": 2}
    assert world.store.round(rid).status == "applying" and world.store.round(rid).apply_ms > 0
    assert {j: world.store.job(j).state for j in "123"} == {"1": "PENDING", "2": "STARTING", "3": "STARTING"}


def test_a_daemon_asked_to_stop_leaves_the_starts_and_the_preemption_to_its_next_start(world) -> None:
    plan = _world(world)
    world.stop.set()
    result = apply_plan(world.begin_round(), plan, look(world), {"1": A_ON}, world.applier(), world.guard(),
                        world.journal, Metrics(), world.stop)
    assert world.slurm.methods() == ["signal"]
    assert result.skipped == {"1": "daemon stopping: the preemption is finished by the next start",
                              "2": "daemon stopping", "3": "daemon stopping"}
    assert world.store.job("1").state == "PREEMPTING"


def test_a_job_packed_onto_a_running_partner_starts_on_its_gpus_and_any_other_holder_is_a_clash(world) -> None:
    # 1 keeps node1 GPU 0 and 2 is packed beside it there: the GPU is held, by 2's partner, so 2 starts.
    # 4 is to start on GPU 1, which 3 holds and keeps (a stale plan): 4 is not its partner, so 4 waits.
    on0, on1 = Assignment("1", 1, A_ON), Assignment("3", 1, {"node1": (1,)})
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING, assignment=on0), "2": managed(2),
                        "3": managed(3, state=S.RUNNING, assignment=on1), "4": managed(4)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:0", assignment=on0.encode()))
        s.add(JobRow(job_id="3", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:1", assignment=on1.encode()))
        for j in "24":
            s.add(JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="PENDING"))
    two, four = Target(A_ON, partner="1"), Target({"node1": (1,)})
    plan = RoundPlan({"1": Target(A_ON, partner="2"), "2": two, "3": Target({"node1": (1,)}), "4": four},
                     (Action("start", "2", target=two), Action("start", "4", target=four)), ("1", "3"))
    result = apply_plan(world.begin_round(), plan, look(world), {"1": A_ON, "3": {"node1": (1,)}}, world.applier(),
                        world.guard(), world.journal, Metrics(), world.stop)
    assert result.started == {"2"} and result.skipped == {"4": "GPUs still held by job(s) 3"}
    assert world.slurm.writes() == [("place", ("2",)), ("release", ("2",))]
    assert world.store.job("2").state == "STARTING" and world.store.job("2").packed_with == "1"


def test_a_daemon_asked_to_stop_records_no_start_and_a_migration_keeps_why_it_did_not_move(world) -> None:
    ours = Assignment("4", 1, {"node2": (0,)})
    plan = _world(world)
    world.slurm.jobs["4"] = managed(4, state=S.RUNNING, assignment=ours)
    with world.store.session() as s:
        s.add(JobRow(job_id="4", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node2:0",
                     assignment=ours.encode()))
    to = Target({"node2": (1,)})
    moved = Action("migrate", "4", target=to, previous={"node2": (0,)})
    plan = RoundPlan({**plan.targets, "4": to}, (plan.actions[0], moved, *plan.actions[1:]), ())
    world.stop.set()
    rid = world.begin_round()
    result = apply_plan(rid, plan, look(world), {"1": A_ON, "4": {"node2": (0,)}}, world.applier(), world.guard(),
                        world.journal, Metrics(), world.stop)
    left = "daemon stopping: the preemption is finished by the next start"
    assert result.skipped == {"1": left, "4": left, "2": "daemon stopping", "3": "daemon stopping"}
    assert [(a.kind, a.job_id, a.status) for a in world.store.actions(rid)] == [
        ("preempt", "1", "skipped"), ("migrate", "4", "skipped")]  # the starts never got as far as an intent


def test_each_action_is_counted_once_by_kind_and_the_stops_are_recorded_with_their_gpus(world, monkeypatch) -> None:
    import types

    from tesserae_slurm.daemon.round import apply as apply_module

    ours = Assignment("4", 1, {"node2": (0,)})
    plan = _world(world)
    world.slurm.jobs["4"] = managed(4, state=S.RUNNING, assignment=ours)
    with world.store.session() as s:
        s.add(JobRow(job_id="4", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node2:0",
                     assignment=ours.encode()))
    to = Target({"node2": (1,)})
    moved = Action("migrate", "4", target=to, previous={"node2": (0,)})
    plan = RoundPlan({**plan.targets, "4": to}, (plan.actions[0], moved, *plan.actions[1:]), ())
    world.slurm.fail = {("place", "3")}  # one start fails: it is not counted
    ticks = iter([10.0, 10.25])  # the round's clock for apply_ms: 250 ms between its first and last look
    monkeypatch.setattr(apply_module, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    metrics = Metrics()
    rid = world.begin_round()
    result = apply_plan(rid, plan, look(world), {"1": A_ON, "4": {"node2": (0,)}}, world.applier(), world.guard(),
                        world.journal, metrics, world.stop)
    assert result.started == {"2", "4"} and result.stopped == {"1", "4"} and set(result.failed) == {"3"}
    assert metrics.actions == {"preempt": 1, "migrate": 1, "start": 1}
    assert world.store.round(rid).apply_ms == 250.0
    actions = [(a.kind, a.job_id, json.loads(a.detail), a.status) for a in world.store.actions(rid)]
    assert actions[:2] == [("preempt", "1", {"from": "node1:0", "to": ""}, "done"),
                           ("migrate", "4", {"from": "node2:0", "to": "node2:1"}, "done")]
    assert actions[-1] == ("secure", "1", {}, "done")  # only the preempted job is held as the daemon's


def test_a_preempted_jobs_hold_that_fails_is_left_to_the_next_look(world) -> None:
    plan = _world(world)
    world.slurm.fail = {("admin_hold", "1")}
    rid = world.begin_round()
    result = apply_plan(rid, plan, look(world), {"1": A_ON}, world.applier(), world.guard(), world.journal, Metrics(),
                        world.stop)
    assert result.stopped == {"1"} and result.started == {"2", "3"} and not result.failed
    assert [(a.kind, a.status) for a in world.store.actions(rid)][-1] == ("secure", "failed")


def test_a_stop_carried_over_keeps_its_gpus_booked_and_a_start_waits_for_every_holder(world) -> None:
    # 5 is still being preempted from an earlier round (PREEMPTING, still running): its GPU stays booked.
    # 1 is preempted now and 3 keeps node1 GPU 1: 6 needs GPUs 0 and 1, so it waits for 3 even once 1 is gone.
    on0, on1 = Assignment("1", 1, A_ON), Assignment("3", 1, {"node1": (1,)})
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING, assignment=on0), "3": managed(3, state=S.RUNNING,
                                                                                       assignment=on1),
                        "5": managed(5, state=S.RUNNING), "6": managed(6), "7": managed(7)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:0", assignment=on0.encode()))
        s.add(JobRow(job_id="3", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:1", assignment=on1.encode()))
        s.add(JobRow(job_id="5", num_gpus=1, submit_time=0.0, state="PREEMPTING", gpus="node2:3"))
        s.add(JobRow(job_id="8", num_gpus=1, submit_time=0.0, state="PREEMPTING"))  # nothing booked
        for j in "67":
            s.add(JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="PENDING"))
    six, seven = Target({"node1": (0, 1)}), Target({"node2": (3,)})
    plan = RoundPlan({"3": Target({"node1": (1,)}), "6": six, "7": seven},
                     (Action("preempt", "1", previous=A_ON), Action("start", "6", target=six),
                      Action("start", "7", target=seven)), ("3",))
    result = apply_plan(world.begin_round(), plan, look(world), {"1": A_ON, "3": {"node1": (1,)}}, world.applier(),
                        world.guard(), world.journal, Metrics(), world.stop)
    assert result.stopped == {"1"} and not result.started
    assert result.skipped == {"6": "GPUs still held by job(s) 3", "7": "GPUs still held by job(s) 5"}
