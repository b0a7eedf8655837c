"""LLM parallelism strategies as points in a feature space, and the candidate space of a job.

Strategies are spelled as in the A100 table: a per-stage layer split ("10,14", "2,10,10,2"),
``TP<layers>`` (every GPU holds 1/N of every layer) or ``DP<layers>`` (every GPU holds the whole
model). Features, per GPU i of N: the fraction of the model's layers it holds, then two flags (TP,
DP). Speeds change smoothly with the split (moving layers between stages moves compute and memory),
which is what lets a Gaussian process predict unmeasured splits.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..model import InputError


def parse_split(strategy: str) -> tuple[int, ...] | None:
    """Layer split of a pipeline strategy; ``None`` for TP/DP."""
    s = strategy.strip().upper()
    if s[:2] in ("TP", "DP"):
        return None
    try:
        split = tuple(int(x) for x in s.split(","))
    except ValueError:
        raise InputError(f"bad parallelism strategy {strategy!r}: expected TPn, DPn or a layer split "
                         "like 10,14") from None
    if not split or any(x <= 0 for x in split):
        raise InputError(f"bad parallelism strategy {strategy!r}: every stage needs at least one layer")
    return split


def features(strategy: str, num_gpus: int) -> np.ndarray:
    """``num_gpus`` per-GPU layer fractions, then [is_tp, is_dp]."""
    s = strategy.strip().upper()
    out = np.zeros(num_gpus + 2)
    if s.startswith("TP"):
        out[:num_gpus] = 1.0 / num_gpus
        out[num_gpus] = 1.0
        return out
    if s.startswith("DP"):
        out[:num_gpus] = 1.0
        out[num_gpus + 1] = 1.0
        return out
    split = parse_split(strategy)
    assert split is not None
    total = sum(split)
    stages = len(split)
    if num_gpus % stages:
        raise InputError(f"strategy {strategy!r} has {stages} stages, which does not divide {num_gpus} GPUs")
    per = num_gpus // stages  # data-parallel replicas of each stage
    for i in range(num_gpus):
        out[i] = split[i // per] / total
    return out


def feature_matrix(strategies: tuple[str, ...] | list[str], num_gpus: int) -> np.ndarray:
    return np.stack([features(s, num_gpus) for s in strategies]) if strategies else np.zeros((0, num_gpus + 2))


def candidate_space(layers: int, num_gpus: int, step: int = 2, min_stage: int = 2) -> tuple[str, ...]:
    """Every split of ``layers`` into ``num_gpus`` stages of multiples of ``step`` (at least
    ``min_stage``), then TP and DP: the space a site searches when it has no table to copy from."""
    if layers <= 0 or num_gpus <= 0 or step <= 0:
        raise InputError("layers, GPU count and step must be positive")
    out: list[str] = []
    if num_gpus > 1:
        units = range(max(min_stage, step), layers + 1, step)
        for split in itertools.product(units, repeat=num_gpus):
            if sum(split) == layers:
                out.append(",".join(str(x) for x in split))
    return (*out, f"TP{layers}", f"DP{layers}")
