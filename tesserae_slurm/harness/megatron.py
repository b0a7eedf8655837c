"""Parallelism strategies -> Megatron-LM flags.

Strategies (parsed by ``model/strategy.py``) follow the A100 profile: a per-stage layer split ("10,14",
"2,10,10,2"), "TP<layers>" (all GPUs tensor-parallel) or "DP<layers>" (pure data parallel). Megatron
expresses uneven pipelines with first/last stage sizes and equal middle stages; other splits need
--pipeline-model-parallel-layout (newer Megatron), which we refuse rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import InputError
from ..model.strategy import Kind, Strategy


@dataclass(frozen=True)
class MegatronParallelism:
    tensor: int
    pipeline: int
    data: int
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None

    def flags(self) -> list[str]:
        out = ["--tensor-model-parallel-size", str(self.tensor), "--pipeline-model-parallel-size", str(self.pipeline)]
        if self.first_stage_layers is not None:
            out += ["--decoder-first-pipeline-num-layers", str(self.first_stage_layers)]
        if self.last_stage_layers is not None:
            out += ["--decoder-last-pipeline-num-layers", str(self.last_stage_layers)]
        return out


def megatron_parallelism(strategy: Strategy, num_gpus: int) -> MegatronParallelism:
    """How Megatron-LM runs ``strategy`` on ``num_gpus`` GPUs; an ``InputError`` where it cannot."""
    dp = strategy.replicas(num_gpus)  # pipeline stages must divide the GPUs
    if strategy.kind is Kind.TENSOR:
        return MegatronParallelism(tensor=num_gpus, pipeline=1, data=1)
    if strategy.kind is Kind.DATA:
        return MegatronParallelism(tensor=1, pipeline=1, data=dp)
    layers = strategy.stages
    pp = len(layers)
    if pp == 1 or len(set(layers)) == 1:
        return MegatronParallelism(1, pp, dp)
    if len(set(layers[1:-1])) > 1:
        raise InputError(f"strategy {str(strategy)!r}: Megatron's first/last-stage flags need equal middle stages")
    return MegatronParallelism(1, pp, dp, first_stage_layers=layers[0], last_stage_layers=layers[-1])
