"""carry_out: operators' requeue and cancel requests act in the round that took them in, and each request's
row says what became of it. Against real Slurm: tests/daemon/test_admin_actions_live.py."""

from __future__ import annotations

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.round.carry_out import carry_out
from tesserae_slurm.daemon.round.observe import build_snapshot
from tesserae_slurm.daemon.state.store import AdminRow, JobRow
from tesserae_slurm.harness.assignment import Assignment
from tesserae_slurm.slurm import SlurmError
from tesserae_slurm.slurm import SlurmJobState as S

from ..fake_slurm import managed


def _requests(world, *commands: tuple[str, str]) -> list[AdminRow]:
    world.store.add_admin_actions([AdminRow(time=1.0, user="root", uid=0, command=c, target=t, status="accepted")
                                   for c, t in commands])
    return admin.standing(world.store).once


def test_cancel_and_requeue_act_and_a_request_for_a_job_not_running_fails_with_the_reason(world) -> None:
    ours = Assignment("2", 1, {"node1": (3,)})
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING), "2": managed(2, state=S.RUNNING, assignment=ours),
                        "3": managed(3, state=S.COMPLETING), "4": managed(4)}
    with world.store.session() as s:
        s.add(JobRow(job_id="2", num_gpus=1, submit_time=0.0, state="RUNNING", assignment=ours.encode(),
                     gpus="node1:3"))
    rows = _requests(world, ("cancel", "1"), ("requeue", "2"), ("requeue", "3"), ("requeue", "4"), ("cancel", "9"))
    snap = build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    rid = world.begin_round()
    assert carry_out(rows, snap, world.applier(), world.slurm, world.store, rid)
    assert world.slurm.methods() == ["cancel", "signal", "requeue_hold"]
    assert world.slurm.jobs["1"].state is S.CANCELLED and world.slurm.jobs["2"].held
    done = {r.target: (r.status, r.note) for r in world.store.admin_actions()}
    assert done == {"1": ("done", f"cancelled in round {rid}"),
                    "2": ("done", f"checkpoint-signalled and requeued in round {rid}"),
                    "3": ("done", "not running: nothing to requeue"),
                    "4": ("failed", "not an active managed job in the partition"),
                    "9": ("failed", "not an active managed job in the partition")}
    assert [(a.kind, a.job_id, a.detail) for a in world.store.actions(rid)] == [
        ("requeue", "2", '{"from":"node1:3","to":""}')]


def test_nothing_asked_of_slurm_means_no_second_look(world) -> None:
    rows = _requests(world, ("cancel", "5"))
    snap = build_snapshot(1000.0, (), world.slurm.nodes, world.cfg)
    assert carry_out(rows, snap, world.applier(), world.slurm, world.store, world.begin_round()) is False
    assert world.slurm.writes() == []


def _snap(world):
    return build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)


def test_a_cancel_slurm_refuses_fails_with_its_error_cut_to_300_characters(world) -> None:
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING)}

    def refuse(job_id: int) -> None:
        raise SlurmError("scancel: error: " + "x" * 400)
    world.slurm.cancel = refuse  # type: ignore[method-assign]
    rows = _requests(world, ("cancel", "1"))
    assert carry_out(rows, _snap(world), world.applier(), world.slurm, world.store, world.begin_round()) is True
    (row,) = world.store.admin_actions()
    assert (row.status, row.note) == ("failed", ("scancel: error: " + "x" * 400)[:300])


def test_a_requeue_that_fails_says_why_and_a_job_not_running_is_not_signalled(world) -> None:
    ours = Assignment("1", 1, {"node1": (0,)})
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING, assignment=ours), "2": managed(2, state=S.COMPLETING)}
    world.slurm.fail = {("requeue_hold", "1")}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="RUNNING", assignment=ours.encode(),
                     gpus="node1:0"))
        s.add(JobRow(job_id="2", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:1"))
    rows = _requests(world, ("requeue", "1"), ("requeue", "2"))
    assert carry_out(rows, _snap(world), world.applier(), world.slurm, world.store, world.begin_round()) is True
    assert {r.target: (r.status, r.note) for r in world.store.admin_actions()} == {
        "1": ("failed", "requeue_hold 1: refused"), "2": ("done", "not running: nothing to requeue")}
    assert world.slurm.methods() == ["signal", "requeue_hold"] and world.slurm.signals == [("1", "USR1")]
