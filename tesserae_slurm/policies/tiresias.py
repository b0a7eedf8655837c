"""Tiresias discretized 2D-LAS (SymbioticLab/Tiresias ``dlas-gpu``; policies.md §4), round by round.

K queues Q0 (highest) .. Q(K-1). A job enters the tail of Q0; once its attained service since its
last promotion reaches ``queue_limits[q]`` it moves down (to the tail of the next queue; several
levels at once if one round crossed several limits); the last queue never demotes. Within a queue
the order is entry order, except that jobs that ran last round are moved ahead of those that waited
(each group keeping its order), so running jobs keep their place and jobs do not swap back and
forth. Starvation guard (``promote_knob`` P > 0): a waiting job below Q0 that has run since its last
promotion goes back to the tail of Q0, with its service and counters reset, once it has waited
``P x`` the wall time it ran since that promotion. P = 0 (the default, as in the reference code)
turns promotion off; then waits are not counted either (``pending_s`` stays 0).

Service is GPU-seconds (``service="gpu-time"``, the default, Tiresias' 2D attained service) or wall
seconds (``"time"``, Tiresias' ``dlas``). Thresholds are checked at round boundaries.

Quiet rounds (``stable_rounds``/``skip_rounds``, for the simulator's fast-forward): while the jobs and
the running set stay, the order only changes when a running job's service crosses its queue's limit
or a waiting job's wait reaches the promotion threshold; both are replayed with the shells' float
additions, one round at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..model import InputError, JobView
from .base import Ranking, SchedulingInput
from .las import SERVICES, service_of

DEFAULT_QUEUE_LIMITS = (3250.0, 7200.0)  # Tiresias jobs.py: 3 queues, Q0->Q1 at 3250, Q1->Q2 at 7200


class QueuedJob(NamedTuple):
    """One job's place in the queues; counters are relative to its last promotion (or arrival)."""

    queue: int
    seq: int  # entry order within its queue (lower = earlier)
    service_base: float  # the job's attained service at its last promotion (policy units)
    executed_base: float  # wall seconds run at its last promotion
    pending_s: float = 0.0  # wall seconds waited since the last promotion, counted once it has run since
    # (and only with promotion on)


@dataclass(frozen=True)
class TiresiasState:
    """The queues after a round. ``jobs`` is never changed in place (each round builds a new dict)."""

    jobs: Mapping[str, QueuedJob] = field(default_factory=dict)
    next_seq: int = 0
    last_now: float | None = None
    promotions: int = 0  # total so far (reported by shells)
    demotions: int = 0


def _entry_key(q: QueuedJob, v: JobView) -> tuple[int, bool, int]:
    """Last round's order within the queues: running jobs first, each group in entry order."""
    return q.queue, not v.running, q.seq


