"""Per-job bookkeeping of the simulator shell (never handed to the core).

The numbers that change every round for every placed job (remaining work, service, counters, the
speed alone) live in arrays over job slots (``JobColumns``, one slot per trace job in arrival
order), so a round updates all placed jobs with a few array operations instead of a Python step
per job and field. ``LiveJob`` is one job's handle: its fixed data and rarely changed fields, and
properties that read and write its slot (Python floats and ints out, as the plain fields were).
Array and scalar arithmetic are the same IEEE double operations, so results do not depend on which
path updated a job.
"""

from __future__ import annotations

import numpy as np

from ..model import Job
from .traces.record import TraceJob

_FLOATS = ("remaining", "done_work", "attained", "executed", "packed_s", "solo_speed")
_INTS = ("rounds_run", "rounds_packed")


class JobColumns:
    """The per-round numbers of every job slot, and what views need of each job (object arrays:
    the trace's own values come back out, not float copies)."""

    def __init__(self, size: int) -> None:
        self.size = size
        for name in _FLOATS:
            setattr(self, name, np.zeros(size))
        for name in _INTS:
            setattr(self, name, np.zeros(size, dtype=np.int64))
        self.num_gpus = np.zeros(size, dtype=np.int64)
        self.restart_s = np.full(size, np.nan)  # restart overhead, filled when a job first resumes
        self.slot_of: dict[str, int] = {}  # job id -> slot
        self.solo_key = np.full(size, None, dtype=object)  # (GPU type, strategy) of ``solo_speed``
        self.job = np.full(size, None, dtype=object)
        self.submit_time = np.full(size, None, dtype=object)
        self.duration = np.full(size, None, dtype=object)
        self.priority = np.full(size, None, dtype=object)

    # typed for readers; set in __init__
    remaining: np.ndarray  # seconds of isolated work left on the reference GPU
    done_work: np.ndarray
    attained: np.ndarray  # GPU-seconds held
    executed: np.ndarray  # wall seconds held
    packed_s: np.ndarray
    solo_speed: np.ndarray  # speed alone under ``solo_key``
    rounds_run: np.ndarray
    rounds_packed: np.ndarray


def _column(name: str, kind: type) -> property:
    def get(self: LiveJob) -> float:
        value: float = kind(getattr(self.cols, name)[self.k])
        return value

    def put(self: LiveJob, value: float) -> None:
        getattr(self.cols, name)[self.k] = value

    return property(get, put)


class LiveJob:
    """One job of the simulation: trace record, engine job, slot in ``cols``, and counters."""

    __slots__ = ("trace", "job", "cols", "k", "start", "finish", "preemptions", "migrations",
                 "contention_at_arrival", "rounds_at_arrival", "shifts", "returns")

    def __init__(self, trace: TraceJob, job: Job, remaining: float, done_work: float = 0.0, attained: float = 0.0,
                 executed: float = 0.0, rounds_run: int = 0, start: float | None = None, preemptions: int = 0,
                 migrations: int = 0, rounds_packed: int = 0, packed_s: float = 0.0,
                 contention_at_arrival: float = 0.0, rounds_at_arrival: int = 0, finish: float | None = None,
                 cols: JobColumns | None = None, k: int = 0) -> None:
        self.trace, self.job = trace, job
        self.cols, self.k = (cols, k) if cols is not None else (JobColumns(1), 0)
        self.start, self.finish = start, finish
        self.preemptions, self.migrations = preemptions, migrations
        self.shifts = self.returns = 0  # migrations within its nodes, and back to GPUs it left (model/moves.py)
        # the run's cumulative contention and round count at arrival: a job's averages are
        # differences, not per-round additions to every job
        self.contention_at_arrival, self.rounds_at_arrival = contention_at_arrival, rounds_at_arrival
        c, k = self.cols, self.k
        c.remaining[k], c.done_work[k], c.attained[k], c.executed[k] = remaining, done_work, attained, executed
        c.rounds_run[k], c.rounds_packed[k], c.packed_s[k] = rounds_run, rounds_packed, packed_s
        c.solo_speed[k], c.solo_key[k] = 0.0, None
        c.num_gpus[k], c.job[k] = job.num_gpus, job
        c.slot_of[job.id] = k
        c.submit_time[k], c.duration[k], c.priority[k] = trace.submit_time, trace.duration, trace.priority

    remaining = _column("remaining", float)
    done_work = _column("done_work", float)
    attained = _column("attained", float)
    executed = _column("executed", float)
    packed_s = _column("packed_s", float)
    solo_speed = _column("solo_speed", float)
    rounds_run = _column("rounds_run", int)
    rounds_packed = _column("rounds_packed", int)

    @property
    def solo_key(self) -> tuple[str, str | None] | None:
        key: tuple[str, str | None] | None = self.cols.solo_key[self.k]
        return key

    @solo_key.setter
    def solo_key(self, key: tuple[str, str | None] | None) -> None:
        self.cols.solo_key[self.k] = key
