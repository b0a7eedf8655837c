"""`tesserae devcluster replay` without Slurm: the plan in scaled time, the daemon's scaled settings, the
measures in trace time, FTF against a brute-force integration, and the report's arithmetic."""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
from pathlib import Path

import pytest

from tesserae_slurm.devcluster import add_parser
from tesserae_slurm.devcluster.replay import (
    LIMIT_SLACK_S,
    JobMeasure,
    daemon_settings,
    deviation,
    ftf,
    measure_job,
    plan_replay,
    predict,
    render_jobs,
    render_summary,
    report_json,
    scaled_policy_options,
    summarize_real,
    summarize_sim,
)
from tesserae_slurm.devcluster.replay_cmd import parse_modes
from tesserae_slurm.devcluster.runs import Settings
from tesserae_slurm.model import InputError, Job, JobView
from tesserae_slurm.policies.slurm_backfill import SlurmBackfillPolicy
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.traces import generate_tesserae
from tesserae_slurm.sim.traces.generate import with_users
from tesserae_slurm.sim.traces.record import TraceJob
from tesserae_slurm.slurm import SlurmJob, SlurmJobState

A100 = load_profile("a100")
TRACE = generate_tesserae(120, 80, 0)


def test_plan_scales_arrivals_and_keeps_the_limits_slurm_enforces():
    plan = plan_replay(TRACE, "t", A100, scale=40, nodes=8, gpus_per_node=4)
    assert len(plan.jobs) == len(plan.trace) == 120 and plan.cluster_spec == "8x4:a100"
    t0 = TRACE[0].submit_time
    policy = SlurmBackfillPolicy()
    for j, t, sim in zip(plan.jobs, TRACE, plan.trace):
        assert j.trace_id == t.job_id == sim.job_id and j.work_s == t.duration
        assert j.arrival_s == pytest.approx((t.submit_time - t0) / 40)
        modeled = policy.time_limit(JobView(Job(t.job_id, t.num_gpus, t.model, t.batch_size), t.submit_time,
                                            total_work=t.duration), 0)
        wall = j.time_limit_min * 60
        assert wall >= modeled / 40 - 1e-9 and wall >= t.duration / 40 + LIMIT_SLACK_S  # never killed early
        assert wall - 60 < max(modeled / 40, t.duration / 40 + LIMIT_SLACK_S)  # whole minutes, rounded up once
        assert sim.time_limit == wall * 40  # the prediction plans with what Slurm was given
        assert j.restart_s == (90.0 if t.model in ("GPT2-Medium", "Bert-Large") else 30.0)
        assert j.key == f"{A100.job_class(Job('x', t.num_gpus, t.model, t.batch_size)).key.model}|" \
                        f"{A100.job_class(Job('x', t.num_gpus, t.model, t.batch_size)).key.batch_size}|{t.num_gpus}"


def test_plan_leaves_out_what_cannot_run_here_and_says_so():
    small = plan_replay(TRACE, "t", A100, scale=100, nodes=1, gpus_per_node=2, jobs=40)
    assert len(small.jobs) < 40 and all(j.gpus <= 2 for j in small.jobs)
    assert small.notes == (f"{40 - len(small.jobs)} job(s) larger than the cluster left out",)
    users = plan_replay(with_users(TRACE, 3, 0), "t", A100, scale=100, nodes=8, gpus_per_node=4, jobs=10)
    assert {t.user for t in users.trace} == {""} and "users are dropped" in users.notes[0]
    with pytest.raises(InputError, match="--scale must be > 0"):
        plan_replay(TRACE, "t", A100, scale=0, nodes=1, gpus_per_node=4)
    with pytest.raises(InputError, match="no job fits"):
        plan_replay([dataclasses.replace(TRACE[0], num_gpus=8)], "t", A100, scale=1, nodes=1, gpus_per_node=4)


