"""The CLI's collector settings apply during a run only and are restored afterwards; the library's
``simulate`` leaves the collector alone."""

from __future__ import annotations

import gc

import pytest

from tesserae_slurm.model import Cluster
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.presets import get_config
from tesserae_slurm.cli.gc_tuning import YOUNG_THRESHOLD, long_run_gc
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.trace_source import resolve_trace


def test_settings_inside_and_restored_after():
    before = gc.get_threshold()
    with long_run_gc():
        assert gc.get_threshold()[0] == max(YOUNG_THRESHOLD, before[0])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_restored_when_the_run_fails():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with long_run_gc():
            raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_simulate_does_not_touch_the_collector():
    trace, name = resolve_trace("demo", models="a100")
    before = gc.get_threshold()
    seen = []

    def during(now: float, done: int, total: int) -> None:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    result = simulate(trace[:10], Cluster.from_spec("2x4:a100"), get_config("tesserae-t"), load_profile("a100"),
                      trace_name=name, on_round=during)
    assert len(result.jobs) == 10
    assert seen and set(seen) == {(before, 0)}
