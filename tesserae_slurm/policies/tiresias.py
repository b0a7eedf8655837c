"""Tiresias discretized 2D-LAS (SymbioticLab/Tiresias ``dlas-gpu``; policies.md §4), round by round.

K queues Q0 (highest) .. Q(K-1). A job enters the tail of Q0; once its attained service since its
last promotion reaches ``queue_limits[q]`` it moves down (to the tail of the next queue; several
levels at once if one round crossed several limits); the last queue never demotes. Within a queue
the order is entry order, except that jobs that ran last round are moved ahead of those that waited
(each group keeping its order), so running jobs keep their place and jobs do not swap back and
forth. Starvation guard (``promote_knob`` P > 0): a waiting job below Q0 that has run since its last
promotion goes back to the tail of Q0, with its service and counters reset, once it has waited
``P x`` the wall time it ran since that promotion. P = 0 (the default, as in the reference code)
turns promotion off.

Service is GPU-seconds (``service="gpu-time"``, the default, Tiresias' 2D attained service) or wall
seconds (``"time"``, Tiresias' ``dlas``). Thresholds are checked at round boundaries.

Quiet rounds (``stable_rounds``/``skip_rounds``, for the simulator's fast-forward): while the jobs and
the running set stay, the order only changes when a running job's service crosses its queue's limit
or a waiting job's wait reaches the promotion threshold; both are replayed float for float.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from ..model import InputError, JobView
from .base import Ranking, SchedulingInput
from .las import SERVICES, service_of

DEFAULT_QUEUE_LIMITS = (3250.0, 7200.0)  # Tiresias jobs.py: 3 queues, Q0->Q1 at 3250, Q1->Q2 at 7200


class QueuedJob(NamedTuple):
    """One job's place in the queues; counters are relative to its last promotion (or arrival).

    A named tuple: every round renumbers every active job (thousands on big traces), and
    ``_replace`` on a tuple is several times cheaper than ``dataclasses.replace``.
    """

    queue: int
    seq: int  # entry order within its queue (lower = earlier)
    service_base: float  # the job's attained service at its last promotion (policy units)
    executed_base: float  # wall seconds run at its last promotion
    pending_s: float = 0.0  # wall seconds waited since the last promotion, counted once it has run since


@dataclass(frozen=True)
class TiresiasState:
    jobs: Mapping[str, QueuedJob] = field(default_factory=lambda: MappingProxyType({}))
    next_seq: int = 0
    last_now: float | None = None
    promotions: int = 0  # total so far (reported by shells)
    demotions: int = 0


@dataclass(frozen=True)
class TiresiasPolicy:
    queue_limits: Sequence[float] = DEFAULT_QUEUE_LIMITS
    promote_knob: float = 0.0
    service: str = "gpu-time"
    name: str = "tiresias"

    def __post_init__(self) -> None:
        limits = tuple(float(x) for x in self.queue_limits)
        if any(x <= 0 for x in limits) or any(b <= a for a, b in zip(limits, limits[1:])):
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
        """One sort per round: every later step keeps (queue, entry) order by construction.

        Runs every round for every active job (thousands of rounds x hundreds of jobs on the Philly
        set), hence the plain tuples and inlined thresholds."""
        elapsed = 0.0 if state.last_now is None else max(0.0, inp.now - state.last_now)
        views = {v.job.id: v for v in inp.jobs}
        gpu_time = self.service == "gpu-time"
        # 1. jobs known last round (finished ones drop out); waiting time since the last promotion
        #    grows for those that did not run; 2. in each queue, last round's running jobs first
        known = []
        for jid, q in state.jobs.items():
            v = views.get(jid)
            if v is None:
                continue  # finished or cancelled
            waiting = not v.running
            pending = q[4] + elapsed if waiting and v.executed_time - q[3] > 0 else q[4]
            known.append((q[0], waiting, q[1], jid, q, pending))
        known.sort()  # (queue, waiting, seq): seq is unique, so nothing after it is ever compared
        seq = state.next_seq
        new = tuple.__new__  # QueuedJob(...) without the keyword handling: one per job per round
        current: list[tuple[str, QueuedJob]] = []
        in_q0 = 0
        for queue, _, _, jid, q, pending in known:
            current.append((jid, new(QueuedJob, (queue, seq, q[2], q[3], pending))))
            seq += 1
            in_q0 += queue == 0
        # 3. arrivals at the tail of Q0, in arrival order
        arrivals = []
        if len(known) < len(views):  # every view is a known job otherwise: skip the pass
            for jid in views:
                if jid not in state.jobs:
                    arrivals.append((jid, QueuedJob(0, seq, 0.0, 0.0)))
                    seq += 1
        # 4. demotion / promotion in current queue order; a moved job goes to the tail of its new
        #    queue, so each queue ends up as its staying jobs, then the ones moved in
        stay: list[list[str]] = [[] for _ in range(self.num_queues)]
        moved: list[list[str]] = [[] for _ in range(self.num_queues)]
        jobs: dict[str, QueuedJob] = {}
        demotions, promotions = state.demotions, state.promotions
        limits, promote = self.queue_limits, self.promote_knob > 0
        last_queue = len(limits)
        for jid, q in (*current[:in_q0], *arrivals, *current[in_q0:]):
            v = views[jid]
            level = queue = q[0]
            if queue < last_queue:  # _level, inlined
                service = (v.attained_service if gpu_time else v.executed_time) - q[2]
                while level < last_queue and service >= limits[level]:
                    level += 1
            if level != queue:
                q = new(QueuedJob, (level, seq, q[2], q[3], q[4]))
                seq += 1
                demotions += 1
                moved[level].append(jid)
            elif promote and self._promote(q, v):
                q = QueuedJob(0, seq, service_of(v, self.service), v.executed_time)
                seq += 1
                promotions += 1
                moved[0].append(jid)
            else:
                stay[queue].append(jid)
            jobs[jid] = q
        order = tuple(j for level in range(self.num_queues) for j in (*stay[level], *moved[level]))
        new_state = TiresiasState(MappingProxyType(jobs), seq, inp.now, promotions, demotions)
        return Ranking(order), new_state

    def stable_rounds(self, inp: SchedulingInput, state: TiresiasState, ranking: Ranking, max_rounds: int) -> int:
        views = {v.job.id: v for v in inp.jobs}
        jobs = state.jobs
        if ranking.pairs or len(jobs) != len(views) or len(ranking.order) != len(views):
            return 0
        # the next round sorts by (queue, waiting, entry): the ranking must already be in that order
        # (a job demoted or promoted this round sits at its queue's tail, even if it runs)
        prev: tuple[int, bool, int] | None = None
        for jid in ranking.order:
            q, v = jobs.get(jid), views.get(jid)
            if q is None or v is None:
                return 0
            key = (q.queue, not v.running, q.seq)
            if prev is not None and not prev < key:
                return 0
            prev = key
        bound = max_rounds
        last_queue = len(self.queue_limits)
        for jid in ranking.order:  # demotions: a running job's service reaches its queue's limit
            v, q = views[jid], jobs[jid]
            if not v.running or q.queue >= last_queue:
                continue
            inc = inp.round_s * v.num_gpus if self.service == "gpu-time" else inp.round_s
            service, limit = service_of(v, self.service), self.queue_limits[q.queue]
            for i in range(bound):
                service += inc  # as the shell adds it: one round at a time
                if service - q.service_base >= limit:
                    bound = i
                    break
        # promotions: a waiting job below Q0 that ran since its last promotion is promoted once its
        # wait (growing by each round's length) reaches P x that run
        waiting = [(jobs[j], views[j].executed_time - jobs[j].executed_base) for j in ranking.order
                   if self.promote_knob > 0 and not views[j].running and jobs[j].queue > 0]
        waiting = [(q, ran) for q, ran in waiting if ran > 0]
        if waiting and bound > 0:
            elapsed = self._elapsed(inp, state, bound)
            for q, ran in waiting:
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
        wait of every waiting job that has run since its last promotion (float for float)."""
        if rounds <= 0:
            return state
        views = {v.id: v for v in inp.jobs}
        elapsed = self._elapsed(inp, state, rounds)
        waits = [jid for jid in ranking.order
                 if not views[jid].running and views[jid].executed_time - state.jobs[jid].executed_base > 0]
        pending = np.array([state.jobs[jid].pending_s for jid in waits], dtype=float)
        for e in elapsed:
            pending += e
        grown = dict(zip(waits, pending.tolist()))
        n = len(ranking.order)
        base = state.next_seq + (rounds - 1) * n
        jobs: dict[str, QueuedJob] = {}
        for pos, jid in enumerate(ranking.order):
            q = state.jobs[jid]
            jobs[jid] = QueuedJob(q.queue, base + pos, q.service_base, q.executed_base, grown.get(jid, q.pending_s))
        last = inp.now
        for _ in range(rounds):
            last += inp.round_s
        return TiresiasState(MappingProxyType(jobs), base + n, last, state.promotions, state.demotions)

    @staticmethod
    def _elapsed(inp: SchedulingInput, state: TiresiasState, rounds: int) -> list[float]:
        """What ``rank`` adds to a waiting job's wait in each of the next ``rounds`` rounds."""
        out, t, last = [], inp.now, state.last_now
        for _ in range(rounds):
            t += inp.round_s
            out.append(0.0 if last is None else max(0.0, t - last))
            last = t
        return out

    def _promote(self, q: QueuedJob, v: JobView) -> bool:
        if self.promote_knob <= 0 or q.queue == 0 or v.running:
            return False
        ran = v.executed_time - q.executed_base
        return ran > 0 and q.pending_s >= self.promote_knob * ran