def test_the_daemon_runs_in_wall_time():
    opts = scaled_policy_options("tesserae-t", 40)
    assert opts == {"queue_limits": [3250 / 40, 7200 / 40]}  # the policy's default, scaled
    assert scaled_policy_options("tesserae-t-fair", 10)["promote_max_run_s"] == 720.0
    assert scaled_policy_options("fifo", 40) == {}
    plan = plan_replay(TRACE, "t", A100, scale=40, nodes=8, gpus_per_node=4, jobs=5)
    s = daemon_settings(plan, "tesserae-t", Path("/w"), Settings())
    assert (s.round_seconds, s.grace_seconds, s.policy) == (9.0, 2.25, "tesserae-t")
    assert s.daemon_extra["feedback"] == {"reports_dir": "/w/reports", "report_every_s": 4.5}
    assert "feedback" not in daemon_settings(plan, "tesserae-t", Path("/w"), Settings(), feedback=False).daemon_extra
    moves = s.daemon_extra["moves"]  # a restart costs the daemon what it costs the emulated job, in wall time
    assert moves["restart_s"] == 30.0 / 40 and moves["restart_per_model"]["GPT2-Medium"] == 90.0 / 40


def test_prediction_plans_moves_as_the_daemon_did():
    """The engine in the prediction weighs a move with the daemon's costs, in trace time: the replay's
    (a restart 30 trace seconds), or a saved run's whose daemon had the site's defaults (30 wall seconds)."""
    plan = plan_replay(TRACE, "t", A100, scale=60, nodes=8, gpus_per_node=4, jobs=40)
    now = predict(plan, "daemon", "tesserae-t", A100)
    old = Settings(policy="tesserae-t", round_seconds=6.0, grace_seconds=1.5)  # no moves section: 30 s restarts
    dearer = predict(plan, "daemon", "tesserae-t", A100, settings=old)
    assert dearer.settings["moves"]["restart_s"] == 30.0 * 60 and now.settings["moves"]["restart_s"] == 30.0
    assert now.settings["moves"]["stop_s"] == pytest.approx(90.0 + 5.0 * 60)  # grace + requeue_s, in trace time
    assert dearer.preemptions + dearer.migrations <= now.preemptions + now.migrations


def _brute_ftf(submit, end, work, gpus, steps=20000):
    """Numerical integral of the active jobs per GPU over each job's life."""
    out = []
    for s, e, w in zip(submit, end, work):
        dt = (e - s) / steps
        area = sum(sum(1 for a, b in zip(submit, end) if a <= s + (k + 0.5) * dt < b) for k in range(steps)) * dt
        out.append((e - s) / (w * max(1.0, area / (e - s) / gpus)))
    return out


def test_ftf_against_brute_force():
    rng = random.Random(3)
    for _ in range(5):
        n = rng.randint(1, 6)
        submit = [rng.uniform(0, 50) for _ in range(n)]
        end = [s + rng.uniform(1, 80) for s in submit]
        work = [rng.uniform(0.5, 1.0) * (e - s) for s, e in zip(submit, end)]
        gpus = rng.choice([1, 2])
        assert ftf(submit, end, work, gpus) == pytest.approx(_brute_ftf(submit, end, work, gpus), rel=1e-3)
    assert ftf([0.0], [10.0], [5.0], 4) == [2.0]  # alone on a big cluster: JCT over work


def _m(name, submit, end, work=10.0, p=0, m=0, state="COMPLETED", done=None, ledger=()):
    return JobMeasure(name, name, name, 1, work, submit, submit + 1 if end else None, end, state, 1,
                      work if done is None else done, ledger, p, m)


def test_real_summary_is_in_trace_time():
    ms = [_m("a", 100.0, 110.0, p=1), _m("b", 101.0, 121.0, m=2), _m("c", 102.0, None, state="CANCELLED", done=3.0,
                                                                     ledger=("no run finished the work",))]
    s = summarize_real("daemon:x", ms, 60.0, 4)
    assert (s.jobs, s.completed, s.work_conserved) == (3, 2, 2)
    assert s.avg_jct_s == pytest.approx((10 + 20) / 2 * 60) and s.median_jct_s == pytest.approx(15 * 60)
    assert s.makespan_s == pytest.approx(21 * 60)
    assert (s.preemptions, s.migrations) == (1, 2)
    rho = ftf([100 * 60, 101 * 60], [110 * 60, 121 * 60], [10.0, 10.0], 4)
    assert s.ftf_worst == pytest.approx(max(rho))
    assert not _m("x", 0, 5, done=9.0).completed  # a job whose work fell short did not complete


