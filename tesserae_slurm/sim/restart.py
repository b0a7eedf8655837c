"""What a preemption or migration costs a job in the simulator: seconds lost when it resumes.

A job that resumes after a preemption, or is migrated, first saves and loads a checkpoint and warms
up again (process start, CUDA/NCCL init, data loader, first iterations); the paper's Figure 3 measures
both on A100 nodes. Defaults (docs/simulator.md; model/moves.py, where the engine's move costs take the
same numbers): 30 s for the small models (about 20 s warm-up + 10 s checkpoint save/load), 90 s for
the LLMs Bert-Large and GPT2-Medium and Gavel's multi-GPU Transformer/LM families (about 60 s warm-up
with pipeline set-up + 30 s for a multi-GB checkpoint with optimizer state). The first start of a job
costs nothing extra: a trace's duration already holds one start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import InputError, MoveCosts
from ..model.moves import DEFAULT_PER_MODEL as _PER_MODEL
from ..model.moves import DEFAULT_RESTART_S, restart_seconds

DEFAULT_PER_MODEL: Mapping[str, float] = dict(_PER_MODEL)


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
        return restart_seconds(model, self.default_s, self.per_model)

    def move_costs(self, base: MoveCosts, round_s: float) -> MoveCosts:
        """The engine's move costs with this model's restarts (the simulator adds no stop overhead) and
        a horizon of three rounds."""
        return MoveCosts(self.default_s, tuple(sorted(self.per_model.items())), 0.0, 3 * round_s, base.recent_rounds)

    @staticmethod
    def uniform(seconds: float) -> RestartCost:
        return RestartCost(seconds, {})

    def with_overrides(self, overrides: Mapping[str, float]) -> RestartCost:
        return RestartCost(self.default_s, {**self.per_model, **overrides})

    def to_json(self) -> dict[str, object]:
        return {"default_s": self.default_s, "per_model": dict(self.per_model)}
