"""Retention: old history leaves the state database in small batches between rounds.

One batch = the oldest ``batch`` prunable rounds with their placements, actions, Slurm calls and events,
in one transaction; batches go on until nothing is left or ``budget_s`` is spent, and never past the
start of the next round. Readers (WAL) never wait; the daemon's next round waits for at most one batch.
A round whose actions are still ``intent`` (a crash left them for reconciliation) is never pruned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...site.config import RetentionSection
from .store import Store

DAY = 86400.0
T = TypeVar("T")


@dataclass
class Pruned:
    rounds: int = 0
    jobs: int = 0
    batches: int = 0
    done: bool = True  # nothing prunable left (else the budget or the next round cut it short)


def prune(store: Store, ret: RetentionSection, now: float, until: float | None = None,
          clock: Callable[[], float] = time.monotonic) -> Pruned:
    """Prune in batches until done, ``ret.budget_s`` spent, or ``clock()`` reaches ``until``."""
    t0 = clock()
    stop = t0 + ret.budget_s if until is None else min(until, t0 + ret.budget_s)
    rounds_before = now - ret.rounds_days * DAY if ret.rounds_days > 0 else None
    keep_rounds = ret.max_rounds if ret.max_rounds > 0 else None
    rounds, batches, done = _in_batches(lambda n: store.prunable_rounds(rounds_before, keep_rounds, n),
                                        store.delete_rounds, ret.batch, stop, clock)
    if not done:
        return Pruned(rounds, 0, batches, done)
    jobs_before = now - ret.jobs_days * DAY
    jobs, job_batches, done = _in_batches(lambda n: store.ended_jobs(jobs_before, n) if ret.jobs_days > 0 else [],
                                          lambda ids: store.delete_jobs(ids, jobs_before), ret.batch, stop, clock)
    return Pruned(rounds, jobs, batches + job_batches, done)


def _in_batches(fetch: Callable[[int], Sequence[T]], drop: Callable[[Sequence[T]], None], batch: int,
                stop: float, clock: Callable[[], float]) -> tuple[int, int, bool]:
    """(rows dropped, batches, whether nothing is left) after dropping batches until ``clock()`` reaches ``stop``."""
    rows = batches = 0
    while clock() < stop:
        ids = fetch(batch)
        if not ids:
            return rows, batches, True
        drop(ids)
        rows, batches = rows + len(ids), batches + 1
    return rows, batches, False
