"""Seeded synthetic round states for benchmarks: a cluster, active jobs and a current placement."""

from __future__ import annotations

import numpy as np

from ..model import Job

# (model, batch sizes) of the A100 profile; LLMs only at 2/4/8 GPUs as in the Tesserae trace generator
SMALL = ("resnet50", "vgg19", "DCGAN", "PointNet")
LLM = (("Bert-Large", "256/16"), ("GPT2-Medium", "512/8"))
GPU_MIX = ((1, 0.6), (2, 0.3), (4, 0.09), (8, 0.01))


def synthetic_jobs(n: int, rng: np.random.Generator) -> tuple[Job, ...]:
    sizes = rng.choice([g for g, _ in GPU_MIX], size=n, p=[p for _, p in GPU_MIX])
    jobs = []
    for i, g in enumerate(sizes):
        g = int(g)
        if g >= 2 and rng.random() < 1 / 3:
            model, batch = LLM[int(rng.integers(len(LLM)))]
        else:
            model, batch = SMALL[int(rng.integers(len(SMALL)))], str(int(rng.choice([32, 64, 128])))
        jobs.append(Job(f"j{i}", g, model, batch, user=f"u{int(rng.integers(50))}"))
    return tuple(jobs)


def perturb_order(jobs: tuple[Job, ...], rng: np.random.Generator, swap_frac: float = 0.1) -> tuple[Job, ...]:
    """Next round's order: mostly the same, some jobs moved (LAS-like churn)."""
    order = list(jobs)
    n = len(order)
    for _ in range(int(n * swap_frac)):
        a, b = rng.integers(n, size=2)
        order[a], order[b] = order[b], order[a]
    return tuple(order)
