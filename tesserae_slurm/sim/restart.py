"""What a preemption or migration costs a job in the simulator: seconds lost when it resumes.

A job that resumes after a preemption, or is migrated, first saves and loads a checkpoint and warms
up again (process start, CUDA/NCCL init, data loader, first iterations); the paper's Figure 3 measures
both on A100 nodes. Defaults (docs/simulator.md): 30 s for the small models (about 20 s warm-up +
10 s checkpoint save/load), 90 s for the LLMs Bert-Large and GPT2-Medium and Gavel's multi-GPU
Transformer/LM families (about 60 s warm-up with pipeline set-up + 30 s for a multi-GB checkpoint
with optimizer state). The first start of a job costs nothing extra: a trace's duration already
holds one start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import InputError

DEFAULT_RESTART_S = 30.0
LLM_RESTART_S = 90.0
DEFAULT_PER_MODEL: Mapping[str, float] = {"Bert-Large": LLM_RESTART_S, "GPT2-Medium": LLM_RESTART_S,
                                          "Transformer": LLM_RESTART_S, "LM": LLM_RESTART_S}


@dataclass(frozen=True)
class RestartCost:
    """Seconds lost on resume/migration: per model (exact name, or a Gavel family such as
    ``"LM"`` for ``"LM (batch size 20)"``), else ``default_s``."""

    default_s: float = DEFAULT_RESTART_S
    per_model: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PER_MODEL))

    def __post_init__(self) -> None:
        for name, s in {"default": self.default_s, **self.per_model}.items():
            if not s >= 0:
                raise InputError(f"restart cost for {name} must be >= 0 seconds, got {s}")

    def of(self, model: str) -> float:
        hit = self.per_model.get(model)
        if hit is None and " (" in model:
            hit = self.per_model.get(model.split(" (", 1)[0])
        return self.default_s if hit is None else hit

    @staticmethod
    def uniform(seconds: float) -> RestartCost:
        return RestartCost(seconds, {})

    def with_overrides(self, overrides: Mapping[str, float]) -> RestartCost:
        return RestartCost(self.default_s, {**self.per_model, **overrides})

    def to_json(self) -> dict[str, object]:
        return {"default_s": self.default_s, "per_model": dict(self.per_model)}
