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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

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
        """One sort per round: every later step keeps (queue, entry) order by construction."""
        elapsed = 0.0 if state.last_now is None else max(0.0, inp.now - state.last_now)
        views = {v.id: v for v in inp.jobs}
        # 1. jobs known last round (finished ones drop out); waiting time since the last promotion
        #    grows for those that did not run; 2. in each queue, last round's running jobs first
        known = []
        for jid, q in state.jobs.items():
            v = views.get(jid)
            if v is None:
                continue  # finished or cancelled
            if not v.running and v.executed_time - q.executed_base > 0:
                q = q._replace(pending_s=q.pending_s + elapsed)
            known.append((q.queue, not v.running, q.seq, jid, q))
        known.sort(key=lambda k: k[:3])  # seq is unique: no further ties
        seq = state.next_seq
        current: list[tuple[str, QueuedJob]] = []
        in_q0 = 0
        for queue, _, _, jid, q in known:
            current.append((jid, q._replace(seq=seq)))
            seq += 1
            in_q0 += queue == 0
        # 3. arrivals at the tail of Q0, in arrival order
        arrivals = []
        for v in inp.jobs:
            if v.id not in state.jobs:
                arrivals.append((v.id, QueuedJob(0, seq, 0.0, 0.0)))
                seq += 1
        # 4. demotion / promotion in current queue order; a moved job goes to the tail of its new
        #    queue, so each queue ends up as its staying jobs, then the ones moved in
        stay: list[list[str]] = [[] for _ in range(self.num_queues)]
        moved: list[list[str]] = [[] for _ in range(self.num_queues)]
        jobs: dict[str, QueuedJob] = {}
        demotions, promotions = state.demotions, state.promotions
        for jid, q in (*current[:in_q0], *arrivals, *current[in_q0:]):
            v = views[jid]
            level = self._level(service_of(v, self.service) - q.service_base, q.queue)
            if level != q.queue:
                q = q._replace(queue=level, seq=seq)
                seq += 1
                demotions += 1
                moved[level].append(jid)
            elif self._promote(q, v):
                q = QueuedJob(0, seq, service_of(v, self.service), v.executed_time)
                seq += 1
                promotions += 1
                moved[0].append(jid)
            else:
                stay[q.queue].append(jid)
            jobs[jid] = q
        order = tuple(j for level in range(self.num_queues) for j in (*stay[level], *moved[level]))
        new_state = TiresiasState(MappingProxyType(jobs), seq, inp.now, promotions, demotions)
        return Ranking(order), new_state

    def _level(self, service: float, queue: int) -> int:
        while queue < len(self.queue_limits) and service >= self.queue_limits[queue]:
            queue += 1
        return queue

    def _promote(self, q: QueuedJob, v: JobView) -> bool:
        if self.promote_knob <= 0 or q.queue == 0 or v.running:
            return False
        ran = v.executed_time - q.executed_base
        return ran > 0 and q.pending_s >= self.promote_knob * ran
