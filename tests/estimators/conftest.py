"""Shared fixtures: the shipped A100 table as entries, and the table's own measurement noise."""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np
import pytest

from tesserae_slurm.estimators.entries import table_from_profile
from tesserae_slurm.profiles import load_profile


@pytest.fixture(scope="session")
def a100_table():
    return table_from_profile(load_profile("a100"))


@pytest.fixture(scope="session")
def repeat_noise() -> float:
    """Mean |difference| between the two measurements of the 36 pairs the A100 table measured twice.

    Read from the raw CSV with the csv module (independent of the profile code). An estimator whose
    held-out error is of this order predicts as well as re-measuring would.
    """
    text = resources.files("tesserae_slurm.data").joinpath("a100_packing_norm_speed.csv").read_text()
    rows = [r for r in csv.DictReader(text.splitlines()) if r["model2"] != "Empty" and r["pipeline_strategy"] == "NA"]
    seen = {}
    for r in rows:
        seen[(r["model1"], r["batch_size1"], r["model2"], r["batch_size2"], r["gpu_num1"])] = (
            float(r["speed1"]), float(r["speed2"]))
    diffs = []
    for (m1, b1, m2, b2, n), (x, y) in seen.items():
        other = seen.get((m2, b2, m1, b1, n))
        if other is not None and (m1, b1) < (m2, b2):
            diffs += [abs(x - other[1]), abs(y - other[0])]
    assert len(diffs) == 72  # 36 pairs, two speeds each
    return float(np.mean(diffs))
