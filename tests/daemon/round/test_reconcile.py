"""reconcile: each row follows what Slurm shows (the rules themselves: test_transitions.py), new managed
jobs get a row, and what the rows cannot settle comes back as followups for the guard."""

from __future__ import annotations

from dataclasses import replace

from tesserae_slurm.daemon.round.observe import build_snapshot
from tesserae_slurm.daemon.round.reconcile import reconcile
from tesserae_slurm.daemon.state.store import JobRow
from tesserae_slurm.harness.assignment import Assignment
from tesserae_slurm.slurm import SlurmJobState as S

from ..fake_slurm import managed


def _reconcile(world, now: float = 1000.0, own: set[str] = frozenset()):
    snap = build_snapshot(now, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)
    return reconcile(world.journal, snap, set(own), world.cfg.slurm.start_timeout_s, None)


def test_new_jobs_get_a_row_and_one_released_by_hand_is_held_again(world) -> None:
    world.slurm.jobs = {"1": managed(1, submit_time=50), "2": managed(2, held=False),
                        "3": managed(3, state=S.COMPLETED)}
    out = _reconcile(world)
    rows = {r.job_id: r for r in world.store.jobs()}
    assert set(rows) == {"1", "2"}  # finished before the daemon saw it: no row
    assert rows["1"].state == "PENDING" and rows["1"].submit_time == 50.0 and rows["1"].model == "DCGAN"
    assert out.hold == ["2"] and not out.requeue and not out.evict
    assert [e.message for e in world.store.events("2")] == ["released outside tesserae: held again"]


def test_a_job_running_on_its_recorded_assignment_is_counted_and_one_without_is_evicted(world) -> None:
    ours = Assignment("1", 3, {"node1": (0,)})
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING, assignment=ours, start_time=900),
                        "2": managed(2, state=S.RUNNING, start_time=900)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="STARTING", assignment=ours.encode(),
                     gpus="node1:0", placed_at=890.0))
        s.add(JobRow(job_id="2", num_gpus=1, submit_time=0.0, state="PENDING"))
    out = _reconcile(world, now=1000.0)
    one, two = world.store.job("1"), world.store.job("2")
    assert one.state == "RUNNING" and one.executed_time == 100.0 and one.first_start == 900.0
    assert two.state == "PENDING" and two.reason == "started outside tesserae: stopped and held"
    assert out.evict == ["2"] and not out.hold


def test_a_preemption_carried_over_comes_back_as_a_requeue_with_its_gpus(world) -> None:
    ours = Assignment("1", 3, {"node2": (1, 2)})
    world.slurm.jobs = {"1": managed(1, 2, state=S.RUNNING, assignment=ours, start_time=900)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=2, submit_time=0.0, state="PREEMPTING", assignment=ours.encode(),
                     gpus="node2:1-2"))
    out = _reconcile(world)
    assert [(r.kind, r.job_id, r.previous) for r in out.requeue] == [("requeue", "1", {"node2": (1, 2)})]
    assert world.store.job("1").state == "PREEMPTING"


def test_a_job_that_vanished_is_lost_and_one_that_finished_keeps_its_exit(world) -> None:
    world.slurm.jobs = {"2": replace(managed(2, state=S.FAILED, start_time=900, nodes=("node1",)), end_time=950,
                                     exit_code=3)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:0"))
        s.add(JobRow(job_id="2", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:1"))
    assert not _reconcile(world)
    one, two = world.store.job("1"), world.store.job("2")
    # an ended job holds no GPUs (its state says so) but keeps where it last ran, as squeue shows it
    assert one.state == "LOST" and one.gpus == "node1:0" and one.assignment == "" and one.packed_with == ""
    assert two.state == "FAILED" and two.exit_code == 3 and two.finished_at == 950.0 and two.gpus == "node1:1"
    assert two.nodes == "node1" and two.run_start == 900.0  # Slurm's node list; the last start for squeue's TIME


def test_a_job_recorded_lost_that_slurm_shows_finished_takes_slurms_end(world) -> None:
    # LOST is the daemon's guess (the job vanished from squeue); once Slurm lists it again as finished, its
    # real end replaces the guess. Any other finished state recorded stays as it was.
    world.slurm.jobs = {"1": replace(managed(1, state=S.FAILED, start_time=900), end_time=950, exit_code=2),
                        "2": replace(managed(2, state=S.FAILED, start_time=900), end_time=960, exit_code=9)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="LOST", reason="vanished from Slurm"))
        s.add(JobRow(job_id="2", num_gpus=1, submit_time=0.0, state="COMPLETED", reason="completed"))
    assert not _reconcile(world)
    one, two = world.store.job("1"), world.store.job("2")
    assert (one.state, one.reason, one.exit_code, one.finished_at) == ("FAILED", "failed (exit code 2)", 2, 950.0)
    assert (two.state, two.reason) == ("COMPLETED", "completed")


def test_a_released_job_gets_the_whole_start_timeout_and_is_held_again_only_past_it(world) -> None:
    timeout = world.cfg.slurm.start_timeout_s
    ours = Assignment("1", 3, {"node1": (0,)})
    world.slurm.jobs = {"1": managed(1, held=False, assignment=ours, reason="Resources")}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="STARTING", assignment=ours.encode(),
                     gpus="node1:0", placed_at=1000.0 - timeout))
    assert not _reconcile(world, now=1000.0)  # exactly the timeout: still Slurm's to start
    assert world.store.job("1").state == "STARTING" and world.store.job("1").gpus == "node1:0"
    out = _reconcile(world, now=1000.5)
    row = world.store.job("1")
    assert out.hold == ["1"] and not out.evict and not out.requeue
    assert (row.state, row.gpus, row.assignment) == ("PENDING", "", "")
    assert row.reason == f"Slurm did not start it within {timeout:g} s (Resources)"


