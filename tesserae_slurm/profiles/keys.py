"""Value types of a throughput profile and the name normalization every lookup goes through.

A profile answers "how fast does this job run" for a ``ProfileKey`` (model, batch size, GPU count)
on one GPU type, alone or packed with a partner. Speeds are *normalized*: the job's throughput
divided by its best isolated throughput on that GPU type, so 1.0 is "as fast as alone at best" and
0.0 marks an infeasible run (out of memory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STRATEGY_NA = "NA"  # how the A100 table writes "no strategy"
# How a pair shares its GPUs: as clients of one MPS server (one user's jobs: the server runs both at
# once), or time-sliced (two users' jobs: CUDA runs one MPS server per GPU at a time, so their
# servers take turns). Measured with `tesserae profile --mps on|off`.
MPS, TIMESLICE = "mps", "timeslice"
SHARINGS = (MPS, TIMESLICE)
# Fallback where a pair was not measured time-sliced: each job gets this share of its speed alone
# under the strategy it would use packed. Evidence (an H200, batch 64, --mps off; docs/profiling.md):
# resnet50 + resnet50 and PointNet + PointNet ran at 0.45 each; half the GPU less the switching cost.
TIMESLICE_SHARE = 0.45
_EMBEDDED_BATCH = re.compile(r"\(batch size (\d+)\)\s*$")


@dataclass(frozen=True, slots=True, order=True)
class ProfileKey:
    """What a measurement is about: canonical model name, batch size as text, GPU count."""

    model: str
    batch_size: str
    num_gpus: int

    def __str__(self) -> str:
        return repr((self.model, self.batch_size, self.num_gpus))


@dataclass(frozen=True, slots=True)
class PairOption:
    """One measured co-location of job ``a`` (under ``a_strategy``) with job ``b`` (``b_strategy``).

    Strategies are ``None`` for models without parallelism strategies. A 0.0 speed means the pair
    did not fit in memory: such an option is kept (it is what the table says) but is not feasible.
    """

    a_strategy: str | None
    b_strategy: str | None
    a_speed: float
    b_speed: float

    @property
    def feasible(self) -> bool:
        return self.a_speed > 0.0 and self.b_speed > 0.0

    @property
    def total(self) -> float:
        return self.a_speed + self.b_speed

    def swapped(self) -> PairOption:
        return PairOption(self.b_strategy, self.a_strategy, self.b_speed, self.a_speed)


@dataclass(frozen=True, slots=True)
class IsolatedRecord:
    """A job alone on ``num_gpus`` GPUs of ``gpu_type`` (one row per strategy for LLMs).

    ``throughput`` is absolute steps/s where the source has it (Gavel), else ``None``.
    ``written_batch`` is the batch text the source wrote for this strategy (the A100 table writes a
    different micro-batch under tensor parallelism: ``256/32`` vs ``256/16``); empty = the key's.
    """

    gpu_type: str
    key: ProfileKey
    strategy: str | None
    speed: float
    throughput: float | None = None
    written_batch: str = ""


@dataclass(frozen=True, slots=True)
class PairRecord:
    """A measured co-location of two keys on the same GPUs (same GPU count by construction), under
    MPS or time-sliced (``sharing``)."""

    gpu_type: str
    a: ProfileKey
    b: ProfileKey
    option: PairOption
    a_written_batch: str = ""
    b_written_batch: str = ""
    sharing: str = MPS


@dataclass(frozen=True, slots=True)
class JobClass:
    """Jobs that pack identically: same profile key and same allowed strategies.

    ``candidates`` is the job's restriction (``Job.parallelism``) in canonical spelling, in the
    profile's strategy order; empty means every strategy the profile knows for the key.
    """

    key: ProfileKey
    candidates: tuple[str, ...] = ()


def fold(name: str) -> str:
    """Comparison form of a model name: case-insensitive, ignoring ``-``, ``_`` and spaces.

    "ResNet50", "resnet50" and "ResNet-50" are one model; "GPT2-Medium" and "gpt2_medium" too.
    """
    return re.sub(r"[\s_-]+", "", name).lower()


def fold_strategy(strategy: str) -> str:
    """"10, 14" == "10,14"; "tp24" == "TP24"."""
    return re.sub(r"\s+", "", strategy).upper()


def normalize_batch(batch: str) -> str:
    """Batch text as keys store it: "064" -> "64", "256 / 16" -> "256/16", "" stays ""."""
    text = re.sub(r"\s+", "", str(batch))
    parts = text.split("/")
    if all(p.isdigit() for p in parts):
        return "/".join(str(int(p)) for p in parts)
    return text


def embedded_batch(model: str) -> str | None:
    """Gavel job types carry their batch in the name: "ResNet-50 (batch size 64)" -> "64"."""
    m = _EMBEDDED_BATCH.search(model)
    return m.group(1) if m else None


def strategy_from_cell(cell: str) -> str | None:
    text = cell.strip()
    return None if text in ("", STRATEGY_NA) else text
