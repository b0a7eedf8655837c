"""The engine's move costs with and without the jobs' remaining work (``simulate(remaining_known=...)``),
on a miniature computed by hand.

One GPU (1x1:a100), rounds of 360 s, ResNet-50 at speed 1.0 alone, restarts of 30 s (the move cost),
Tiresias with one queue limit at 700 GPU-seconds. Job a (740 s) arrives at 0, job b (200 s) at 500.
At the round at 720, a has 720 GPU-seconds of service: it drops to the lower queue, and b ranks first.
  remaining known (a simulator): a has 20 s left, less than its move cost: it is never displaced; it
                     ends at 740, and b starts at the round at 1080 and ends at 1280.
  remaining unknown (the daemon): a is preempted at 720 for b, which ends at 920; a resumes at the
                     round at 1080 and ends after its restart and its 20 s, at 1130.
"""

from __future__ import annotations

import dataclasses

import pytest

from tesserae_slurm.model import Cluster
from tesserae_slurm.presets import get_config
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.traces.record import TraceJob

TRACE = [TraceJob("a", 0.0, 1, 740.0, "ResNet-50", "64"), TraceJob("b", 500.0, 1, 200.0, "ResNet-50", "64")]


def _run(known: bool) -> tuple[dict[str, float], int]:
    config = get_config("tiresias")
    config = dataclasses.replace(config, policy_options={**config.policy_options, "queue_limits": [700.0]})
    res = simulate(TRACE, Cluster.from_spec("1x1:a100"), config, load_profile("a100"),
                   restart=RestartCost.uniform(30.0), remaining_known=known, check_invariants=True)
    return {j.job_id: j.finish_time for j in res.jobs}, res.preemptions


def test_a_job_about_to_finish_is_kept_when_its_remaining_work_is_known():
    ends, preemptions = _run(True)
    assert ends == pytest.approx({"a": 740.0, "b": 1280.0}) and preemptions == 0


def test_without_it_the_engine_preempts_it_as_the_daemon_does():
    ends, preemptions = _run(False)
    assert ends == pytest.approx({"a": 1130.0, "b": 920.0}) and preemptions == 1
