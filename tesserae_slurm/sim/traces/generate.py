"""Seeded synthetic traces in the two styles the paper evaluates with.

* ``generate_tesserae``: the Tesserae/Shockwave workload as Blox's ``generate_shockwave_trace.py``
  writes it (the paper's default trace: 80 jobs/hour, 900 jobs for simulation).
* ``generate_gavel``: Gavel's generator (the paper's "sensitivity to workload" trace).

Each random attribute (arrivals, GPU counts, models, batch sizes, durations) draws from its own child
stream of ``SeedSequence(seed)``, so the same seed gives the same trace, the first k jobs of an n-job
trace are the k-job trace, and changing one distribution leaves the other attributes as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ...model import InputError
from .gavel_format import REFERENCE_WORKER, solo_throughputs
from .models import (
    A100,
    A100_MODELS,
    GAVEL,
    GAVEL_FAMILIES,
    GAVEL_JOB_TYPES,
    LLM_BATCH,
    LLM_MODELS,
    SMALL_MODELS,
    gavel_job_type,
    gavel_table_key,
    map_model,
    split_gavel_type,
)
from .record import Trace, TraceJob

TESSERAE_GPU_MIX: tuple[tuple[int, float], ...] = ((1, 0.6), (2, 0.3), (4, 0.09), (8, 0.01))
GAVEL_GPU_MIX: tuple[tuple[int, float], ...] = ((1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05))
CLASS_BOUNDS = (0.2, 0.5, 0.9, 1.0)  # cumulative share of the duration grid per class
CLASS_PROBS = (0.72, 0.2, 0.05, 0.03)


def _streams(seed: int, n: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def _check_mix(mix: Sequence[tuple[int, float]], what: str) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.array([g for g, _ in mix], dtype=np.int64)
    probs = np.array([p for _, p in mix], dtype=np.float64)
    if len(mix) == 0 or np.any(sizes <= 0) or np.any(probs < 0) or not np.isclose(probs.sum(), 1.0):
        raise InputError(f"{what}: expected (num_gpus > 0, probability >= 0) pairs summing to 1, got {list(mix)}")
    return sizes, probs / probs.sum()


def _check_counts(num_jobs: int, jobs_per_hour: float) -> None:
    if num_jobs < 0:
        raise InputError(f"number of jobs must be >= 0, got {num_jobs}")
    if not jobs_per_hour > 0:
        raise InputError(f"arrival rate must be > 0 jobs/hour, got {jobs_per_hour}")


def duration_grid(duration_range_h: tuple[float, float] = (0.2, 5.0), num_durations: int = 100,
                  class_bounds: Sequence[float] = CLASS_BOUNDS) -> tuple[np.ndarray, tuple[int, ...]]:
    """The grid of durations (hours) and the index edges of its size classes (Blox's slicing)."""
    lo, hi = duration_range_h
    if not 0 < lo <= hi or num_durations < 1:
        raise InputError(f"duration range must be 0 < min <= max hours with >= 1 steps, got {duration_range_h}, "
                         f"{num_durations}")
    edges = (0,) + tuple(round(num_durations * b) for b in class_bounds)
    if edges[-1] != num_durations or any(a >= b for a, b in zip(edges, edges[1:], strict=False)):
        raise InputError(f"class bounds {tuple(class_bounds)} leave a size class without durations "
                         f"on a {num_durations}-point grid")
    return np.linspace(lo, hi, num_durations), edges


def generate_tesserae(
    num_jobs: int,
    jobs_per_hour: float,
    seed: int,
    *,
    gpu_mix: Sequence[tuple[int, float]] = TESSERAE_GPU_MIX,
    duration_range_h: tuple[float, float] = (0.2, 5.0),
    num_durations: int = 100,
    class_bounds: Sequence[float] = CLASS_BOUNDS,
    class_probs: Sequence[float] = CLASS_PROBS,
    batch_sizes: Sequence[int] = (32, 64, 128),
    start_offset_s: tuple[int, int] = (10, 100),
    name: str | None = None,
) -> Trace:
    """Tesserae/Shockwave-style trace (A100 model names), following Blox's generator.

    Arrivals: the first job at a uniform integer offset in ``start_offset_s``; gaps are exponential with
    mean 60/jobs_per_hour minutes, truncated to whole seconds (Blox: ``int(gap_min * 60)``). 1-GPU jobs
    get a small model, 2-4-GPU jobs any of the six, larger jobs an LLM. Batch sizes are uniform, except
    that LLMs take their profile batch (``256/16``, ``512/8``) since the A100 table has no other. The
    duration's size class (S/M/L/XL) is drawn with ``class_probs`` and the duration uniformly from that
    class's slice of ``linspace(min_h, max_h, num_durations)``, rounded to whole seconds.
    """
    _check_counts(num_jobs, jobs_per_hour)
    sizes, probs = _check_mix(gpu_mix, "gpu_mix")
    cprobs = np.asarray(class_probs, dtype=np.float64)
    if len(cprobs) != len(class_bounds) or np.any(cprobs < 0) or not np.isclose(cprobs.sum(), 1.0):
        raise InputError(f"class_probs must be {len(class_bounds)} probabilities summing to 1, "
                         f"got {tuple(class_probs)}")
    if not batch_sizes or any(b <= 0 for b in batch_sizes):
        raise InputError(f"batch_sizes must be positive, got {tuple(batch_sizes)}")
    grid, edges = duration_grid(duration_range_h, num_durations, class_bounds)
    r_arr, r_gpu, r_model, r_batch, r_class, r_dur = _streams(seed, 6)

    lo, hi = start_offset_s
    offset = int(r_arr.integers(lo, hi + 1))
    gaps = np.floor(r_arr.exponential(60.0 / jobs_per_hour, size=max(num_jobs - 1, 0)) * 60.0)
    submit = offset + np.concatenate(([0.0], np.cumsum(gaps)))[:num_jobs]
    gpus = r_gpu.choice(sizes, size=num_jobs, p=probs)
    u_model = r_model.random(num_jobs)
    batches = r_batch.choice(np.asarray(batch_sizes), size=num_jobs)
    classes = r_class.choice(len(cprobs), size=num_jobs, p=cprobs / cprobs.sum())
    u_dur = r_dur.random(num_jobs)

    jobs = []
    for i in range(num_jobs):
        g = int(gpus[i])
        pool = SMALL_MODELS if g == 1 else A100_MODELS if g <= 4 else LLM_MODELS
        model = pool[int(u_model[i] * len(pool))]
        batch = LLM_BATCH[model] if model in LLM_MODELS else str(int(batches[i]))
        a, b = edges[classes[i]], edges[classes[i] + 1]
        hours = grid[a + int(u_dur[i] * (b - a))]
        jobs.append(TraceJob(str(i + 1), float(submit[i]), g, float(round(3600 * hours)), model, batch))
    return Trace.of(name or f"tesserae-{num_jobs}-r{jobs_per_hour:g}-s{seed}", jobs)


def generate_gavel(
    num_jobs: int,
    jobs_per_hour: float,
    seed: int,
    *,
    gpu_mix: Sequence[tuple[int, float]] = GAVEL_GPU_MIX,
    short_prob: float = 0.8,
    short_log10_min: tuple[float, float] = (1.5, 3.0),
    long_log10_min: tuple[float, float] = (3.0, 4.0),
    models: str = A100,
    name: str | None = None,
) -> Trace:
    """Gavel-style trace: duration 60*10^U(1.5,3) s w.p. ``short_prob``, else 60*10^U(3,4) s.

    Arrivals: the first at 0, then exponential gaps with mean 3600/jobs_per_hour s, in whole seconds
    (Gavel writes ``%d``). The job type is uniform over Gavel's types measured at the job's scale
    factor (multi-GPU jobs only get distributed types, as in Gavel); ``total_steps`` is duration x solo
    v100 throughput. ``models`` maps the type onto the A100 table ("a100") or keeps it ("gavel").
    """
    _check_counts(num_jobs, jobs_per_hour)
    sizes, probs = _check_mix(gpu_mix, "gpu_mix")
    if not 0 <= short_prob <= 1:
        raise InputError(f"short_prob must be in [0, 1], got {short_prob}")
    if models not in (A100, GAVEL):
        raise InputError(f"models must be {A100!r} or {GAVEL!r}, got {models!r}")
    r_arr, r_gpu, r_type, r_long, r_dur = _streams(seed, 5)
    single = GAVEL_JOB_TYPES
    multi = [gavel_job_type(f.name, b) for f in GAVEL_FAMILIES if f.distributed for b in f.batches]

    gaps = np.floor(r_arr.exponential(3600.0 / jobs_per_hour, size=max(num_jobs - 1, 0)))
    submit = np.concatenate(([0.0], np.cumsum(gaps)))[:num_jobs]
    gpus = r_gpu.choice(sizes, size=num_jobs, p=probs)
    u_type = r_type.random(num_jobs)
    is_long = r_long.random(num_jobs) >= short_prob
    exps = r_dur.random(num_jobs)
    throughputs = solo_throughputs(REFERENCE_WORKER)

    jobs = []
    for i in range(num_jobs):
        g = int(gpus[i])
        pool = single if g == 1 else multi
        job_type = pool[int(u_type[i] * len(pool))]
        lo, hi = long_log10_min if is_long[i] else short_log10_min
        duration = float(max(1, round(60 * 10 ** (lo + (hi - lo) * exps[i]))))
        steps = max(1, int(duration * throughputs[gavel_table_key(job_type, g)]))
        _, tb = split_gavel_type(job_type)
        model, batch = map_model(job_type, "" if tb is None else str(tb), g, models)
        jobs.append(TraceJob(str(i + 1), float(submit[i]), g, duration, model, batch,
                             total_steps=steps, source_type=job_type))
    return Trace.of(name or f"gavel-{num_jobs}-r{jobs_per_hour:g}-s{seed}", jobs)



def with_users(trace: Trace, users: int, seed: int) -> Trace:
    """The trace with each job's ``user`` drawn uniformly from ``user0`` .. ``user<users-1>``, from a
    stream of its own (seeded by ``seed``), so the jobs themselves are those of the trace without
    users. What a shared cluster looks like to packing: most pairs are two users' jobs."""
    if users < 1:
        raise InputError(f"number of users must be >= 1, got {users}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, users]))
    drawn = rng.integers(users, size=len(trace))
    return Trace(trace.name, tuple(dataclasses.replace(j, user=f"user{int(k)}") for j, k in zip(trace, drawn)))
