"""`tesserae devcluster compare` without Slurm: the job set, the per-job measures and the report's arithmetic."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from tesserae_slurm.devcluster import add_parser
from tesserae_slurm.devcluster.compare import (
    MODELS,
    STEP_TIME_S,
    DemoJob,
    JobResult,
    generate_jobs,
    job_result,
    policy_options,
    render_jobs,
    render_summary,
    report_json,
    summarize,
)
from tesserae_slurm.devcluster.runs import BATCH_SCRIPT, Settings, daemon_config, submit_all
from tesserae_slurm.devcluster.slurm_conf import DevClusterLayout, DevClusterSpec, render_slurm_conf
from tesserae_slurm.model import InputError
from tesserae_slurm.slurm import SlurmJob, SlurmJobState


def test_job_set_is_deterministic_and_within_bounds():
    a = generate_jobs(16, 3, min_s=20, max_s=80, mean_gap_s=3)
    assert a == generate_jobs(16, 3, min_s=20, max_s=80, mean_gap_s=3)
    assert a != generate_jobs(16, 4, min_s=20, max_s=80, mean_gap_s=3)
    assert [j.name for j in a] == [f"demo{i:02d}" for i in range(16)]
    assert a[0].arrival_s == 0.0
    assert all(x.arrival_s <= y.arrival_s for x, y in zip(a, a[1:]))
    for j in a:
        assert j.gpus in (1, 2, 4)
        assert 20 <= j.duration_s <= 80 and j.steps * STEP_TIME_S == pytest.approx(j.duration_s)
        assert (j.model, j.batch_size) in MODELS
        assert j.time_limit_min == max(1, math.ceil(2 * j.duration_s / 60)) and j.time_limit_min * 60 >= j.duration_s
    assert {j.gpus for j in generate_jobs(40, 0)} == {1, 2, 4}


def test_job_set_fits_the_nodes_and_refuses_nonsense():
    assert {j.gpus for j in generate_jobs(30, 0, gpus_per_node=2)} <= {1, 2}
    assert {j.gpus for j in generate_jobs(10, 0, gpus_per_node=1)} == {1}
    assert all(j.arrival_s == 0 for j in generate_jobs(5, 0, mean_gap_s=0))
    with pytest.raises(ValueError):
        generate_jobs(0, 0)
    with pytest.raises(ValueError):
        generate_jobs(3, 0, min_s=10, max_s=5)


def _r(name: str, gpus: int, submit: float, start: float | None, end: float | None, state: str = "COMPLETED",
       runs: tuple[int, ...] = (1,), p: int = 0, m: int = 0) -> JobResult:
    return JobResult(name, name, gpus, 10.0, submit, start, end, state, runs, restarts=len(runs) - 1, preemptions=p,
                     migrations=m)


def test_summary_arithmetic():
    rs = [_r("a", 1, 100.0, 101.0, 111.0), _r("b", 2, 102.0, 112.0, 130.0, runs=(1, 2), p=1, m=1),
          _r("c", 4, 105.0, 106.0, 120.0)]
    s = summarize("plain", rs)
    assert (s.jobs, s.completed) == (3, 3)
    assert s.avg_jct_s == pytest.approx((11 + 28 + 15) / 3) and s.max_jct_s == 28
    assert s.makespan_s == 30.0  # first submit 100 to last end 130
    assert s.avg_queueing_s == pytest.approx((1 + 10 + 1) / 3)
    assert (s.multi_gpu_jobs, s.split_jobs) == (2, 1)  # b's second run spanned two nodes
    assert (s.runs, s.preemptions, s.migrations, s.restarts) == (4, 1, 1, 1)
    assert s.makespan_s >= s.max_jct_s


def test_summary_leaves_unfinished_jobs_out_of_the_averages():
    rs = [_r("a", 1, 0.0, 1.0, 5.0), _r("b", 1, 0.0, None, None, state="CANCELLED"),
          _r("c", 1, 0.0, 2.0, 9.0, state="FAILED")]
    s = summarize("daemon", rs)
    assert (s.jobs, s.completed, s.avg_jct_s, s.makespan_s) == (3, 1, 5.0, 9.0)
    empty = summarize("plain", [])
    assert empty.completed == 0 and math.isnan(empty.avg_jct_s) and empty.makespan_s == 0
    assert "| - |" in render_summary([empty])


def _slurm(end: int | None, state: SlurmJobState = SlurmJobState.COMPLETED, restarts: int = 0) -> SlurmJob:
    return SlurmJob(job_id=7, name="demo00", user="root", state=state, reason="None", partition="plain",
                    end_time=end, restart_count=restarts)


def test_job_result_from_events_and_slurm():
    job = DemoJob("demo00", 2, "DCGAN", 32, 10.0, 0.0, 1)
    events = [{"event": "start", "time": 101.5, "num_nodes": 1, "nodelist": "node1"},
              {"event": "checkpoint", "time": 104.0},
              {"event": "start", "time": 110.25, "num_nodes": 2, "nodelist": "node[1-2]"},
              {"event": "done", "time": 118.4}]
    r = job_result(job, "7", 100.0, _slurm(118, restarts=1), events, preemptions=1)
    assert r.first_start == 101.5 and r.queueing == 1.5
    assert r.end == 118.4 and r.jct == pytest.approx(18.4)  # Slurm's 118 is whole seconds: the payload's end
    assert r.run_nodes == (1, 2) and r.split and r.nodelists == ("node1", "node[1-2]")
    assert (r.state, r.restarts, r.preemptions) == ("COMPLETED", 1, 1)
    later = job_result(job, "7", 100.0, _slurm(120), events)
    assert later.end == 120.0  # Slurm's end when the job outlived its payload
    lost = job_result(job, "7", 100.0, None, [])
    assert lost.state == "LOST" and lost.jct is None and lost.queueing is None and not lost.split


def test_submissions_keep_the_arrival_offsets():
    now = [1000.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    jobs = [DemoJob("b", 1, "DCGAN", 32, 5, 2.5, 1), DemoJob("a", 1, "DCGAN", 32, 5, 0.0, 1),
            DemoJob("c", 1, "DCGAN", 32, 5, 2.5, 1)]
    order: list[str] = []

    def submit(j: DemoJob) -> str:
        order.append(j.name)
        now[0] += 0.1  # a submission takes time; the next offset still counts from the first
        return str(len(order))

    got = submit_all(jobs, submit, clock=lambda: now[0], sleep=sleep)
    assert order == ["a", "b", "c"]
    assert got["a"] == ("1", 1000.0) and got["b"] == ("2", 1002.5) and got["c"] == ("3", pytest.approx(1002.6))
    assert slept == [pytest.approx(2.4)]

    def failing(j: DemoJob) -> str:
        if j.name == "b":
            raise RuntimeError("sbatch refused")
        return "9"

    partial: dict[str, tuple[str, float]] = {}
    with pytest.raises(RuntimeError):
        submit_all(jobs, failing, clock=lambda: now[0], sleep=sleep, into=partial)
    assert list(partial) == ["a"]  # what was submitted before the error, for the caller to cancel


def test_report_tables_and_json():
    jobs = [DemoJob("demo00", 4, "vgg19", 32, 10.0, 0.0, 1), DemoJob("demo01", 1, "DCGAN", 32, 5.0, 1.0, 1)]
    results = {"plain": [_r("demo00", 4, 0.0, 0.5, 11.0), _r("demo01", 1, 1.0, 1.5, 7.0)],
               "daemon": [_r("demo00", 4, 0.0, 2.0, 13.0, runs=(1, 1), p=1), _r("demo01", 1, 1.0, 3.0, 9.0)]}
    table = render_jobs(jobs, results)
    assert table.splitlines()[0].count("|") == 6 + 6 + 1
    assert "| demo00 | 4 | vgg19 | 10.0 | 0.0 | 1 | 11.0 | 0.5 |" in table and "(1p 0m)" in table
    summary = render_summary([summarize(m, rs) for m, rs in results.items()])
    assert summary.splitlines()[2].startswith("| plain | 2/2 | 8.5 |")
    data = report_json(jobs, results, {"plain": Settings(), "daemon": Settings(policy="fifo")},
                       {"nodes": 1, "gpus_per_node": 4})
    assert set(data["modes"]) == {"plain", "daemon"} and data["modes"]["daemon"]["summary"]["preemptions"] == 1
    assert data["modes"]["daemon"]["settings"]["policy"] == "fifo"
    assert data["modes"]["plain"]["jobs"][0]["jct"] == 11.0 and data["jobs"][1]["name"] == "demo01"


def test_policy_options_scale_tiresias_only():
    assert policy_options("tesserae-t") == {"queue_limits": [30, 600]} == policy_options("tiresias")
    assert policy_options("fifo") == {}
    with pytest.raises(InputError):
        policy_options("no-such-policy")


def test_daemon_config_and_batch_script(tmp_path: Path):
    cfg = daemon_config(Settings(round_seconds=3, grace_seconds=4, daemon_extra={"feedback": {"min_reports": 1}}),
                        tmp_path)
    assert cfg["scheduler"]["round_seconds"] == 3 and cfg["preemption"]["grace_seconds"] == 4
    assert cfg["feedback"] == {"min_reports": 1}
    assert cfg["metrics"]["listen"] == "" and cfg["http"]["listen"] == ""  # no fixed ports taken
    assert cfg["state"]["database"] == str(tmp_path / "state.db")
    assert cfg["preemption"]["stop_records_dir"] == str(tmp_path / "stops")  # stops end with the checkpoint
    lines = BATCH_SCRIPT.splitlines()
    assert lines[0] == "#!/bin/bash" and lines[1].startswith("trap ") and lines[2].startswith("trap ")


def test_plain_partition_and_backfill_interval_in_slurm_conf():
    layout = DevClusterLayout(Path("/dc"))
    conf = render_slurm_conf(DevClusterSpec(nodes=2, plain_partition="plain", bf_interval_s=1), layout)
    assert "PartitionName=tesserae Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP" in conf
    assert "PartitionName=plain Nodes=node[1-2] Default=NO MaxTime=INFINITE State=UP" in conf
    assert "SchedulerParameters=sched_min_interval=100000,batch_sched_delay=0,bf_interval=1\n" in conf
    plain = render_slurm_conf(DevClusterSpec(nodes=2), layout)
    assert "PartitionName=plain" not in plain and "bf_interval" not in plain
    with pytest.raises(ValueError):
        DevClusterSpec(plain_partition="tesserae")
    with pytest.raises(ValueError):
        DevClusterSpec(plain_partition="a b")
    with pytest.raises(ValueError):
        DevClusterSpec(bf_interval_s=0)


def test_cli_parses_compare_and_ports():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["devcluster", "compare", "--dir", "/tmp/x", "--ports", "31000", "--jobs", "4",
                              "--round-seconds", "2", "--modes", "daemon", "--policy", "tesserae-t,fifo"])
    assert (args.action, args.ports, args.jobs, args.round_seconds, args.modes) == ("compare", 31000, 4, 2.0,
                                                                                     "daemon")
    up = parser.parse_args(["devcluster", "up", "--plain-partition", "plain", "--bf-interval", "2"])
    assert (up.plain_partition, up.bf_interval, up.ports) == ("plain", 2, None)


def test_stop_seconds_from_the_daemons_records_and_their_summary(tmp_path: Path):
    """Each stop is timed from the last checkpoint signal on record before it ended to its end; a stop
    whose job ended instead (an error on the done action) and unfinished ones are no stops."""
    from tesserae_slurm.daemon.service.calls import CallRecord
    from tesserae_slurm.daemon.state.journal import Intent, Journal
    from tesserae_slurm.daemon.state.store import Store
    from tesserae_slurm.devcluster.runs import stop_seconds

    journal = Journal(Store.open(tmp_path / "state.db"))
    rid = journal.begin_round(100.0, "tesserae-t", False)
    journal.record_calls(rid, [CallRecord(101.0, "signal", ("5",), True, "", 1.0),
                               CallRecord(101.5, "signal", ("6",), True, "", 1.0),
                               CallRecord(150.0, "signal", ("5",), True, "", 1.0),
                               CallRecord(102.0, "signal", ("7",), True, "", 1.0)])
    a5, a6, a7, b5 = journal.record_intents(rid, [Intent("preempt", "5", {}), Intent("migrate", "6", {}),
                                                  Intent("preempt", "7", {}), Intent("requeue", "5", {})], 101.0)
    journal.finish_action(a5, "done", 103.0)
    journal.finish_action(a6, "done", 131.5)
    journal.finish_action(a7, "done", 104.0, "ended (completed) before the requeue-hold: not requeued")
    journal.finish_action(b5, "done", 151.25)
    (c5,) = journal.record_intents(rid, [Intent("migrate", "5", {})], 160.0)  # released, held again: no signal
    journal.finish_action(c5, "done", 160.5)
    got = stop_seconds(tmp_path / "state.db", ["5", "6", "7", "8"])
    assert got == {"5": [2.0, 1.25], "6": [30.0]}
    assert stop_seconds(tmp_path / "state.db", ["5"], after=140.0) == {"5": [1.25]}
    rs = [JobResult("a", "5", 1, 10.0, 0.0, 1.0, 200.0, "COMPLETED", (1, 1, 1), stops_s=(2.0, 1.25)),
          JobResult("b", "6", 1, 10.0, 0.0, 1.0, 200.0, "COMPLETED", (1, 1), stops_s=(30.0,))]
    s = summarize("daemon", rs)
    assert (s.stops, s.median_stop_s, s.mean_stop_s) == (3, 2.0, pytest.approx(33.25 / 3))
    assert "| 2.0 / 11.1 (3) |" in render_summary([s])
