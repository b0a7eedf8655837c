"""Tiresias discretized 2D-LAS (SymbioticLab/Tiresias ``dlas-gpu``; policies.md §4), round by round.

K queues Q0 (highest) .. Q(K-1). A job enters the tail of Q0; once its attained service since its
last promotion reaches ``queue_limits[q]`` it moves down (to the tail of the next queue; several
levels at once if one round crossed several limits); the last queue never demotes. Within a queue
the order is entry order, except that jobs that ran last round are moved ahead of those that waited
(each group keeping its order), so running jobs keep their place and jobs do not swap back and
forth. Starvation guard (``promote_knob`` P > 0): a waiting job below Q0 that has run since its last
promotion goes back to the tail of Q0, with its service and counters reset, once it has waited
``P x`` the wall time it ran since that promotion. P = 0 (the default, as in the reference code)
turns promotion off; then waits are not counted either (``pending_s`` stays 0). ``promote_max_run_s``
(beyond Tiresias; default no cap) promotes only jobs that have run at most that many wall seconds in
all: the guard then rescues jobs that got little service (the starved ones) without cycling long
jobs between Q0 and the lower queues, each cycle preempting and moving others.

Service is GPU-seconds (``service="gpu-time"``, the default, Tiresias' 2D attained service), wall
seconds (``"time"``, Tiresias' ``dlas``), or progress (``"progress"``, beyond the paper and Tiresias:
GPU-seconds x the normalized speed the job ran at, ``progress_service``), so a job packed with a
partner that slows it is not demoted for GPU time it barely used. Thresholds are checked at round
boundaries.

Quiet rounds (``stable_rounds``/``skip_rounds``, for the simulator's fast-forward): while the jobs and
the running set stay, the order only changes when a running job's service crosses its queue's limit
or a waiting job's wait reaches the promotion threshold; both are replayed with the shells' float
additions, one round at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from ..model import InputError, JobView
from .base import Ranking, SchedulingInput
from .las import SERVICES as LAS_SERVICES

SERVICES = (*LAS_SERVICES, "progress")

DEFAULT_QUEUE_LIMITS = (3250.0, 7200.0)  # Tiresias jobs.py: 3 queues, Q0->Q1 at 3250, Q1->Q2 at 7200

_ID, _RUNNING = attrgetter("job.id"), attrgetter("running")
_ATTAINED, _EXECUTED = attrgetter("attained_service"), attrgetter("executed_time")


def progress_service(views: Sequence[JobView], attained: np.ndarray) -> np.ndarray:
    """Service charged by progress: the work a job has done (seconds of work at its best speed alone
    on the reference GPU) x its GPUs, i.e. GPU time held x the normalized speed it ran at. A job
    slowed to 0.3 by its packing partner is charged 0.3 of the GPU time it held. The work done is the
    view's ``work_done`` (the daemon counts it), else ``total_work - remaining_work`` (the simulator);
    jobs whose work the shell does not know are charged ``attained`` (GPU time)."""
    n = len(views)
    total = np.fromiter((np.nan if v.total_work is None else v.total_work for v in views), float, n)
    left = np.fromiter((np.nan if v.remaining_work is None else v.remaining_work for v in views), float, n)
    counted = np.fromiter((np.nan if v.work_done is None else v.work_done for v in views), float, n)
    gpus = np.fromiter((v.num_gpus for v in views), float, n)
    done = np.where(np.isnan(counted), total - left, counted) * gpus
    return np.where(np.isnan(done), attained, done)


class QueuedJob(NamedTuple):
    """One job's place in the queues; counters are relative to its last promotion (or arrival)."""

    queue: int
    seq: int  # entry order within its queue (lower = earlier)
    service_base: float  # the job's attained service at its last promotion (policy units)
    executed_base: float  # wall seconds run at its last promotion
    pending_s: float = 0.0  # wall seconds waited since the last promotion, counted once it has run since
    # (and only with promotion on)