def test_predicted_summary_and_deviation():
    plan = plan_replay(TRACE, "t", A100, scale=40, nodes=2, gpus_per_node=4, jobs=12)
    res = predict(plan, "daemon", "tesserae-t", A100)
    s = summarize_sim("daemon:tesserae-t", res, 8)
    assert s.avg_jct_s == pytest.approx(res.avg_jct) and s.makespan_s == res.makespan and s.jobs == 12
    plain = predict(plan, "plain", "", A100)
    assert plain.policy == "slurm-backfill" and plain.preemptions == 0
    assert deviation(100.0, 103.36) == pytest.approx(3.36) and math.isnan(deviation(0.0, 1.0))


def test_measure_job_from_events_and_slurm():
    plan = plan_replay(TRACE, "t", A100, scale=40, nodes=8, gpus_per_node=4, jobs=1)
    job = plan.jobs[0]
    events = [{"event": "start", "time": 5.0, "work": 0.0}, {"event": "checkpoint", "time": 7.0, "work": 80.0},
              {"event": "start", "time": 9.0, "work": 80.0}, {"event": "done", "time": 30.5, "work": job.work_s}]
    slurm = SlurmJob(job_id=3, name=job.name, user="root", state=SlurmJobState.COMPLETED, reason="None",
                     partition="tesserae", end_time=31, restart_count=1)
    m = measure_job(job, "3", 4.0, slurm, events, 1, 0)
    assert (m.first_start, m.end, m.runs, m.work_done, m.ledger, m.restarts) == (5.0, 30.5, 2, job.work_s, (), 1)
    assert m.completed


def test_report_tables_and_json():
    plan = plan_replay(TRACE, "t", A100, scale=40, nodes=2, gpus_per_node=4, jobs=3)
    res = predict(plan, "daemon", "tesserae-t", A100)
    ms = [_m(j.trace_id, 0.0, 100.0 + i, work=j.work_s) for i, j in enumerate(plan.jobs)]
    runs = {"daemon:tesserae-t": (ms, res)}
    table = render_summary([(summarize_real("daemon:tesserae-t", ms, 40, 8), summarize_sim("x", res, 8))])
    assert table.splitlines()[0].count("|") == 16 and "| daemon:tesserae-t | 3/3 | 3/3 |" in table
    jobs = render_jobs(plan, runs)
    assert jobs.splitlines()[0].count("|") == 5 + 4 + 1 and len(jobs.splitlines()) == 2 + 3
    data = report_json(plan, runs, {"daemon:tesserae-t": Settings(policy="tesserae-t")})
    run = data["runs"]["daemon:tesserae-t"]
    assert run["real"]["completed"] == 3 and run["predicted"]["jobs"] == 3
    assert run["jobs"][1]["jct_s"] == pytest.approx(101.0 * 40) and data["scale"] == 40


def test_modes_and_cli():
    assert parse_modes("daemon:tesserae-t, plain") == [("daemon:tesserae-t", "tesserae-t"), ("plain", "")]
    for bad, message in (("daemon", "plain or daemon:POLICY"), ("daemon:nope", "unknown policy configuration"),
                         ("plain,plain", "names a run twice"), (",", "names no run")):
        with pytest.raises(InputError, match=message):
            parse_modes(bad)
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["devcluster", "replay", "--scale", "60", "--mode", "plain", "--replay-jobs", "16",
                              "--trace", "sample"])
    assert (args.action, args.scale, args.mode, args.replay_jobs, args.trace, args.nodes) == (
        "replay", 60.0, "plain", 16, "sample", None)


def test_trace_job_record_fields_the_plan_relies_on():
    t = TraceJob("1", 0.0, 1, 10.0, "resnet50", "64", time_limit=900.0)
    plan = plan_replay([t], "t", A100, scale=15, nodes=1, gpus_per_node=1)
    assert plan.jobs[0].time_limit_min == 1 and plan.trace[0].time_limit == 900.0  # the trace's own limit kept
