"""Reconciliation rules (pure): the database's intent against what Slurm reports, row by row."""

from __future__ import annotations

import pytest

from tesserae_slurm.daemon.round.observe import managed_job
from tesserae_slurm.daemon.round.transitions import account, close_run, transition
from tesserae_slurm.daemon.state.journal import NEW, JobFacts
from tesserae_slurm.daemon.state.store import TERMINAL_STATES, JobUpdate
from tesserae_slurm.harness.assignment import Assignment
from tesserae_slurm.slurm import SlurmJob, SlurmJobState as S
from tesserae_slurm.model.meta import JobMeta

META = JobMeta(2, "resnet50", "64").encode()
OURS = Assignment("7", 3, {"node1": (0, 1)}).encode()
OLD = Assignment("7", 1, {"node2": (2, 3)}).encode()
NOW = 1000.0


def sj(state: S = S.PENDING, reason: str = "", priority: int = 1, admin: str = "", comment: str = META,
       start: int | None = None, end: int | None = None, exit_code: int | None = None) -> SlurmJob:
    return SlurmJob(7, "j", "u", state, reason=reason, priority=priority, admin_comment=admin, comment=comment,
                    start_time=start, end_time=end, exit_code=exit_code)


HELD = dict(reason="JobHeldUser", priority=0)
CASES = [
    # (db state, db assignment, slurm job, -> state, followup, event?)
    ("RUNNING", OURS, None, "LOST", "", True),
    ("COMPLETED", "", None, "COMPLETED", "", False),
    ("RUNNING", OURS, sj(S.COMPLETED, exit_code=0), "COMPLETED", "", False),
    ("RUNNING", OURS, sj(S.FAILED, exit_code=3), "FAILED", "", False),
    # a checkpointed job waits for the requeue-hold (job side): one that finished has ended, never requeued
    ("PREEMPTING", OURS, sj(S.COMPLETED), "COMPLETED", "", False),
    ("PREEMPTING", OURS, sj(S.FAILED, exit_code=1), "FAILED", "", False),
    ("PREEMPTING", OURS, sj(S.CANCELLED), "CANCELLED", "", False),  # the user cancelled it meanwhile
    ("PREEMPTING", OURS, sj(S.RUNNING, admin=OURS), "PREEMPTING", "requeue", False),  # signal sent or not: finish
    ("PREEMPTING", OURS, sj(S.PENDING, **HELD), "PENDING", "", False),  # the requeue-hold went through
    ("STARTING", OURS, sj(S.RUNNING, admin=OURS), "RUNNING", "", False),
    ("RUNNING", OURS, sj(S.RUNNING, admin=OURS), "RUNNING", "", False),
    ("STARTING", OURS, sj(S.PENDING, admin=OURS), "STARTING", "", False),  # released, not started yet
    ("STARTING", OURS, sj(S.PENDING, admin=OURS, **HELD), "PENDING", "", True),  # crash before the release
    ("STARTING", OURS, sj(S.PENDING, admin=OLD, **HELD), "PENDING", "", True),  # crash before the comment
    ("PENDING", "", sj(S.RUNNING, admin=OLD), "PENDING", "evict", True),  # released by hand: stale GPUs
    ("RUNNING", OURS, sj(S.RUNNING, admin=OLD), "PENDING", "evict", True),  # AdminComment changed by hand
    ("PENDING", "", sj(S.PENDING, admin=OLD), "PENDING", "hold", True),  # released by hand, not started
    ("RUNNING", OURS, sj(S.PENDING, reason="BeginTime", admin=OURS), "PENDING", "hold", True),  # requeued by hand
    ("PENDING", "", sj(S.PENDING, **HELD), "PENDING", "", False),
    ("PENDING", "", sj(S.PENDING, reason="JobHeldAdmin", priority=0), "PENDING", "", False),
    ("COMPLETED", "", sj(S.PENDING, **HELD), "PENDING", "", True),  # requeued by hand: scheduled again
    (NEW, "", sj(S.PENDING, **HELD), "PENDING", "", False),
    (NEW, "", sj(S.RUNNING, admin=OURS), "RUNNING", "", True),  # adopted (database replaced)
    (NEW, "", sj(S.RUNNING), "PENDING", "evict", True),  # running without any assignment
    ("PENDING", "", sj(S.PENDING, comment="tesserae:v1:{broken", **HELD), "PENDING", "", False),
    ("RUNNING", OURS, sj(S.RUNNING, comment="tesserae:v1:{broken", admin=OURS), "PREEMPTING", "requeue", True),
    ("PENDING", "", sj(S.PENDING, comment="tesserae:v1:{broken"), "PENDING", "hold", False),  # released by hand
    ("RUNNING", OURS, sj(S.TIMEOUT, comment="tesserae:v1:{broken"), "TIMEOUT", "", False),
]


