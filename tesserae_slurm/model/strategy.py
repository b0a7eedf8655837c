"""LLM parallelism strategies: the one parser and formatter of their text form.

The A100 table, profiles, jobs (``Job.parallelism``) and assignments spell a strategy one of three ways:

* a per-stage layer split, ``"10,14"`` or ``"2,10,10,2"``: Megatron-LM pipeline stages holding that
  many layers each, first to last (stages that divide the GPUs run as data-parallel replicas);
* ``TP<layers>`` (``"TP24"``): every GPU holds 1/N of every layer (tensor parallel);
* ``DP<layers>`` (``"DP24"``): every GPU holds the whole model (data parallel).

Whitespace is ignored and case is not significant, as in the profile's comparison of strategy labels
(``profiles.keys.fold_strategy``): ``"10, 14"`` is ``10,14`` and ``"tp24"`` is ``TP24``. Layer counts are
decimal digits (0-9), every stage at least one layer. Profiles keep strategies as opaque labels; this is
for the code that needs what a strategy means (the simulator's strategy modes, the estimators'
features, Megatron's flags).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .errors import InputError

_SPLIT = re.compile(r"[0-9]+(?:,[0-9]+)*")
_WHOLE = re.compile(r"(TP|DP)([0-9]+)")
_SPACE = re.compile(r"\s+")


class Kind(Enum):
    PIPELINE = "pipeline"  # "10,14"
    TENSOR = "TP"  # "TP24"
    DATA = "DP"  # "DP24"


@dataclass(frozen=True, slots=True)
class Strategy:
    """A parsed strategy. ``stages``: layers per pipeline stage, first to last; TP and DP have one stage
    that holds every layer (``TP24`` -> ``(24,)``), split over the GPUs (TP) or replicated on each (DP)."""

    kind: Kind
    stages: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.stages or (self.kind is not Kind.PIPELINE and len(self.stages) != 1):
            raise InputError(f"{self.kind.value} strategy with stages {self.stages}: "
                             "a pipeline needs at least one stage, TP and DP exactly one")
        if any(x <= 0 for x in self.stages):
            raise InputError(f"strategy {str(self)!r}: every stage needs at least one layer")

    @property
    def layers(self) -> int:
        """The model's layer count."""
        return sum(self.stages)

    @property
    def split(self) -> tuple[int, ...] | None:
        """Layers per pipeline stage; None for TP and DP."""
        return self.stages if self.kind is Kind.PIPELINE else None

    def replicas(self, num_gpus: int) -> int:
        """Data-parallel copies of each stage on ``num_gpus`` GPUs: 1 for TP, every GPU for DP, GPUs /
        stages for a pipeline (which must divide them)."""
        if num_gpus <= 0:
            raise InputError(f"GPU count must be positive, got {num_gpus}")
        if self.kind is Kind.TENSOR:
            return 1
        if self.kind is Kind.DATA:
            return num_gpus
        if num_gpus % len(self.stages):
            raise InputError(f"strategy {str(self)!r} has {len(self.stages)} pipeline stages, which does not divide "
                             f"{num_gpus} GPUs")
        return num_gpus // len(self.stages)

    def __str__(self) -> str:
        """The canonical spelling, the A100 table's: ``10,14``, ``TP24``, ``DP24``."""
        if self.kind is Kind.PIPELINE:
            return ",".join(str(x) for x in self.stages)
        return f"{self.kind.value}{self.stages[0]}"


def parse_strategy(text: str) -> Strategy:
    """``"10,14"`` -> pipeline (10, 14); ``"TP24"`` / ``"DP24"`` -> tensor / data parallel over 24 layers.
    Anything else is an ``InputError`` (a ``ValueError``) naming ``text``."""
    s = _SPACE.sub("", text).upper()
    whole = _WHOLE.fullmatch(s)
    stages: tuple[int, ...]
    if whole is not None:
        kind, stages = Kind(whole[1]), (int(whole[2]),)
    elif _SPLIT.fullmatch(s):
        kind, stages = Kind.PIPELINE, tuple(int(x) for x in s.split(","))
    else:
        raise InputError(f"bad parallelism strategy {text!r}: expected a layer split like 10,14, "
                         "TP<layers> or DP<layers>")
    if 0 in stages:
        raise InputError(f"bad parallelism strategy {text!r}: every stage needs at least one layer")
    return Strategy(kind, stages)