@dataclass(frozen=True)
class TiresiasPolicy:
    queue_limits: Sequence[float] = DEFAULT_QUEUE_LIMITS
    promote_knob: float = 0.0
    service: str = "gpu-time"
    name: str = "tiresias"

    def __post_init__(self) -> None:
        limits = tuple(float(x) for x in self.queue_limits)
        if any(x <= 0 for x in limits) or any(b <= a for a, b in zip(limits, limits[1:], strict=False)):
            raise InputError(f"tiresias: queue_limits must be positive and increasing, got {list(limits)}")
        if self.promote_knob < 0:
            raise InputError(f"tiresias: promote_knob must be >= 0 (0 = off), got {self.promote_knob}")
        if self.service not in SERVICES:
            raise InputError(f"tiresias: service must be one of {', '.join(SERVICES)}, got {self.service!r}")
        object.__setattr__(self, "queue_limits", limits)

    @property
    def num_queues(self) -> int:
        return len(self.queue_limits) + 1

    def initial_state(self) -> TiresiasState:
        return TiresiasState()

    def rank(self, inp: SchedulingInput, state: TiresiasState) -> tuple[Ranking, TiresiasState]:
        views = {v.id: v for v in inp.jobs}
        elapsed = 0.0 if state.last_now is None else max(0.0, inp.now - state.last_now)
        # 1. the known jobs still active; waits grow for waiting jobs that ran since their promotion
        known = {jid: self._waited(q, views[jid], elapsed) for jid, q in state.jobs.items() if jid in views}
        for q in known.values():
            if not 0 <= q.queue < self.num_queues:
                raise InputError(f"tiresias: state has a job in queue {q.queue}, outside 0..{self.num_queues - 1}")
        # 2. renumber each queue: last round's running jobs first, then the waiting ones
        seq = state.next_seq
        jobs: dict[str, QueuedJob] = {}
        for jid in sorted(known, key=lambda j: _entry_key(known[j], views[j])):
            jobs[jid] = known[jid]._replace(seq=seq)
            seq += 1
        # 3. arrivals at the tail of Q0, in arrival order
        for jid in views:
            if jid not in jobs:
                jobs[jid] = QueuedJob(0, seq, 0.0, 0.0)
                seq += 1
        # 4. demotion or promotion, in queue order; a job that moves goes to the tail of its new queue
        demotions, promotions = state.demotions, state.promotions
        for jid in sorted(jobs, key=lambda j: (jobs[j].queue, jobs[j].seq)):
            q, v = jobs[jid], views[jid]
            level = self._level(service_of(v, self.service) - q.service_base, q.queue)
            if level != q.queue:
                jobs[jid] = q._replace(queue=level, seq=seq)
                demotions += 1
            elif self._promote(q, v):
                jobs[jid] = QueuedJob(0, seq, service_of(v, self.service), v.executed_time)
                promotions += 1
            else:
                continue
            seq += 1
        # 5. the ranking: queue by queue, entry order within each
        order = tuple(sorted(jobs, key=lambda j: (jobs[j].queue, jobs[j].seq)))
        return Ranking(order), TiresiasState(jobs, seq, inp.now, promotions, demotions)

    def stable_rounds(self, inp: SchedulingInput, state: TiresiasState, ranking: Ranking, max_rounds: int) -> int:
        views = {v.id: v for v in inp.jobs}
        jobs = state.jobs
        if ranking.pairs or len(jobs) != len(views) or len(ranking.order) != len(views):
            return 0
        if any(jid not in jobs or jid not in views for jid in ranking.order):
            return 0
        # 1. the next round sorts by (queue, waiting, entry): the ranking must already be in that order
        #    (a job demoted or promoted this round sits at its queue's tail, even if it runs)
        keys = [_entry_key(jobs[jid], views[jid]) for jid in ranking.order]
        if any(a >= b for a, b in zip(keys, keys[1:], strict=False)):
            return 0
        # 2. rounds before a running job's service reaches its queue's limit
        ordered = [views[jid] for jid in ranking.order]
        queued = [jobs[jid] for jid in ranking.order]
        bound = self._demotion_bound(inp, ordered, queued, max_rounds)
        # 3. rounds before a waiting job's wait reaches its promotion threshold
        if self.promote_knob > 0 and bound > 0:
            elapsed = self._elapsed(inp, state, bound)
            for q, v in zip(queued, ordered, strict=True):
                ran = v.executed_time - q.executed_base
                if v.running or q.queue == 0 or ran <= 0:
                    continue
                pending, need = q.pending_s, self.promote_knob * ran
                for i in range(bound):
                    pending += elapsed[i]
                    if pending >= need:
                        bound = i
                        break
        return bound

    def skip_rounds(self, inp: SchedulingInput, state: TiresiasState, ranking: Ranking,
                    rounds: int) -> TiresiasState:
        """Each quiet round renumbers every job in ranking order and adds the round's length to the
        wait of every waiting job that has run since its last promotion."""
        if rounds <= 0:
            return state
        views = {v.id: v for v in inp.jobs}
        elapsed = self._elapsed(inp, state, rounds)
        base = state.next_seq + (rounds - 1) * len(ranking.order)
        jobs: dict[str, QueuedJob] = {}
        for pos, jid in enumerate(ranking.order):
            q = state.jobs[jid]
            for e in elapsed:
                q = self._waited(q, views[jid], e)
            jobs[jid] = q._replace(seq=base + pos)
        last = inp.now
        for _ in range(rounds):
            last += inp.round_s
        return TiresiasState(jobs, base + len(jobs), last, state.promotions, state.demotions)

    def _level(self, service: float, queue: int) -> int:
        """The queue a job's service since its last promotion puts it in (several limits at once)."""
        while queue < len(self.queue_limits) and service >= self.queue_limits[queue]:
            queue += 1
        return queue

    def _waited(self, q: QueuedJob, v: JobView, elapsed: float) -> QueuedJob:
        """``q`` after waiting ``elapsed`` more seconds (waits count only with promotion on)."""
        if self.promote_knob > 0 and not v.running and v.executed_time - q.executed_base > 0:
            return q._replace(pending_s=q.pending_s + elapsed)
        return q

    def _promote(self, q: QueuedJob, v: JobView) -> bool:
        if self.promote_knob <= 0 or q.queue == 0 or v.running:
            return False
        ran = v.executed_time - q.executed_base
        return ran > 0 and q.pending_s >= self.promote_knob * ran

    def _demotion_bound(self, inp: SchedulingInput, views: Sequence[JobView], queued: Sequence[QueuedJob],
                        bound: int) -> int:
        """Rounds before a running job's service reaches its queue's limit (at most ``bound``): each
        such job's service grows by one round's service at a time, as the shells add it."""
        at = [i for i, (v, q) in enumerate(zip(views, queued, strict=True))
              if v.running and q.queue < len(self.queue_limits)]
        if not at or bound <= 0:
            return bound
        service = np.array([service_of(views[i], self.service) for i in at])
        gpus = np.array([views[i].num_gpus for i in at], dtype=float)
        inc = gpus * inp.round_s if self.service == "gpu-time" else np.full(len(at), inp.round_s)
        base = np.array([queued[i].service_base for i in at])
        limit = np.array([self.queue_limits[queued[i].queue] for i in at])
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
