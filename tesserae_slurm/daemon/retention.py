"""Retention: old history leaves the state database in small batches between rounds.

One batch = the oldest ``batch`` prunable rounds with their placements, actions, Slurm calls and events,
in one transaction; batches go on until nothing is left or ``budget_s`` is spent, and never past the
start of the next round. Readers (WAL) never wait; the daemon's next round waits for at most one batch.
A round whose actions are still ``intent`` (a crash left them for reconciliation) is never pruned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, or_, select

from .config import RetentionSection
from .store import TERMINAL_STATES, ActionRow, EventRow, JobRow, PlacementRow, RoundRow, SlurmCallRow, Store

DAY = 86400.0


@dataclass
class Pruned:
    rounds: int = 0
    jobs: int = 0
    batches: int = 0
    done: bool = True  # nothing prunable left (else the budget or the next round cut it short)


def _round_ids(store: Store, ret: RetentionSection, now: float, limit: int) -> list[int]:
    conds = []
    if ret.rounds_days > 0:
        conds.append(RoundRow.started_at < now - ret.rounds_days * DAY)
    if ret.max_rounds > 0:
        with store.session() as s:
            newest = s.scalar(select(func.max(RoundRow.round_id))) or 0
        conds.append(RoundRow.round_id <= newest - ret.max_rounds)
    if not conds:
        return []
    open_ = select(ActionRow.round_id).where(ActionRow.status == "intent")
    q = (select(RoundRow.round_id).where(or_(*conds), RoundRow.round_id.not_in(open_))
         .order_by(RoundRow.round_id).limit(limit))
    with store.session() as s:
        return list(s.scalars(q))


def _prune_rounds(store: Store, ids: list[int]) -> None:
    with store.session() as s:
        for table in (PlacementRow, ActionRow, SlurmCallRow, EventRow):
            s.execute(delete(table).where(table.round_id.in_(ids)))
        s.execute(delete(RoundRow).where(RoundRow.round_id.in_(ids)))


def _ended_jobs(store: Store, ret: RetentionSection, now: float, limit: int) -> list[str]:
    if ret.jobs_days <= 0:
        return []
    q = (select(JobRow.job_id).where(and_(JobRow.state.in_(TERMINAL_STATES), JobRow.finished_at.is_not(None),
                                          JobRow.finished_at < now - ret.jobs_days * DAY)).limit(limit))
    with store.session() as s:
        return list(s.scalars(q))


def _prune_jobs(store: Store, ids: list[str], now: float, ret: RetentionSection) -> None:
    with store.session() as s:
        s.execute(delete(JobRow).where(JobRow.job_id.in_(ids)))
        # their events with no round (round events went with the rounds), once as old as the jobs' end
        s.execute(delete(EventRow).where(EventRow.job_id.in_(ids), EventRow.round_id.is_(None),
                                         EventRow.time < now - ret.jobs_days * DAY))


def prune(store: Store, ret: RetentionSection, now: float, until: float | None = None,
          clock: Callable[[], float] = time.monotonic) -> Pruned:
    """Prune in batches until done, ``ret.budget_s`` spent, or ``clock()`` reaches ``until``."""
    out = Pruned()
    t0 = clock()
    stop = t0 + ret.budget_s if until is None else min(until, t0 + ret.budget_s)
    for fetch, drop, field in ((lambda n: _round_ids(store, ret, now, n), lambda ids: _prune_rounds(store, ids),
                                "rounds"),
                               (lambda n: _ended_jobs(store, ret, now, n), lambda ids: _prune_jobs(store, ids, now, ret),
                                "jobs")):
        while True:
            if clock() >= stop:
                out.done = False
                return out
            ids = fetch(ret.batch)
            if not ids:
                break
            drop(ids)
            setattr(out, field, getattr(out, field) + len(ids))
            out.batches += 1
    return out
