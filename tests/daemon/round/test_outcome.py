"""outcome: the round's status and problems by job, one more round run for each job that ran through it,
the round's row closed, the metrics counted; a round that could not decide says why."""

from __future__ import annotations

import logging

from tesserae_slurm.daemon.round.actions import RoundPlan, Target
from tesserae_slurm.daemon.round.stop_start import ApplyResult
from tesserae_slurm.daemon.round.decide import Decided
from tesserae_slurm.daemon.round.outcome import applied, finish_round, skip_round
from tesserae_slurm.daemon.service.metrics import Metrics
from tesserae_slurm.daemon.state.store import JobRow
from tesserae_slurm.model import Placement, RoundDecision


def _plan() -> RoundPlan:
    t = Target({"node1": (0,)})
    return RoundPlan({"1": t, "2": t, "3": t}, (), ("1",))


def test_kept_and_started_jobs_ran_the_round_and_failures_make_it_partial(world) -> None:
    with world.store.session() as s:
        for j in "123":
            s.add(JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="RUNNING"))
    result = ApplyResult(started={"2"}, failed={"3": "place 3: refused"}, skipped={"4": "GPUs still held by job(s) 1"})
    assert applied(world.journal, _plan(), result) == (
        "partial", "job 3: place 3: refused; job 4: GPUs still held by job(s) 1")
    assert {j: world.store.job(j).rounds_run for j in "123"} == {"1": 1, "2": 1, "3": 0}
    assert applied(world.journal, RoundPlan({}, (), ()), ApplyResult()) == ("applied", "")


def test_finish_closes_the_round_and_counts_it(world) -> None:
    rid, metrics = world.begin_round(), Metrics()
    decided = Decided(RoundDecision(Placement({}), (), (), (), (), (), ()), _plan(), (), None, 0.001, 0.002)
    result = finish_round(world.journal, metrics, rid, "applied", decided, "", 0.0, lambda: 1234.0)
    row = world.store.round(rid)
    assert (row.status, row.finished_at, result.status, result.plan) == ("applied", 1234.0, "applied", _plan())
    assert metrics.rounds == {"applied": 1} and metrics.decision_seconds_last == 0.002


def test_a_skipped_round_says_why_in_its_row_and_an_event(world, caplog) -> None:
    rid, metrics = world.begin_round(), Metrics()
    with caplog.at_level(logging.ERROR, logger="tesserae_slurm.daemon.round.outcome"):
        result = skip_round(world.journal, metrics, rid, "Slurm unavailable: timed out", "skipped", lambda: 99.0)
    assert (result.round_id, result.status, result.error, result.decision) == (
        rid, "skipped", "Slurm unavailable: timed out", None)
    row = world.store.round(rid)
    assert (row.status, row.error, row.finished_at) == ("skipped", "Slurm unavailable: timed out", 99.0)
    assert metrics.rounds == {"skipped": 1}
    assert [r.getMessage() for r in caplog.records] == [f"round {rid} skipped: Slurm unavailable: timed out"]
    (event,) = world.store.events()
    assert (event.kind, event.round_id, event.message) == ("round-skipped", rid, "Slurm unavailable: timed out")


def test_the_rounds_log_line_counts_its_actions_and_names_its_problems(world, caplog) -> None:
    import re
    import time

    from tesserae_slurm.daemon.round.actions import Action
    from tesserae_slurm.model import PackedPair

    t = Target({"node1": (0,)})
    plan = RoundPlan({"1": t, "2": t, "4": t}, (Action("preempt", "3", previous={"node1": (1,)}),
                                                Action("migrate", "4", target=t, previous={"node1": (2,)}),
                                                Action("start", "2", target=t)), ("1",))
    decided = Decided(RoundDecision(Placement({}), (), (), (), (), (PackedPair("1", "2", 0.5, 0.5),), ()), plan, (),
                      None, 0.001, 0.0125)
    rid = world.begin_round()
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.outcome"):
        finish_round(world.journal, Metrics(), rid, "partial", decided, "job 2: place 2: refused",
                     time.perf_counter(), lambda: 1.0)
    (line,) = [r.getMessage() for r in caplog.records]
    assert re.fullmatch(rf"round {rid} partial: 1 started, 1 preempted, 1 migrated, 1 kept, 1 packed pairs, 0 pending "
                        r"\(12\.5 ms decision, \d+\.\d\d s round\); problems: job 2: place 2: refused", line), line
