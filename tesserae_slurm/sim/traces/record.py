"""The trace record every loader and generator produces, and the ordered trace that holds them.

A trace job is what the simulator needs and nothing else: when it arrives, how many GPUs it asks for,
how long it would run alone on the reference GPU, and the profile key (model, batch size) that tells
the engine how it packs. Source-specific columns (Gavel's command line, Shockwave's batch-size mode)
are dropped at the edge; ``total_steps`` and ``source_type`` are kept where the source has them so a
converted trace can still be traced back to its origin.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from ...model import InputError


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace. Times are seconds; ``duration`` is isolated run time on the reference GPU."""

    job_id: str
    submit_time: float
    num_gpus: int
    duration: float
    model: str  # canonical profile model name (see models.py)
    batch_size: str  # "64", LLM "256/16"; "" for Gavel job types without one (A3C, CycleGAN)
    user: str = ""
    priority: float = 1.0  # weight (Gavel's priority_weight) and the site's order (slurm-priority: higher first)
    no_pack: bool = False
    total_steps: int | None = None  # iterations, where the source has them (Gavel/Shockwave/Philly)
    source_type: str | None = None  # the job type as the source file wrote it
    account: str = ""  # Slurm account, for per-account GPU limits
    time_limit: float | None = None  # seconds the user asked for (Slurm --time); None: not in the source

    def __post_init__(self) -> None:
        problem = record_problem(self)
        if problem:
            raise InputError(f"job {self.job_id!r}: {problem}")


def record_problem(j: TraceJob) -> str:
    """The first thing wrong with a record, or "" (loaders prefix it with file and line)."""
    if not j.job_id:
        return "job id must be a non-empty string"
    if isinstance(j.num_gpus, bool) or not isinstance(j.num_gpus, int) or j.num_gpus <= 0:
        return f"num_gpus must be a positive integer, got {j.num_gpus!r}"
    if not math.isfinite(j.submit_time) or j.submit_time < 0:
        return f"submit_time must be a finite time >= 0 s, got {j.submit_time!r}"
    if not math.isfinite(j.duration) or j.duration <= 0:
        return f"duration must be a finite time > 0 s, got {j.duration!r}"
    if not math.isfinite(j.priority) or j.priority <= 0:
        return f"priority must be a finite weight > 0, got {j.priority!r}"
    if j.time_limit is not None and (not math.isfinite(j.time_limit) or j.time_limit <= 0):
        return f"time_limit must be a finite time > 0 s, got {j.time_limit!r}"
    if j.total_steps is not None and (isinstance(j.total_steps, bool) or j.total_steps <= 0):
        return f"total_steps must be a positive integer, got {j.total_steps!r}"
    if not j.model:
        return "model must be non-empty"
    return ""


@dataclass(frozen=True)
class Trace(Sequence[TraceJob]):
    """Jobs ordered by (submit_time, order in the source), with unique ids, under a display name.

    A Sequence, so the simulator takes it wherever it takes a tuple of jobs.
    """

    name: str
    jobs: tuple[TraceJob, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        prev = -math.inf
        for j in self.jobs:
            if j.job_id in seen:
                raise InputError(f"trace {self.name!r}: duplicate job id {j.job_id!r}")
            seen.add(j.job_id)
            if j.submit_time < prev:
                raise InputError(f"trace {self.name!r}: jobs are not ordered by submit_time (at {j.job_id!r})")
            prev = j.submit_time

    @classmethod
    def of(cls, name: str, jobs: Iterable[TraceJob]) -> Trace:
        """Sorts by submit time; ties keep their input order (stable), as the brief's source order."""
        return cls(name, tuple(sorted(jobs, key=lambda j: j.submit_time)))

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)

    @overload
    def __getitem__(self, i: int) -> TraceJob: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[TraceJob, ...]: ...

    def __getitem__(self, i: int | slice) -> TraceJob | tuple[TraceJob, ...]:
        return self.jobs[i]

    def renamed(self, name: str) -> Trace:
        return Trace(name, self.jobs)
