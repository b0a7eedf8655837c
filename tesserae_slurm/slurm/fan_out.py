"""Independent per-job Slurm calls, a bounded number in flight at once.

A start is one `scontrol update` per job (each job its own node list), ~25 ms of client and controller
round trip each: a round that starts hundreds of jobs spends seconds waiting on them one after another.
slurmctld serves each RPC in its own thread and serializes updates of jobs on its job write lock, so
calls for different jobs may overlap; what the daemon needs from them is each job's own outcome, in
the order it asked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .runner import SlurmError

T = TypeVar("T")
R = TypeVar("R")


def fan_out(call: Callable[[T], R], items: Sequence[T], workers: int) -> list[R | SlurmError]:
    """``call(item)`` for every item, at most ``workers`` at a time; returns each one's result, or the
    SlurmError it raised, in the order of ``items``. A failed call does not stop the others (each job's
    failure is its own). Any other exception is a defect and propagates (from the pool, once every call
    has run). With one worker (or one item) the calls run here, one after another."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")

    def one(item: T) -> R | SlurmError:
        try:
            return call(item)
        except SlurmError as exc:
            return exc

    if workers == 1 or len(items) <= 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(min(workers, len(items)), thread_name_prefix="slurm-call") as pool:
        futures = [pool.submit(one, item) for item in items]
    return [f.result() for f in futures]
