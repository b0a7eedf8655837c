"""The feedback step: refusals worth an operator's look become one event per job (not one per round), and a
failure to read the reports is recorded without costing the round. Folding itself: tests/daemon/test_feedback.py."""

from __future__ import annotations

import logging

from tesserae_slurm.daemon.feedback.online import OnlineFeedback
from tesserae_slurm.daemon.round.throughput import take_reports
from tesserae_slurm.daemon.state.store import JobRow
from tesserae_slurm.site.partition import scheduling_profile

from .world import make_world


def test_a_suspicious_refusal_is_an_event_once_and_a_failure_costs_nothing(tmp_path, caplog) -> None:
    reports = tmp_path / "reports"
    world = make_world(tmp_path, feedback={"reports_dir": str(reports)})
    feedback = OnlineFeedback(world.cfg, world.store, scheduling_profile("a100"))
    with world.store.session() as s:  # a user this host does not know: no report file of theirs is trusted
        s.add(JobRow(job_id="4", user="no-such-user-here", num_gpus=1, submit_time=0.0, state="RUNNING"))
    (reports / "4.jsonl").write_text('{"round": 1, "t0": 0, "t1": 60, "steps": 600}\n')
    for rid in (1, 2):
        take_reports(feedback, world.journal, 1000.0, rid)
    assert [(e.job_id, e.round_id, e.message) for e in world.store.events()] == [
        ("4", 1, "throughput reports ignored: report file refused: user 'no-such-user-here' is unknown on this host")]

    def broken(now: float) -> None:
        raise OSError("disk gone")
    feedback.collect = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR):
        take_reports(feedback, world.journal, 1001.0, 3)
    assert world.store.events()[0].message == "reading throughput reports failed: OSError('disk gone')"
    assert "online feedback failed" in caplog.text


def test_the_round_says_in_one_log_line_how_many_reports_it_folded_and_whose_it_refused(tmp_path, caplog) -> None:
    reports = tmp_path / "reports"
    world = make_world(tmp_path, feedback={"reports_dir": str(reports)})
    feedback = OnlineFeedback(world.cfg, world.store, scheduling_profile("a100"))
    with world.store.session() as s:
        for j in "1234":
            s.add(JobRow(job_id=j, user=f"nobody-{j}", num_gpus=1, submit_time=0.0, state="RUNNING"))
    for j in "1234":
        (reports / f"{j}.jsonl").write_text('{"round": 1, "t0": 0, "t1": 60, "steps": 600}\n')
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.throughput"):
        take_reports(feedback, world.journal, 1000.0, 7)
    why = "report file refused: user 'nobody-{}' is unknown on this host"
    assert [r.getMessage() for r in caplog.records] == [  # the first three refusals, by job
        f"round 7: folded 0 throughput report(s); refused reports of 4 job(s); job 1: {why.format(1)}; "
        f"job 2: {why.format(2)}; job 3: {why.format(3)}"]
    assert {(e.kind, e.job_id, e.round_id) for e in world.store.events()} == {("feedback", j, 7) for j in "1234"}


def test_a_failure_to_read_the_reports_is_an_event_of_the_round_and_one_log_line(tmp_path, caplog) -> None:
    world = make_world(tmp_path, feedback={"reports_dir": str(tmp_path / "reports")})
    feedback = OnlineFeedback(world.cfg, world.store, scheduling_profile("a100"))

    def broken(now: float) -> None:
        raise OSError("disk gone")
    feedback.collect = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.throughput"):
        take_reports(feedback, world.journal, 1001.0, 3)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("ERROR", "online feedback failed")]
    assert [(e.time, e.kind, e.round_id, e.message) for e in world.store.events()] == [
        (1001.0, "feedback", 3, "reading throughput reports failed: OSError('disk gone')")]
