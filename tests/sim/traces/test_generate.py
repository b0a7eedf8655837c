"""Trace generators: statistics of large seeded samples, determinism, and the Blox sample's conventions."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from tesserae_slurm.model import InputError
from tesserae_slurm.sim.traces import (
    A100_MODELS, generate_gavel, generate_tesserae, load_shipped, solo_throughputs,
)
from tesserae_slurm.sim.traces.models import LLM_BATCH, LLM_MODELS, SMALL_MODELS, gavel_table_key, split_gavel_type

N = 20_000


def within(observed: float, p: float, n: int, sigmas: float = 5.0) -> bool:
    """Binomial share ``observed`` of n trials is within ``sigmas`` standard errors of p."""
    return abs(observed - p) <= sigmas * math.sqrt(p * (1 - p) / n) + 1e-12


def mean_floor_exp(mean: float) -> float:
    """E[floor(X)] for X ~ Exp(mean): sum_k P(X >= k) = q / (1 - q), q = exp(-1/mean)."""
    q = math.exp(-1.0 / mean)
    return q / (1 - q)


def grid_index(durations: np.ndarray) -> np.ndarray:
    """Index of each duration on Blox's grid round(3600 * linspace(0.2, 5, 100)); -1 if off the grid."""
    grid = np.round(3600 * np.linspace(0.2, 5.0, 100))
    pos = {float(v): i for i, v in enumerate(grid)}
    return np.array([pos.get(float(d), -1) for d in durations])


@pytest.fixture(scope="module")
def tess():
    return generate_tesserae(N, 80, seed=7)


@pytest.fixture(scope="module")
def gav():
    return generate_gavel(N, 80, seed=7)


# --- Tesserae / Shockwave style ------------------------------------------------------------------

@pytest.mark.parametrize("gpus,p", [(1, 0.6), (2, 0.3), (4, 0.09), (8, 0.01)], ids=["1", "2", "4", "8"])
def test_tesserae_gpu_mix(tess, gpus, p):
    share = sum(j.num_gpus == gpus for j in tess) / N
    assert within(share, p, N)


def test_tesserae_arrival_rate_and_start(tess):
    submit = np.array([j.submit_time for j in tess])
    assert 10 <= submit[0] <= 100 and np.all(submit == np.round(submit))
    gaps = np.diff(submit)
    expected = mean_floor_exp(45.0)  # 80 jobs/hour: 0.75 min mean gap, truncated to whole seconds
    assert abs(gaps.mean() - expected) <= 5 * 45.0 / math.sqrt(N)


@pytest.mark.parametrize("cls,lo,hi,p", [("S", 0, 20, 0.72), ("M", 20, 50, 0.2), ("L", 50, 90, 0.05),
                                         ("XL", 90, 100, 0.03)], ids=["S", "M", "L", "XL"])
def test_tesserae_size_classes(tess, cls, lo, hi, p):
    idx = grid_index(np.array([j.duration for j in tess]))
    assert np.all(idx >= 0), "every duration is a point of the 100-point grid"
    share = np.mean((idx >= lo) & (idx < hi))
    assert within(share, p, N)
    # uniform within the class: every grid point of the class occurs, none far above its share
    counts = Counter(idx[(idx >= lo) & (idx < hi)].tolist())
    assert set(counts) == set(range(lo, hi))
    assert max(counts.values()) < 2 * (p * N / (hi - lo))


def test_tesserae_models_by_gpu_count(tess):
    by_gpus: dict[int, Counter] = {}
    for j in tess:
        by_gpus.setdefault(j.num_gpus, Counter())[j.model] += 1
    assert set(by_gpus[1]) == set(SMALL_MODELS)
    assert set(by_gpus[8]) == set(LLM_MODELS)
    multi = by_gpus[2] + by_gpus[4]
    n = sum(multi.values())
    assert set(multi) == set(A100_MODELS)
    assert all(within(k / n, 1 / 6, n) for k in multi.values())


def test_tesserae_batch_sizes(tess):
    small = [j for j in tess if j.model in SMALL_MODELS]
    counts = Counter(j.batch_size for j in small)
    assert set(counts) == {"32", "64", "128"}
    assert all(within(k / len(small), 1 / 3, len(small)) for k in counts.values())
    assert all(j.batch_size == LLM_BATCH[j.model] for j in tess if j.model in LLM_MODELS)


def test_blox_sample_follows_the_same_conventions():
    """The 10-job Blox output obeys every invariant the generator is built on."""
    sample = load_shipped("sample")
    assert [j.job_id for j in sample] == [str(i) for i in range(1, 11)]
    assert 10 <= sample[0].submit_time <= 100
    assert all(j.submit_time == int(j.submit_time) and j.duration == int(j.duration) for j in sample)
    assert np.all(grid_index(np.array([j.duration for j in sample])) >= 0)
    assert all(j.model in SMALL_MODELS for j in sample if j.num_gpus == 1)
    assert all(j.num_gpus >= 2 for j in sample if j.model in LLM_MODELS)


