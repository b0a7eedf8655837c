"""LLM parallelism strategies as points in a feature space, and the candidate space of a job.

Strategies are spelled as in the A100 table (parsed by ``model/strategy.py``): a per-stage layer
split ("10,14", "2,10,10,2"), ``TP<layers>`` (every GPU holds 1/N of every layer) or ``DP<layers>``
(every GPU holds the whole model). Features, per GPU i of N: the fraction of the model's layers it
holds, then two flags (TP, DP). Speeds change smoothly with the split (moving layers between stages
moves compute and memory), which is what lets a Gaussian process predict unmeasured splits.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..model import InputError
from ..model.strategy import Kind, Strategy, parse_strategy


def features(strategy: str, num_gpus: int) -> np.ndarray:
    """``num_gpus`` per-GPU layer fractions, then [is_tp, is_dp]."""
    s = parse_strategy(strategy)
    out = np.zeros(num_gpus + 2)
    if s.kind is Kind.TENSOR:
        out[:num_gpus] = 1.0 / num_gpus
        out[num_gpus] = 1.0
        return out
    if s.kind is Kind.DATA:
        out[:num_gpus] = 1.0
        out[num_gpus + 1] = 1.0
        return out
    per = s.replicas(num_gpus)  # data-parallel replicas of each stage
    for i in range(num_gpus):
        out[i] = s.stages[i // per] / s.layers
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
                out.append(str(Strategy(Kind.PIPELINE, split)))
    return (*out, str(Strategy(Kind.TENSOR, (layers,))), str(Strategy(Kind.DATA, (layers,))))
