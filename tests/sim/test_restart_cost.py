"""A worked example of the restart cost: a job migrated once pays exactly one restart overhead.

One 1-GPU job of 1000 s (speed 1.0 alone on the reference A100), rounds of 360 s, 50 s lost per
restart. By hand:
  round 1, t=0:    first start (free: the trace's duration holds one start)  work 360, 640 left
  round 2, t=360:  migrated: 50 s restart, then 310 s of work                 330 left
  round 3, t=720:  kept: 330 s of work, finishes at 720 + 330 = 1050
so its JCT is 1050 s = 1000 s + the 50 s overhead (1000 s if a migration cost nothing)."""

from __future__ import annotations

import dataclasses

from tesserae_slurm.engine import RoundRequest, decide
from tesserae_slurm.model import Cluster
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.profiles.speeds import SpeedModel
from tesserae_slurm.sim.jobstate import JobColumns
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.rounds import LiveJob, view_of, job_of, run_round
from tesserae_slurm.sim.traces.record import TraceJob

ROUND_S, RESTART_S = 360.0, 50.0


def test_a_migrated_job_finishes_exactly_one_overhead_later():
    cluster, profile = Cluster.from_spec("2x4:a100"), load_profile("a100")
    trace = TraceJob("a", 0.0, 1, 1000.0, "ResNet-50", "64")
    job = job_of(trace)
    speeds = SpeedModel(profile, cluster)
    assert speeds.solo(job, "a100", None) == 1.0  # the worked example's premise
    cols = JobColumns(1)
    live = {"a": LiveJob(trace, job, remaining=trace.duration, cols=cols, k=0)}
    views = {"a": view_of(live["a"], False)}
    started = decide(RoundRequest(cluster, (job,)), profile)
    assert started.started == ("a",)
    migrated = dataclasses.replace(started, started=(), kept=(), migrated=("a",))
    kept = dataclasses.replace(started, started=(), kept=("a",), migrated=())
    restart = RestartCost.uniform(RESTART_S)
    finished = [run_round(d, live, cols, speeds, restart, ROUND_S, now, views).finished
                for d, now in ((started, 0.0), (migrated, 360.0), (kept, 720.0))]
    assert finished == [set(), set(), {"a"}]
    a = live["a"]
    assert (a.migrations, a.rounds_run) == (1, 3)
    assert a.finish - trace.submit_time == 1050.0
    assert a.executed == 1050.0  # the overhead is held time too