@dataclass(frozen=True, eq=False)
class Queues(Mapping[str, QueuedJob]):
    """Every job's ``QueuedJob`` as columns (arrays, never changed in place), one row per job
    (``rank`` leaves them in ranking order); reads as a mapping id -> QueuedJob."""

    ids: tuple[str, ...]
    cols: _Columns

    @staticmethod
    def of(jobs: Mapping[str, QueuedJob]) -> Queues:
        if isinstance(jobs, Queues):
            return jobs
        rows = list(jobs.values())
        return Queues(tuple(jobs), _Columns(
            np.array([q.queue for q in rows], dtype=np.int64), np.array([q.seq for q in rows], dtype=np.int64),
            np.array([q.service_base for q in rows], dtype=float),
            np.array([q.executed_base for q in rows], dtype=float), np.array([q.pending_s for q in rows], dtype=float)))

    @cached_property
    def _row_of(self) -> dict[str, int]:
        """id -> row: reading every job (storing the state each round) must not scan ``ids`` per job."""
        return dict(zip(self.ids, range(len(self.ids)), strict=True))

    def columns(self, order: Sequence[str] | None = None) -> _Columns:
        """The columns; rows in ``order`` (a permutation of ``ids``) if given."""
        if order is None or tuple(order) == self.ids:
            return self.cols
        row_of = self._row_of
        return self.cols.take(np.array([row_of[j] for j in order], dtype=np.int64))

    def __getitem__(self, jid: str) -> QueuedJob:
        i = self._row_of.get(jid)
        if i is None:
            raise KeyError(jid)
        c = self.cols
        return QueuedJob(int(c.queue[i]), int(c.seq[i]), float(c.service_base[i]), float(c.executed_base[i]),
                         float(c.pending_s[i]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"Queues({dict(self)!r})"


class _Columns(NamedTuple):
    queue: np.ndarray
    seq: np.ndarray
    service_base: np.ndarray
    executed_base: np.ndarray
    pending_s: np.ndarray

    def take(self, rows: np.ndarray) -> _Columns:
        return _Columns(*(c[rows] for c in self))


@dataclass(frozen=True)
class TiresiasState:
    jobs: Mapping[str, QueuedJob] = field(default_factory=lambda: Queues.of({}))
    next_seq: int = 0
    last_now: float | None = None
    promotions: int = 0  # total so far (reported by shells)
    demotions: int = 0


@dataclass(frozen=True)
class TiresiasPolicy:
    queue_limits: Sequence[float] = DEFAULT_QUEUE_LIMITS
    promote_knob: float = 0.0
    promote_max_run_s: float = float("inf")  # only jobs that ran at most this long in all are promoted
    service: str = "gpu-time"
    name: str = "tiresias"

    def __post_init__(self) -> None:
        limits = tuple(float(x) for x in self.queue_limits)
        if any(x <= 0 for x in limits) or any(b <= a for a, b in zip(limits, limits[1:], strict=False)):
            raise InputError(f"tiresias: queue_limits must be positive and increasing, got {list(limits)}")
        if self.promote_knob < 0:
            raise InputError(f"tiresias: promote_knob must be >= 0 (0 = off), got {self.promote_knob}")
        if not self.promote_max_run_s > 0:
            raise InputError(f"tiresias: promote_max_run_s must be > 0 (inf = no cap), got {self.promote_max_run_s}")
        if self.service not in SERVICES:
            raise InputError(f"tiresias: service must be one of {', '.join(SERVICES)}, got {self.service!r}")
        object.__setattr__(self, "queue_limits", limits)

    @property
    def num_queues(self) -> int:
        return len(self.queue_limits) + 1

    def initial_state(self) -> TiresiasState:
        return TiresiasState()

    def rank(self, inp: SchedulingInput, state: TiresiasState) -> tuple[Ranking, TiresiasState]:
        views, n = inp.jobs, len(inp.jobs)
        ids = list(map(_ID, views))
        executed = np.fromiter(map(_EXECUTED, views), float, n)
        service = self._service(views, executed)
        running = np.fromiter(map(_RUNNING, views), bool, n)
        elapsed = 0.0 if state.last_now is None else max(0.0, inp.now - state.last_now)
        # 1. the known jobs still active (``at``: their views); waits grow for waiting jobs that ran
        #    since their last promotion
        known = Queues.of(state.jobs)
        pos = dict(zip(ids, range(n), strict=True))
        at = np.fromiter(map(pos.get, known.ids, repeat(-1)), np.int64, len(known.ids))
        cols = known.columns().take(at >= 0)
        at = at[at >= 0]
        if len(at) and not 0 <= cols.queue.min() <= cols.queue.max() < self.num_queues:
            raise InputError(f"tiresias: state has a job in a queue outside 0..{self.num_queues - 1}")
        pend = cols.pending_s
        if self.promote_knob > 0:
            grows = ~running[at] & (executed[at] - cols.executed_base > 0)
            pend = np.where(grows, pend + elapsed, pend)
        # 2. renumber each queue: last round's running jobs first, then the waiting ones, in entry order
        rows = np.lexsort((cols.seq, ~running[at], cols.queue))
        at, cols = at[rows], cols._replace(pending_s=pend).take(rows)
        # 3. arrivals at the tail of Q0, in arrival order
        arrived = np.ones(n, bool)
        arrived[at] = False
        new = np.flatnonzero(arrived)
        zeros = np.zeros(len(new))
        at = np.concatenate([at, new])
        queue = np.concatenate([cols.queue, np.zeros(len(new), np.int64)])
        seq = state.next_seq + np.arange(n)
        sb, eb, pend = (np.concatenate([c, zeros]) for c in (cols.service_base, cols.executed_base, cols.pending_s))
        next_seq = state.next_seq + n
        # 4. demotion (service since the last promotion reached the queue's limit; several at once) or
        #    promotion (waited P x the time run since then); a job that moves goes to its new queue's
        #    tail, in (queue, entry) order
        level = np.maximum(queue, np.searchsorted(np.array(self.queue_limits), service[at] - sb, side="right"))
        down = level != queue
        up = np.zeros(n, bool)
        if self.promote_knob > 0:
            ran = executed[at] - eb
            up = ~down & (queue > 0) & ~running[at] & (ran > 0) & (executed[at] <= self.promote_max_run_s) \
                & (pend >= self.promote_knob * ran)
        by_entry = np.lexsort((seq, queue))
        moved = by_entry[(down | up)[by_entry]]
        seq[moved] = next_seq + np.arange(len(moved))
        next_seq += len(moved)
        queue = np.where(down, level, np.where(up, 0, queue))
        sb, eb = np.where(up, service[at], sb), np.where(up, executed[at], eb)
        pend = np.where(up, 0.0, pend)
        # 5. the ranking: queue by queue, entry order within each
        rows = np.lexsort((seq, queue))
        order = tuple(map(ids.__getitem__, at[rows].tolist()))
        jobs = Queues(order, _Columns(queue, seq, sb, eb, pend).take(rows))
        return Ranking(order), TiresiasState(jobs, next_seq, inp.now, state.promotions + int(up.sum()),
                                             state.demotions + int(down.sum()))

    def _service(self, views: Sequence[JobView], executed: np.ndarray) -> np.ndarray:
        """Each job's attained service in the policy's units (see the module docstring)."""
        if self.service == "time":
            return executed
        attained = np.fromiter(map(_ATTAINED, views), float, len(views))
        if self.service == "gpu-time":
            return attained
        return progress_service(views, attained)

    def stable_rounds(self, inp: SchedulingInput, state: TiresiasState, ranking: Ranking, max_rounds: int) -> int:
        views = dict(zip(map(_ID, inp.jobs), inp.jobs, strict=True))
        known = Queues.of(state.jobs)
        if ranking.pairs or len(known) != len(views) or len(ranking.order) != len(views):
            return 0
        if not all(map(views.__contains__, ranking.order)) or (known.ids != ranking.order
                                                                and set(known.ids) != views.keys()):
            return 0
        vs = list(map(views.__getitem__, ranking.order))
        cols = known.columns(ranking.order)
        waiting = ~np.fromiter(map(_RUNNING, vs), bool, len(vs))
        # 1. the next round sorts by (queue, waiting, entry): the ranking must already be in that order
        #    (a job demoted or promoted this round sits at its queue's tail, even if it runs)
        q0, q1, w0, w1 = cols.queue[:-1], cols.queue[1:], waiting[:-1], waiting[1:]
        s0, s1 = cols.seq[:-1], cols.seq[1:]
        if not ((q0 < q1) | ((q0 == q1) & ((w0 < w1) | ((w0 == w1) & (s0 < s1))))).all():
            return 0
        # 2. rounds before a running job's service reaches its queue's limit
        bound = self._demotion_bound(inp, vs, cols, ~waiting, max_rounds)
        # 3. rounds before a waiting job below Q0 that ran since its promotion has waited P x that run
        if self.promote_knob > 0 and bound > 0:
            total = np.fromiter(map(_EXECUTED, vs), float, len(vs))  # a waiting job's does not grow
            ran = total - cols.executed_base
            at = waiting & (cols.queue > 0) & (ran > 0) & (total <= self.promote_max_run_s)
            pending, need = cols.pending_s[at], self.promote_knob * ran[at]
            for i, e in enumerate(self._elapsed(inp, state, bound)):
                pending = pending + e
                if (pending >= need).any():
                    return i
        return bound

    def skip_rounds(self, inp: SchedulingInput, state: TiresiasState, ranking: Ranking,
                    rounds: int) -> TiresiasState:
        """Each quiet round renumbers every job in ranking order and adds the round's length to the
        wait of every waiting job that has run since its last promotion (with promotion on)."""
        if rounds <= 0:
            return state
        views = dict(zip(map(_ID, inp.jobs), inp.jobs, strict=True))
        vs = list(map(views.__getitem__, ranking.order))
        cols = Queues.of(state.jobs).columns(ranking.order)
        pend = cols.pending_s
        if self.promote_knob > 0:
            waits = ~np.fromiter(map(_RUNNING, vs), bool, len(vs))
            waits &= np.fromiter(map(_EXECUTED, vs), float, len(vs)) - cols.executed_base > 0
            for e in self._elapsed(inp, state, rounds):
                pend = np.where(waits, pend + e, pend)
        n = len(ranking.order)
        base = state.next_seq + (rounds - 1) * n
        last = inp.now
        for _ in range(rounds):
            last += inp.round_s
        jobs = Queues(ranking.order, cols._replace(seq=base + np.arange(n), pending_s=pend))
        return TiresiasState(jobs, base + n, last, state.promotions, state.demotions)

    def _demotion_bound(self, inp: SchedulingInput, views: Sequence[JobView], cols: _Columns, running: np.ndarray,
                        bound: int) -> int:
        """Rounds before a running job's service reaches its queue's limit (at most ``bound``): each
        such job's service grows by one round's service at a time, as the shells add it."""
        at = np.flatnonzero(running & (cols.queue < len(self.queue_limits)))
        if not len(at) or bound <= 0:
            return bound
        if self.service == "progress":  # grows by speed x GPU time, and speeds are not known here
            return 0
        sel = [views[i] for i in at.tolist()]
        service = np.fromiter(map(_ATTAINED if self.service == "gpu-time" else _EXECUTED, sel), float, len(sel))
        gpus = np.array([v.num_gpus for v in sel], dtype=float)
        inc = np.full(len(sel), inp.round_s) if self.service == "time" else gpus * inp.round_s
        base, limit = cols.service_base[at], np.array(self.queue_limits)[cols.queue[at]]
        for i in range(bound):
            service += inc
            if (service - base >= limit).any():
                return i
        return bound

    @staticmethod
    def _elapsed(inp: SchedulingInput, state: TiresiasState, rounds: int) -> list[float]:
        """What ``rank`` adds to a waiting job's wait in each of the next ``rounds`` rounds."""
        out, t, last = [], inp.now, state.last_now
        for _ in range(rounds):
            t += inp.round_s
            out.append(0.0 if last is None else max(0.0, t - last))
            last = t
        return out
