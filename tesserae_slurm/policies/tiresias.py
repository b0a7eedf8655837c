"""Tiresias discretized 2D-LAS (SymbioticLab/Tiresias ``dlas-gpu``; policies.md §4), round by round.

K queues Q0 (highest) .. Q(K-1). A job enters the tail of Q0; once its attained service since its
last promotion reaches ``queue_limits[q]`` it moves down (to the tail of the next queue; several
levels at once if one round crossed several limits); the last queue never demotes. Within a queue
the order is entry order, except that jobs that ran last round are moved ahead of those that waited
(each group keeping its order), so running jobs keep their place and jobs do not swap back and
forth. Starvation guard (``promote_knob`` P > 0): a waiting job below Q0 that has run since its last
promotion goes back to the tail of Q0, with its service and counters reset, once it has waited
``P x`` the wall time it ran since that promotion. P = 0 (the default, as in the reference code)
turns promotion off; then waits are not counted either (``pending_s`` stays 0: it only feeds
promotion, and counting it was a Python step per waiting job every round).

Service is GPU-seconds (``service="gpu-time"``, the default, Tiresias' 2D attained service) or wall
seconds (``"time"``, Tiresias' ``dlas``). Thresholds are checked at round boundaries.

Quiet rounds (``stable_rounds``/``skip_rounds``, for the simulator's fast-forward): while the jobs and
the running set stay, the order only changes when a running job's service crosses its queue's limit
or a waiting job's wait reaches the promotion threshold; both are replayed float for float.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, repeat
from operator import attrgetter, is_not, itemgetter, le, not_
from types import MappingProxyType
from typing import Any, NamedTuple

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
    # (and only with promotion on)


@dataclass(frozen=True)
class TiresiasState:
    jobs: Mapping[str, QueuedJob] = field(default_factory=lambda: MappingProxyType({}))
    next_seq: int = 0
    last_now: float | None = None
    promotions: int = 0  # total so far (reported by shells)
    demotions: int = 0


_ATTAINED = attrgetter("attained_service")
_EXECUTED = attrgetter("executed_time")
_RUNNING = attrgetter("running")
_VIEW_ID = attrgetter("job.id")
_QUEUE, _SEQ, _SB, _EB, _PEND = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3), itemgetter(4)
_new = tuple.__new__  # QueuedJob(...) without the keyword handling


class _Queues(Mapping[str, QueuedJob]):
    """``TiresiasState.jobs`` as ``rank`` leaves it: columns in ranking order (queue q at
    ``ids[bounds[q]:bounds[q+1]]``, entry order within each), read by the next ``rank`` as they are.
    The QueuedJob per job (new every round: its seq changes) is only built when someone reads the
    mapping. ``views`` are the JobViews each job's limit was last checked against with ``checked`` =
    (queue_limits, service): the same object again cannot cross it (its queue and base did not change)."""

    __slots__ = ("ids", "bounds", "seqs", "sbs", "ebs", "pends", "views", "checked", "_dict")

    def __init__(self, ids: tuple[str, ...], bounds: tuple[int, ...], seqs: list[int], sbs: list[float],
                 ebs: list[float], pends: list[float], views: list[Any] | None = None, checked: Any = None,
                 built: dict[str, QueuedJob] | None = None) -> None:
        self.ids, self.bounds, self.seqs, self.sbs, self.ebs, self.pends = ids, bounds, seqs, sbs, ebs, pends
        self.views, self.checked, self._dict = views, checked, built

    def _jobs(self) -> dict[str, QueuedJob]:
        if self._dict is None:
            b = self.bounds
            queues = chain.from_iterable(repeat(q, b[q + 1] - b[q]) for q in range(len(b) - 1))
            self._dict = dict(zip(self.ids, map(_new, repeat(QueuedJob),
                                                zip(queues, self.seqs, self.sbs, self.ebs, self.pends))))
        return self._dict

    def __getitem__(self, jid: str) -> QueuedJob:
        return self._jobs()[jid]

    def __contains__(self, jid: object) -> bool:
        return jid in self._jobs()

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return repr(self._jobs())

    def __reduce__(self) -> tuple[Any, ...]:  # the daemon pickles its state; the views need not go along
        return _Queues, (self.ids, self.bounds, self.seqs, self.sbs, self.ebs, self.pends)


def _plain(jobs: Mapping[str, QueuedJob]) -> Mapping[str, QueuedJob]:
    """The built dict behind ``_Queues`` (read many times per job by the quiet-round hooks)."""
    return jobs._jobs() if type(jobs) is _Queues else jobs


def _entry_order(jobs: Mapping[str, QueuedJob], num_queues: int) -> _Queues:
    """Columns for a state that ``rank`` did not make (built by hand, or replaced): sorted by (queue, seq, id)."""
    ids = sorted(jobs, key=lambda j: (jobs[j][0], jobs[j][1], j))
    qs = list(map(jobs.__getitem__, ids))
    queues = list(map(_QUEUE, qs))
    if queues and not 0 <= queues[0] <= queues[-1] < num_queues:
        raise InputError(f"tiresias: state has a job in queue {queues[0] if queues[0] < 0 else queues[-1]}, "
                         f"outside 0..{num_queues - 1}")
    bounds = tuple(bisect_left(queues, level) for level in range(num_queues + 1))
    return _Queues(tuple(ids), bounds, list(map(_SEQ, qs)), list(map(_SB, qs)), list(map(_EB, qs)),
                   list(map(_PEND, qs)))


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
        """Runs every round for every active job (thousands of rounds x hundreds of jobs on Philly).
        Last round left each queue in entry order, so this round's (queue, waiting, entry) order is a
        stable split of each queue into running and waiting jobs: no sort, and the columns move by
        C-level passes. A Python step per job only for the waits that grow, the jobs whose view
        changed (the running ones, in the simulator: only their service can cross a limit) and the
        jobs that move."""
        sj, views = state.jobs, inp.jobs
        vmap = {v.job.id: v for v in views}  # every active job, every round (faster than attrgetter maps)
        elapsed = 0.0 if state.last_now is None else max(0.0, inp.now - state.last_now)
        limits, last = self.queue_limits, len(self.queue_limits)
        promote = self.promote_knob > 0
        svc = _ATTAINED if self.service == "gpu-time" else _EXECUTED
        checked = (limits, self.service)
        cols = sj if type(sj) is _Queues and len(sj.bounds) == last + 2 else _entry_order(sj, last + 1)
        ids, bounds = cols.ids, cols.bounds
        vs = list(map(vmap.get, ids))
        gone = not all(vs)  # a finished job's None (``None in`` would call JobView.__eq__ on each)
        prev = cols.views if cols.checked == checked else None
        seq = state.next_seq
        # 1. each queue: last round's running jobs first, then the waiting ones (entry order kept),
        #    renumbered in that order; waits grow for waiting jobs that have run since their promotion
        blocks: list[list[Any]] = []  # [queue, ids, views, seqs, sbs, ebs, pends, positions that may move]
        for level in range(last + 1):
            a, b = bounds[level], bounds[level + 1]
            block = [ids[a:b], vs[a:b], cols.sbs[a:b], cols.ebs[a:b], cols.pends[a:b],
                     prev[a:b] if prev is not None else None]
            if gone and not all(block[1]):
                keep = list(map(is_not, block[1], repeat(None)))
                block = [None if c is None else list(compress(c, keep)) for c in block]
            bvs = block[1]
            run = list(map(_RUNNING, bvs))
            n_run = sum(run)
            if 0 < n_run < len(run):
                wait = list(map(not_, run))
                block = [None if c is None else [*compress(c, run), *compress(c, wait)] for c in block]
            bids, bvs, bsb, beb, bpd, bprev = block
            if promote and n_run < len(run):  # run is False for all of bpd[n_run:]
                bpd[n_run:] = [p + elapsed if v.executed_time - eb > 0 else p
                               for p, v, eb in zip(bpd[n_run:], bvs[n_run:], beb[n_run:])]
            n = len(bids)
            seqs = list(range(seq, seq + n))
            seq += n
            # may move: a job whose service reaches its queue's limit (only a changed view can), and
            # with promotion on, every waiting job below Q0
            moves: list[int] = []
            if level < last:
                lim = limits[level]
                maybe = range(n) if bprev is None else compress(count(), map(is_not, bvs, bprev))
                moves = [i for i in maybe if svc(bvs[i]) - bsb[i] >= lim]
            if promote and level > 0 and n_run < n:
                moves = sorted({*moves, *range(n_run, n)})
            blocks.append([level, bids, bvs, seqs, bsb, beb, bpd, moves])
        # 2. arrivals at the tail of Q0, in arrival order (in this round's order right after Q0)
        n_known = seq - state.next_seq
        if n_known < len(vmap):
            known = set(ids)
            arr = [j for j in vmap if j not in known]
            k = len(arr)
            avs = list(map(vmap.__getitem__, arr))
            moves = [i for i, v in enumerate(avs) if svc(v) >= limits[0]] if last > 0 else []
            blocks.insert(1, [0, arr, avs, list(range(seq, seq + k)), [0.0] * k, [0.0] * k, [0.0] * k, moves])
            seq += k
        # 3. demotion / promotion in this order (queue by queue, arrivals after Q0); a moved job goes to
        #    the tail of its new queue, so each queue ends up as its staying jobs, then the ones moved in
        moved: list[list[tuple[Any, ...]]] = [[] for _ in range(last + 1)]
        demotions, promotions = state.demotions, state.promotions
        for block in blocks:
            queue, bids, bvs, bseq, bsb, beb, bpd, moves = block
            gone_at = []
            for i in moves:
                v = bvs[i]
                level = queue
                if queue < last:
                    service = svc(v) - bsb[i]
                    while level < last and service >= limits[level]:
                        level += 1
                if level != queue:
                    moved[level].append((bids[i], v, seq, bsb[i], beb[i], bpd[i]))
                    demotions += 1
                elif promote and self._promote(QueuedJob(queue, bseq[i], bsb[i], beb[i], bpd[i]), v):
                    moved[0].append((bids[i], v, seq, service_of(v, self.service), v.executed_time, 0.0))
                    promotions += 1
                else:
                    continue
                seq += 1
                gone_at.append(i)
            if gone_at:
                block[1] = list(bids)  # a slice of last round's ids (a tuple)
                for col in block[1:7]:
                    for i in reversed(gone_at):
                        del col[i]
        if len(blocks) > last + 1:  # arrivals join Q0
            arrivals = blocks.pop(1)
            blocks[0][1] = [*blocks[0][1], *arrivals[1]]
            for c in range(2, 7):
                blocks[0][c] += arrivals[c]
        out: list[list[Any]] = [[] for _ in range(6)]  # ids, views, seqs, sbs, ebs, pends
        new_bounds = [0]
        for block, extra in zip(blocks, moved):
            for col, part in zip(out, block[1:7]):
                col += part
            if extra:
                for col, part in zip(out, zip(*extra)):
                    col += part
            new_bounds.append(len(out[0]))
        order = tuple(out[0])
        jobs = _Queues(order, tuple(new_bounds), out[2], out[3], out[4], out[5], out[1], checked)
        return Ranking(order), TiresiasState(jobs, seq, inp.now, promotions, demotions)

    def stable_rounds(self, inp: SchedulingInput, state: TiresiasState, ranking: Ranking, max_rounds: int) -> int:
        views = dict(zip(map(_VIEW_ID, inp.jobs), inp.jobs))
        if ranking.pairs or len(state.jobs) != len(views) or len(ranking.order) != len(views):
            return 0
        last_queue = len(self.queue_limits)
        cols = state.jobs
        if type(cols) is _Queues and cols.ids == ranking.order and len(cols.bounds) == last_queue + 2:
            # the columns ``rank`` left, in ranking order: the checks below as array passes
            vs = list(map(views.get, ranking.order))
            if None in vs:
                return 0
            queue = np.repeat(np.arange(last_queue + 1), np.diff(cols.bounds))
            waiting = ~np.fromiter(map(_RUNNING, vs), bool, len(vs))
            seq = np.array(cols.seqs, dtype=np.int64)
            q0, q1, w0, w1, s0, s1 = queue[:-1], queue[1:], waiting[:-1], waiting[1:], seq[:-1], seq[1:]
            if not ((q0 < q1) | ((q0 == q1) & ((w0 < w1) | ((w0 == w1) & (s0 < s1))))).all():
                return 0
            bound = self._demotion_bound(inp, vs, queue, np.array(cols.sbs), ~waiting, max_rounds)
            jobs = _plain(cols) if self.promote_knob > 0 else {}
        else:
            jobs = _plain(state.jobs)
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
            order_views = [views[j] for j in ranking.order]
            qs = [jobs[j] for j in ranking.order]
            bound = self._demotion_bound(inp, order_views, np.array([q.queue for q in qs], dtype=np.int64),
                                         np.array([q.service_base for q in qs], dtype=float),
                                         np.array([v.running for v in order_views], dtype=bool), max_rounds)
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
        views = dict(zip(map(_VIEW_ID, inp.jobs), inp.jobs))
        known = _plain(state.jobs)
        elapsed = self._elapsed(inp, state, rounds)
        waits = [jid for jid in ranking.order
                 if not views[jid].running and views[jid].executed_time - known[jid].executed_base > 0
                 ] if self.promote_knob > 0 else []  # waits only count with promotion on
        pending = np.array([known[jid].pending_s for jid in waits], dtype=float)
        for e in elapsed:
            pending += e
        grown = dict(zip(waits, pending.tolist()))
        n = len(ranking.order)
        base = state.next_seq + (rounds - 1) * n
        jobs: dict[str, QueuedJob] = {}
        for pos, jid in enumerate(ranking.order):
            q = known[jid]
            jobs[jid] = QueuedJob(q.queue, base + pos, q.service_base, q.executed_base, grown.get(jid, q.pending_s))
        last = inp.now
        for _ in range(rounds):
            last += inp.round_s
        queues = list(map(_QUEUE, jobs.values()))  # renumbered in ranking order: columns if queue-sorted
        if len(jobs) == n and all(map(le, queues, queues[1:])) and \
                (not queues or 0 <= queues[0] <= queues[-1] <= len(self.queue_limits)):
            qs = list(jobs.values())
            bounds = tuple(bisect_left(queues, level) for level in range(len(self.queue_limits) + 2))
            cols = _Queues(tuple(jobs), bounds, list(map(_SEQ, qs)), list(map(_SB, qs)), list(map(_EB, qs)),
                           list(map(_PEND, qs)), built=jobs)
            return TiresiasState(cols, base + n, last, state.promotions, state.demotions)
        return TiresiasState(MappingProxyType(jobs), base + n, last, state.promotions, state.demotions)

    def _demotion_bound(self, inp: SchedulingInput, views: Sequence[JobView], queue: np.ndarray,
                        service_base: np.ndarray, running: np.ndarray, bound: int) -> int:
        """Rounds before a running job's service reaches its queue's limit (at most ``bound``): each
        such job's service grows by one round's service at a time, as the shell adds it, all jobs
        in one array step per round (the same float additions per job)."""
        at = np.flatnonzero(running & (queue < len(self.queue_limits)))
        if not len(at) or bound <= 0:
            return bound
        sel = [views[i] for i in at.tolist()]
        service = np.array([service_of(v, self.service) for v in sel], dtype=float)
        inc = (np.array([v.num_gpus for v in sel], dtype=float) * inp.round_s if self.service == "gpu-time"
               else np.full(len(sel), inp.round_s))
        base, limit = service_base[at], np.array(self.queue_limits)[queue[at]]
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

    def _promote(self, q: QueuedJob, v: JobView) -> bool:
        if self.promote_knob <= 0 or q.queue == 0 or v.running:
            return False
        ran = v.executed_time - q.executed_base
        return ran > 0 and q.pending_s >= self.promote_knob * ran