def test_tesserae_seed_determinism_and_prefix():
    a = generate_tesserae(200, 80, seed=3)
    assert a == generate_tesserae(200, 80, seed=3)
    assert a.jobs != generate_tesserae(200, 80, seed=4).jobs
    assert generate_tesserae(50, 80, seed=3).jobs == a.jobs[:50]


def test_tesserae_other_distribution_keeps_arrivals():
    a = generate_tesserae(100, 80, seed=5)
    b = generate_tesserae(100, 80, seed=5, gpu_mix=((1, 0.5), (2, 0.5)))
    assert [j.submit_time for j in a] == [j.submit_time for j in b]
    assert {j.num_gpus for j in b} == {1, 2}


@pytest.mark.parametrize("name,n,seed", [("tesserae-900", 900, 0), ("demo", 60, 1)], ids=["900", "demo"])
def test_shipped_generated_traces_regenerate(name, n, seed):
    assert load_shipped(name).jobs == generate_tesserae(n, 80, seed).jobs


# --- Gavel style ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gpus,p", [(1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05)], ids=["1", "2", "4", "8"])
def test_gavel_gpu_mix(gav, gpus, p):
    assert within(sum(j.num_gpus == gpus for j in gav) / N, p, N)


def test_gavel_durations(gav):
    d = np.array([j.duration for j in gav])
    x = np.log10(d / 60)
    assert x.min() >= 1.5 - 1e-3 and x.max() <= 4 + 1e-3
    long = x > 3
    assert within(long.mean(), 0.2, N)
    # log10 of the minutes is uniform on [1.5, 3) for short jobs and [3, 4] for long ones
    assert abs(x[~long].mean() - 2.25) < 5 * (1.5 / math.sqrt(12)) / math.sqrt((~long).sum())
    assert abs(x[long].mean() - 3.5) < 5 * (1 / math.sqrt(12)) / math.sqrt(long.sum())


def test_gavel_arrivals(gav):
    submit = np.array([j.submit_time for j in gav])
    assert submit[0] == 0 and np.all(submit == np.round(submit))
    assert abs(np.diff(submit).mean() - mean_floor_exp(45.0)) <= 5 * 45.0 / math.sqrt(N)


def test_gavel_job_types_steps_and_models(gav):
    thr = solo_throughputs("v100")
    for j in gav:
        family, _ = split_gavel_type(j.source_type)
        assert j.num_gpus == 1 or family.distributed, "multi-GPU jobs get distributed job types only"
        assert j.total_steps == max(1, int(j.duration * thr[gavel_table_key(j.source_type, j.num_gpus)]))
        assert j.model in A100_MODELS
    types = Counter(j.source_type for j in gav if j.num_gpus == 1)
    assert len(types) == 26 and all(within(k / sum(types.values()), 1 / 26, sum(types.values()))
                                    for k in types.values())


def test_gavel_models_namespace_and_determinism():
    g = generate_gavel(300, 40, seed=2, models="gavel")
    assert all(j.model == j.source_type for j in g)
    a = generate_gavel(300, 40, seed=2)
    assert [j.source_type for j in a] == [j.source_type for j in g]
    assert a == generate_gavel(300, 40, seed=2)
    assert generate_gavel(100, 40, seed=2).jobs == a.jobs[:100]


# --- parameter errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("call,message", [
    (lambda: generate_tesserae(10, 0, 0), "arrival rate must be > 0"),
    (lambda: generate_tesserae(-1, 80, 0), "number of jobs"),
    (lambda: generate_tesserae(10, 80, 0, gpu_mix=((1, 0.5), (2, 0.4))), "summing to 1"),
    (lambda: generate_tesserae(10, 80, 0, gpu_mix=((0, 1.0),)), "num_gpus > 0"),
    (lambda: generate_tesserae(10, 80, 0, num_durations=3), "without durations"),
    (lambda: generate_tesserae(10, 80, 0, class_probs=(0.5, 0.5)), "class_probs"),
    (lambda: generate_gavel(10, 80, 0, models="h100"), "models must be"),
    (lambda: generate_gavel(10, 80, 0, short_prob=1.5), "short_prob"),
], ids=["rate", "jobs", "mix-sum", "mix-zero", "grid", "class-probs", "namespace", "short-prob"])
def test_generator_parameter_errors(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_zero_jobs_is_an_empty_trace():
    assert len(generate_tesserae(0, 80, 0)) == 0 and len(generate_gavel(0, 80, 0)) == 0
