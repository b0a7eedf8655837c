"""`tesserae bench decision`: whole-decision time by stage on seeded synthetic states (medians)."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np

from ..engine import EngineConfig, RoundRequest, decide
from ..model import Cluster
from ..model.gpu_limits import GpuLimits
from ..profiles import profile_from_spec
from .synthetic import perturb_order, synthetic_jobs


@dataclass(frozen=True)
class DecisionBench:
    gpus: int
    jobs: int
    repeats: int
    median_ms: float
    p90_ms: float
    stages: dict[str, float]  # stage -> median ms
    migrations_median: float
    packed_median: float
    warmup: int = 1  # untimed runs first (numba compiles the migration core on its first call)


def bench_decision(gpus: int, jobs: int, repeats: int = 7, seed: int = 0, gpus_per_node: int = 4,
                   config: EngineConfig | None = None, warmup: int = 1,
                   limits: GpuLimits | None = None) -> DecisionBench:
    """Each repeat: a fresh seeded state whose `current` is the engine's own previous decision. The first
    ``warmup`` runs (on the first repeat's state) are not counted: they pay the JIT compile."""
    profile = profile_from_spec("a100")
    cluster = Cluster.from_spec(f"{max(1, gpus // gpus_per_node)}x{gpus_per_node}:a100")
    config = config or EngineConfig()
    stages: dict[str, list[float]] = {"placement": [], "packing": [], "migration": []}
    totals, migs, packed = [], [], []
    for i, r in enumerate([0] * warmup + list(range(repeats))):
        rng = np.random.default_rng(seed + r)
        prev = synthetic_jobs(jobs, rng)
        current = decide(RoundRequest(cluster, prev, None, config=config, limits=limits), profile).placement
        order = perturb_order(prev, rng)
        t0 = time.perf_counter()
        d = decide(RoundRequest(cluster, order, current, config=config, limits=limits), profile,
                   clock=time.perf_counter)
        if i < warmup:
            continue
        totals.append((time.perf_counter() - t0) * 1e3)
        for k in stages:
            stages[k].append(getattr(d.timings, k) * 1e3)
        migs.append(len(d.migrated))
        packed.append(len(d.packed))
    totals.sort()
    return DecisionBench(
        gpus=cluster.total_gpus, jobs=jobs, repeats=repeats, warmup=warmup,
        median_ms=statistics.median(totals), p90_ms=totals[min(len(totals) - 1, int(0.9 * len(totals)))],
        stages={k: statistics.median(v) for k, v in stages.items()},
        migrations_median=statistics.median(migs), packed_median=statistics.median(packed),
    )


def as_json(b: DecisionBench) -> dict:
    return asdict(b)