def test_followups_are_due_when_any_list_has_a_job() -> None:
    from tesserae_slurm.daemon.round.actions import StopItem
    from tesserae_slurm.daemon.round.reconcile import Followups

    assert not Followups()
    assert Followups(requeue=[StopItem("requeue", "1")]) and Followups(hold=["1"]) and Followups(evict=["1"])


def test_a_running_job_the_database_lost_is_adopted_on_the_assignment_slurm_shows(world) -> None:
    found = Assignment("1", 4, {"node2": (1, 2)}, partner="2", strategy="10,14")
    world.slurm.jobs = {"1": managed(1, 2, state=S.RUNNING, assignment=found, start_time=900)}
    assert not _reconcile(world)
    row = world.store.job("1")
    assert (row.state, row.assignment, row.assign_round, row.gpus, row.nodes, row.packed_with, row.strategy) == (
        "RUNNING", found.encode(), 4, "node2:1-2", "node2", "2", "10,14")
    assert row.reason == "adopted: running on the assignment found in Slurm"


def test_a_hold_the_daemon_made_is_not_taken_for_an_administrators(world) -> None:
    held = replace(managed(1), reason="JobHeldAdmin", state_reason="JobHeldAdmin")
    world.slurm.jobs = {"1": held}
    _reconcile(world, own={"1"})
    assert world.store.job("1").reason == ""
    _reconcile(world)
    assert world.store.job("1").reason.startswith("held by an administrator")


def test_a_round_writes_a_row_only_where_its_job_changed_and_stamps_every_job_it_saw(world) -> None:
    """What Slurm shows unchanged leaves a row as it is but for last_seen; a running job's counters move; a
    finished job Slurm still lists (its row ended) is stamped too. A trigger lists the rows written."""
    ours = Assignment("1", 3, {"node1": (0,)})
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING, assignment=ours, start_time=900), "2": managed(2),
                        "3": replace(managed(3, state=S.COMPLETED, start_time=800), end_time=850)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="STARTING", assignment=ours.encode(),
                     gpus="node1:0", placed_at=890.0))
        s.add(JobRow(job_id="3", num_gpus=1, submit_time=0.0, state="COMPLETED", reason="completed"))
    _reconcile(world, now=1000.0)
    with world.store.engine.begin() as conn:
        conn.exec_driver_sql("create table wrote (job_id text)")
        conn.exec_driver_sql("create trigger written after update of state, slurm_state, reason, name, restarts, "
                             "executed_time, run_start, run_counted, work_done, attained_service on jobs "
                             "begin insert into wrote values (new.job_id); end")
    before = {r.job_id: r for r in world.store.jobs()}
    _reconcile(world, now=1100.0)
    after = {r.job_id: r for r in world.store.jobs()}
    with world.store.engine.connect() as conn:
        wrote = {r[0] for r in conn.exec_driver_sql("select job_id from wrote")}
    assert wrote == {"1"}  # "3": only its last_seen
    assert {j: r.last_seen for j, r in after.items()} == {"1": 1100.0, "2": 1100.0, "3": 1100.0}
    assert after["1"].executed_time == 200.0 and before["1"].executed_time == 100.0
    assert (after["2"].state, after["2"].reason, after["2"].slurm_state) == (before["2"].state, "", "PENDING")