@pytest.mark.parametrize("state,assignment,slurm,want,followup,event", CASES, ids=[
    "vanished", "finished-stays", "completed", "failed", "completed-while-preempting", "failed-while-preempting",
        "cancelled-while-preempting",
    "preempting-still-running", "preempt-done", "started", "running", "released-not-started",
    "crash-before-release", "crash-before-comment", "hand-released-running", "hand-changed-comment",
    "hand-released-pending", "hand-requeued-running", "held", "admin-hold", "hand-requeued-finished", "new-held", "new-adopted",
    "new-running-unknown", "bad-meta-held", "bad-meta-running", "bad-meta-released", "bad-meta-finished"])
def test_transition_table(state, assignment, slurm, want, followup, event):
    f = JobFacts("7", state, assignment, placed_at=NOW - 5)
    t = transition(f, managed_job(slurm) if slurm is not None else None, NOW, start_timeout_s=60)
    assert (t.state, t.followup, bool(t.event)) == (want, followup, event)
    if (want == "PENDING" or want in TERMINAL_STATES) and state != want:  # it holds no GPU any more
        assert t.clear_placement


def test_an_admin_hold_is_the_daemons_own_only_when_its_store_says_so():
    # after a requeue-hold Slurm describes the job as "job requeued in held state" whoever holds it;
    # only the reason code says it is an administrator's hold, and only the store says whose
    held = SlurmJob(7, "j", "u", S.PENDING, reason="job requeued in held state", priority=0, comment=META,
                    state_reason="JobHeldAdmin")
    f = JobFacts("7", "PENDING")
    theirs = transition(f, managed_job(held), NOW, start_timeout_s=60)
    ours = transition(f, managed_job(held), NOW, start_timeout_s=60, own_hold=True)
    assert "administrator" in theirs.reason and theirs.followup == ""
    assert ours.state == "PENDING" and "administrator" not in ours.reason and ours.followup == ""


def test_a_released_job_slurm_does_not_start_is_held_back_after_the_timeout():
    f = JobFacts("7", "STARTING", OURS, placed_at=NOW - 61)
    t = transition(f, managed_job(sj(S.PENDING, reason="Resources", admin=OURS)), NOW, start_timeout_s=60)
    assert (t.state, t.followup) == ("PENDING", "hold") and "Resources" in t.reason


def test_account_counts_each_run_once_keyed_by_slurm_start_time():
    f = JobFacts("7", "RUNNING", num_gpus=2)
    # first look at a run that started at 100: 50 s so far
    e, start, counted, work = account(f, sj(S.RUNNING, start=100), 150.0)
    assert (e, start, counted, work) == (50.0, 100.0, 50.0, 50.0)  # alone at full speed: work = time
    f = JobFacts("7", "RUNNING", executed_time=e, run_start=start, run_counted=counted, work_done=work)
    # a later look (or a restarted daemon) adds only the new part
    assert account(f, sj(S.RUNNING, start=100), 170.0) == (70.0, 100.0, 70.0, 70.0)
    # the run ended at 180 (Slurm's end time), seen at 500: counted up to the end, not to now
    assert account(f, sj(S.COMPLETED, start=100, end=180), 500.0) == (80.0, 100.0, 80.0, 80.0)
    # a new run (requeued, restarted at 300) starts its own count
    assert account(f, sj(S.RUNNING, start=300), 310.0) == (60.0, 300.0, 10.0, 60.0)
    # a pending job adds nothing
    assert account(f, sj(S.PENDING), 999.0) == (50.0, 100.0, 50.0, 50.0)


