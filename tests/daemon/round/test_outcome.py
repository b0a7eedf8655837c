"""outcome: the round's status and problems by job, one more round run for each job that ran through it,
the round's row closed, the metrics counted; a round that could not decide says why."""

from __future__ import annotations

import logging

from tesserae_slurm.daemon.round.actions import RoundPlan, Target
from tesserae_slurm.daemon.round.decide import Decided
from tesserae_slurm.daemon.round.outcome import applied, finish_round, skip_round
from tesserae_slurm.daemon.round.stop_start import ApplyResult
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


def parse_exposition(text: str) -> dict[str, dict]:
    """The text format read back as Prometheus reads it: per family its TYPE, HELP and samples
    ({(sample name, ((label, value), ...)): value}); malformed lines fail the test."""
    import re

    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
    families: dict[str, dict] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, kind, name, rest = line.split(" ", 3)
            families.setdefault(name, {"samples": {}})[kind.lower()] = rest
            continue
        m = sample.match(line)
        assert m, line
        name, labels, value = m.groups()
        pairs = tuple(label.findall(labels or ""))
        assert ",".join(f'{k}="{v}"' for k, v in pairs) == (labels or ""), line
        family = next(f for f in families if name == f or (
            families[f]["type"] in ("histogram", "summary") and name in (f + "_bucket", f + "_sum", f + "_count")))
        families[family]["samples"][(name, pairs)] = float(value)
    for name, f in families.items():
        assert "type" in f and "help" in f, name
        if f["type"] == "counter":
            assert name.endswith("_total"), name
    return families


def test_metrics_count_active_jobs_gpus_and_ended_jobs_as_prometheus_reads_them(world) -> None:
    """GPUs busy and packed, pending by reason, GPUs per user and account, the wait and run histograms and
    the ended-jobs counter, read back from the exposition text and checked against the rows."""
    from tesserae_slurm.daemon.state.store import JobUpdate
    from tesserae_slurm.model import PackedPair, PendingJob, PendingReason

    with world.store.session() as s:
        s.add(JobRow(job_id="1", user="alice", num_gpus=2, submit_time=100.0, state="RUNNING", gpus="node1:0-1",
                     first_start=130.0))
        s.add(JobRow(job_id="2", user='bo"b', num_gpus=2, submit_time=100.0, state="RUNNING", gpus="node1:0-1",
                     first_start=160.0))
        s.add(JobRow(job_id="3", user="alice", num_gpus=4, submit_time=200.0, state="PENDING"))
        s.add(JobRow(job_id="4", user="carol", num_gpus=1, submit_time=200.0, state="PENDING"))
        s.add(JobRow(job_id="5", user="carol", num_gpus=1, submit_time=0.0, state="COMPLETED", executed_time=50.0))
        s.add(JobRow(job_id="6", user="carol", num_gpus=1, submit_time=300.0, state="RUNNING", gpus="node2:3",
                     first_start=400.0))
    metrics = Metrics()
    metrics.saw(8, {"1": "ml", "2": "vision", "6": "ml"})
    pending = (PendingJob("3", PendingReason.RESOURCES, "needs 4 GPUs; 2 free"),)
    d = RoundDecision(Placement({}), (), (), (), (), (PackedPair("1", "2", 0.5, 0.5),), pending)
    decided = Decided(d, RoundPlan({}, (), ()), (), None, 0.001, 0.002)
    finish_round(world.journal, metrics, world.begin_round(), "applied", decided, "", 0.0, lambda: 1000.0)
    m = parse_exposition(metrics.render())

    def value(family: str, **labels: str) -> float:
        name = family if not labels.get("_") else family + labels.pop("_")
        return m[family]["samples"][(name, tuple(labels.items()))]

    assert m["tesserae_jobs"]["type"] == "gauge"
    assert {k[1]: v for k, v in m["tesserae_jobs"]["samples"].items()} == {
        (("state", "PENDING"),): 2, (("state", "PREEMPTING"),): 0, (("state", "RUNNING"),): 3,
        (("state", "STARTING"),): 0}  # the finished job 5 is no gauge
    assert value("tesserae_gpus") == 8 and value("tesserae_gpus_busy") == 3 and value("tesserae_gpus_packed") == 2
    assert value("tesserae_jobs_pending", reason="Resources") == 1
    assert value("tesserae_jobs_pending", reason="Other") == 1  # job 4: not ranked this round
    assert value("tesserae_user_gpus", user="alice") == 2 and value("tesserae_user_gpus", user='bo\\"b') == 2
    assert value("tesserae_user_gpus", user="carol") == 1
    assert value("tesserae_account_gpus", account="ml") == 3 and value("tesserae_account_gpus", account="vision") == 2
    assert m["tesserae_jobs_ended_total"]["samples"] == {}  # the first count learns the jobs; job 5 ended before
    assert value("tesserae_job_wait_seconds", _="_count") == 0 and value("tesserae_packed_pairs") == 1
    assert m["tesserae_job_wait_seconds"]["type"] == "histogram"

    # job 1 ends after an hour's run, job 3 starts 600 s after its submission, job 2 is requeued
    world.journal.update_jobs({"1": JobUpdate(state="FAILED", executed_time=3600.0).ended(),
                               "3": JobUpdate(state="RUNNING", gpus="node2:0-2", first_start=800.0),
                               "2": JobUpdate(state="PENDING").cleared()})
    d = RoundDecision(Placement({}), (), (), (), (), (), (PendingJob("2", PendingReason.PRIORITY),))
    decided = Decided(d, RoundPlan({}, (), ()), (), None, 0.001, 0.002)
    finish_round(world.journal, metrics, world.begin_round(), "applied", decided, "", 0.0, lambda: 2000.0)
    m = parse_exposition(metrics.render())
    assert m["tesserae_jobs_ended_total"]["samples"] == {("tesserae_jobs_ended_total", (("state", "FAILED"),)): 1}
    assert value("tesserae_job_run_seconds", _="_count") == 1 and value("tesserae_job_run_seconds", _="_sum") == 3600
    assert value("tesserae_job_run_seconds", _="_bucket", le="1800") == 0
    assert value("tesserae_job_run_seconds", _="_bucket", le="3600") == 1
    assert value("tesserae_job_run_seconds", _="_bucket", le="+Inf") == 1
    assert value("tesserae_job_wait_seconds", _="_count") == 1 and value("tesserae_job_wait_seconds", _="_sum") == 600
    assert value("tesserae_job_wait_seconds", _="_bucket", le="300") == 0
    assert value("tesserae_job_wait_seconds", _="_bucket", le="600") == 1
    assert value("tesserae_jobs_pending", reason="Priority") == 1 and value("tesserae_jobs", state="RUNNING") == 2
    assert value("tesserae_gpus_busy") == 4 and value("tesserae_gpus_packed") == 0  # 3 on node2:0-2, 6 on node2:3
    assert ("tesserae_user_gpus", (("user", 'bo\\"b'),)) not in m["tesserae_user_gpus"]["samples"]
    for name, f in m.items():  # base units: times in seconds, never ms
        assert not name.endswith("_ms") and not name.endswith("_milliseconds"), name
