"""``benchmarks/physical_spread.py``'s round grid, on a miniature computed by hand.

One GPU (1x1:a100), rounds of 360 s, fifo, no restart cost: job a (500 s) arrives at 0, job b (300 s) at
1500, after the GPU went idle.
  the prediction as it is: the first round at a's submission; a runs 0-500; at 720 nothing is active and
                           the clock jumps to b's arrival: b runs 1500-1800.
  first round 100 s before a's submission: rounds at -100 + 360 k; the round at -100 sees nothing, a
                           waits for the round at 260 and runs 260-760; at 980 nothing is active and
                           b waits for the round at 1700: 1700-2000.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import tesserae_slurm.sim.runner as runner
from tesserae_slurm.model import Cluster
from tesserae_slurm.presets import get_config
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.traces.record import TraceJob

ROOT = Path(__file__).resolve().parents[2]
TRACE = [TraceJob("a", 0.0, 1, 500.0, "ResNet-50", "64"), TraceJob("b", 1500.0, 1, 300.0, "ResNet-50", "64")]


@pytest.fixture
def spread(monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("physical_spread", ROOT / "benchmarks" / "physical_spread.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(runner._Run, "__init__", mod._init_on_grid)
    monkeypatch.setattr(runner._Run, "admit_arrivals", mod._admit_on_grid)
    return mod


def _run():
    res = simulate(TRACE, Cluster.from_spec("1x1:a100"), get_config("fifo"), load_profile("a100"),
                   restart=RestartCost.uniform(0.0), fast_forward=False)
    return {j.job_id: j.finish_time for j in res.jobs}, [r.time for r in res.rounds]


def test_no_phase_is_the_prediction_as_it_is(spread):
    spread._phase[0] = None
    ends, rounds = _run()
    assert ends == pytest.approx({"a": 500.0, "b": 1800.0})
    assert rounds == pytest.approx([0.0, 360.0, 1500.0])


def test_rounds_keep_their_grid_from_before_the_first_submission(spread):
    spread._phase[0] = 100.0
    ends, rounds = _run()
    assert ends == pytest.approx({"a": 760.0, "b": 2000.0})
    assert rounds == pytest.approx([260.0, 620.0, 1700.0])