def test_work_done_grows_at_the_speed_of_the_placement_it_ran_in():
    # 40 s counted at full speed, then packed at 0.3 (the row's speed, written by last round): the 60 s
    # since the last look are 18 s of work; GPU-seconds still count every second held
    f = JobFacts("7", "RUNNING", num_gpus=2, executed_time=40.0, run_start=100.0, run_counted=40.0, speed=0.3,
                 work_done=40.0)
    c = account(f, sj(S.RUNNING, start=100), 200.0)
    assert c.executed_time == 100.0 and c.work_done == pytest.approx(58.0)
    up = c.onto(JobUpdate(state="RUNNING"), f.num_gpus)
    assert (up.state, up.executed_time, up.run_start, up.run_counted, up.attained_service) == \
        ("RUNNING", 100.0, 100.0, 100.0, 200.0) and up.work_done == pytest.approx(58.0)
    # a requeue closes the run at the same speed
    f = JobFacts("7", "PREEMPTING", executed_time=100.0, run_start=100.0, run_counted=100.0, speed=0.5,
                 work_done=58.0)
    assert close_run(f, 220.0).work_done == pytest.approx(68.0)  # 20 s since the last look, at 0.5


def test_close_run_counts_up_to_the_requeue():
    f = JobFacts("7", "PREEMPTING", executed_time=50.0, run_start=100.0, run_counted=50.0, work_done=50.0)
    assert close_run(f, 170.0) == (70.0, None, 0.0, 70.0)  # 50 counted + the 20 s since the last look
    assert close_run(JobFacts("7"), 170.0) == (0.0, None, 0.0, 0.0)


def test_what_an_admin_reads_of_each_rule_that_needs_a_look():
    bad = "tesserae:v1:{broken"
    cases = [
        (JobFacts("7", "RUNNING", OURS), None,
         "job vanished from Slurm while the daemon was not looking"),
        (JobFacts("7", "RUNNING", OURS), sj(S.RUNNING, comment=bad, admin=OURS),
         "a job with invalid metadata was running: requeue-held"),
        (JobFacts("7", NEW), sj(S.RUNNING, admin=OURS),
         "adopted a running job the database did not know (state file replaced?)"),
        (JobFacts("7", "PENDING"), sj(S.RUNNING, admin=OLD),
         "running without the daemon's current assignment (released by hand?): requeue-held"),
        (JobFacts("7", "STARTING", OURS), sj(S.PENDING, admin=OURS, **HELD),
         "placed job is held again (requeued or held outside tesserae, or an interrupted start)"),
        (JobFacts("7", "COMPLETED"), sj(S.PENDING, **HELD),
         "finished job (COMPLETED) is back in the queue (requeued by hand)"),
        (JobFacts("7", "RUNNING", OURS), sj(S.PENDING, reason="BeginTime", admin=OURS),
         "requeued outside tesserae: held again"),
        (JobFacts("7", "PENDING"), sj(S.PENDING, admin=OLD), "released outside tesserae: held again"),
    ]
    for f, slurm, event in cases:
        assert transition(f, managed_job(slurm) if slurm else None, NOW, start_timeout_s=60).event == event


def test_a_finished_jobs_reason_names_its_end_and_its_exit_code_when_it_has_one():
    f = JobFacts("7", "RUNNING", OURS)
    assert transition(f, managed_job(sj(S.FAILED, exit_code=3)), NOW, 60).reason == "failed (exit code 3)"
    assert transition(f, managed_job(sj(S.COMPLETED, exit_code=0)), NOW, 60).reason == "completed"


def test_close_run_at_the_moment_of_the_last_look_adds_nothing():
    f = JobFacts("7", "PREEMPTING", executed_time=50.0, run_start=100.0, run_counted=50.0, work_done=50.0)
    assert close_run(f, 150.0) == (50.0, None, 0.0, 50.0)
    assert close_run(f, 150.5) == (50.5, None, 0.0, 50.5)
