"""Parallelism strategy strings -> Megatron-LM flags.

Strategies follow the A100 profile: a per-stage layer split ("10,14", "2,10,10,2"), "TP<layers>" (all
GPUs tensor-parallel) or "DP<layers>" (pure data parallel). Megatron expresses uneven pipelines with
first/last stage sizes and equal middle stages; other splits need --pipeline-model-parallel-layout
(newer Megatron), which we refuse rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import InputError


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


def parse_strategy(strategy: str, num_gpus: int) -> MegatronParallelism:
    s = strategy.strip().upper()
    if num_gpus <= 0:
        raise InputError(f"num_gpus must be positive, got {num_gpus}")
    if s.startswith("TP") and s[2:].isdigit():
        return MegatronParallelism(tensor=num_gpus, pipeline=1, data=1)
    if s.startswith("DP") and s[2:].isdigit():
        return MegatronParallelism(tensor=1, pipeline=1, data=num_gpus)
    try:
        layers = [int(x) for x in s.split(",")]
    except ValueError:
        raise InputError(f"bad parallelism strategy {strategy!r}: expected TPn, DPn or a layer split "
                         "like 10,14") from None
    if any(x <= 0 for x in layers):
        raise InputError(f"bad parallelism strategy {strategy!r}: every stage needs at least one layer")
    pp = len(layers)
    if num_gpus % pp:
        raise InputError(f"strategy {strategy!r} has {pp} pipeline stages, which does not divide {num_gpus} GPUs")
    dp = num_gpus // pp
    if pp == 1 or len(set(layers)) == 1:
        return MegatronParallelism(1, pp, dp)
    middle = layers[1:-1]
    if len(set(middle)) > 1:
        raise InputError(f"strategy {strategy!r}: Megatron's first/last-stage flags need equal middle stages")
    return MegatronParallelism(1, pp, dp, first_stage_layers=layers[0], last_stage_layers=layers[-1])
