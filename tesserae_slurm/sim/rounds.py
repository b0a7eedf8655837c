"""One round's bookkeeping in the simulator shell: job views, exact progress, accounting, records.

Everything here runs once per simulated round for every active or placed job (tens of thousands of
rounds on the Philly set), so it memoizes what does not change between rounds: a job's speed alone
per (GPU type, strategy), and the progress of a job that neither restarts nor finishes (the same
``Outcome`` every round at the same speed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from itertools import compress, repeat
from operator import add

import numpy as np

from ..model import Job, JobView, Placement, RoundDecision, StageTimings
from .metrics import JobRecord
from .progress import Member, Outcome, run_alone, run_pair
from .restart import RestartCost
from .speeds import SpeedModel
from .traces.record import TraceJob


@dataclass
class _Live:
    """Mutable per-job bookkeeping of the simulator shell (never handed to the core)."""

    trace: TraceJob
    job: Job
    remaining: float  # seconds of isolated work left on the reference GPU
    done_work: float = 0.0
    attained: float = 0.0  # GPU-seconds held
    executed: float = 0.0  # wall seconds held
    rounds_run: int = 0
    start: float | None = None
    preemptions: int = 0
    migrations: int = 0
    rounds_packed: int = 0
    packed_s: float = 0.0
    contention_at_arrival: float = 0.0  # the run's cumulative contention and round count at arrival:
    rounds_at_arrival: int = 0  # a job's averages are differences, not per-round additions to every job
    finish: float | None = None
    solo_key: tuple[str, str | None] | None = None  # (GPU type, strategy) of ``solo_speed``
    solo_speed: float = 0.0


def job_of(t: TraceJob, parallelism: tuple[str, ...] = ()) -> Job:
    return Job(t.job_id, t.num_gpus, t.model, t.batch_size, user=t.user, parallelism=parallelism, no_pack=t.no_pack)


class SteadyOutcomes:
    """``run_alone``/``run_pair`` for members that do not restart and do not finish this round:
    ``(round x speed, no finish, packed seconds = round or 0)``, one shared ``Outcome`` per (speed,
    packed). The arithmetic is ``progress._segment``'s with overhead 0, so results are identical."""

    def __init__(self, round_s: float) -> None:
        self.round_s = round_s
        self._memo: dict[tuple[float, bool], Outcome] = {}

    def work(self, speed: float) -> float:
        return (self.round_s - 0.0) * speed if speed > 0 else 0.0

    def get(self, remaining: float, speed: float, packed: bool) -> Outcome | None:
        """The outcome, or None if the job would finish inside the round (then ask ``progress``)."""
        if speed > 0 and (self.round_s - 0.0) * speed >= remaining:
            return None
        o = self._memo.get((speed, packed))
        if o is None:
            o = self._memo[(speed, packed)] = Outcome(self.work(speed), None, self.round_s if packed else 0.0)
        return o


def _solo(s: _Live, speeds: SpeedModel, gpu_type: str, strategy: str | None) -> float:
    key = (gpu_type, strategy)
    if s.solo_key != key:
        s.solo_key, s.solo_speed = key, speeds.solo(s.job, gpu_type, strategy)
    return s.solo_speed


def _advance(decision: RoundDecision, live: dict[str, _Live], speeds: SpeedModel, restart: RestartCost,
             round_s: float, steady: SteadyOutcomes | None = None) -> tuple[dict[str, Outcome], int]:
    """Each placed job's exact progress this round, group by group (a job alone or a packed pair), and
    how many pairs make no progress because they do not fit in truth (a wrong decision profile)."""
    steady = steady if steady is not None else SteadyOutcomes(round_s)
    node_of = decision.placement.job_nodes()
    strategies, node_type = decision.strategies, speeds.node_type
    resumed = set(decision.migrated)
    resumed.update(j for j in decision.started if live[j].rounds_run > 0)
    outcomes: dict[str, Outcome] = {}

    def overhead(s: _Live) -> float:
        return min(round_s, speeds.overhead(s.job, restart))

    infeasible = 0
    for p in decision.packed:
        if p.placed not in node_of or p.partner not in node_of:
            continue
        g = node_type[node_of[p.placed]]
        la, lb = live[p.placed], live[p.partner]
        a, b = la.job, lb.job
        sa, sb = speeds.packed(a, b, g, strategies.get(a.id), strategies.get(b.id))
        infeasible += sa == 0.0 and sb == 0.0
        oa = ob = None
        if a.id not in resumed and b.id not in resumed:
            oa, ob = steady.get(la.remaining, sa, True), steady.get(lb.remaining, sb, True)
        if oa is None or ob is None:
            ma = Member(la.remaining, overhead(la) if a.id in resumed else 0.0,
                        _solo(la, speeds, g, strategies.get(a.id)), sa)
            mb = Member(lb.remaining, overhead(lb) if b.id in resumed else 0.0,
                        _solo(lb, speeds, g, strategies.get(b.id)), sb)
            oa, ob = run_pair(ma, mb, round_s)
        outcomes[a.id], outcomes[b.id] = oa, ob
    get = steady.get
    for jid, node in node_of.items():
        if jid in outcomes:
            continue
        s = live[jid]
        solo = _solo(s, speeds, node_type[node], strategies.get(jid))
        o = None if jid in resumed else get(s.remaining, solo, False)
        if o is None:
            o = run_alone(Member(s.remaining, overhead(s) if jid in resumed else 0.0, solo, solo), round_s)
        outcomes[jid] = o
    return outcomes, infeasible


_new = tuple.__new__  # JobView(...) without the named tuple's argument handling


def _view(s: _Live, running: bool) -> JobView:
    """What the policy sees of a job (the shell rebuilds it only when the job ran or its running flag
    changed; other jobs keep last round's view). Equal to ``JobView(s.job, t.submit_time,
    s.attained, s.executed, s.rounds_run, running, t.duration, s.remaining, t.priority)``; a test
    compares the two."""
    t = s.trace
    return _new(JobView, (s.job, t.submit_time, s.attained, s.executed, s.rounds_run, running, t.duration,
                          s.remaining, t.priority))


def _account(decision: RoundDecision, live: dict[str, _Live], outcomes: dict[str, Outcome], now: float,
             round_s: float, views: dict[str, JobView] | None = None) -> set[str]:
    """Each job's progress and counters after the round; returns the jobs that finished. ``views``:
    the policy's views, refreshed here for every job that ran and goes on (``_view(s, True)``, in
    the same pass)."""
    finished = set()
    for jid in decision.preempted:
        if jid in live:
            live[jid].preemptions += 1
    for jid in decision.migrated:
        live[jid].migrations += 1
    for jid, o in outcomes.items():
        s = live[jid]
        f = o.finish
        held = round_s if f is None else min(round_s, f)  # = min(round_s, o.held)
        s.remaining = s.remaining - o.work if f is None else 0.0
        s.done_work += o.work
        s.executed += held
        s.attained += held * s.job.num_gpus
        s.rounds_run += 1
        if o.packed_s > 0:
            s.packed_s += o.packed_s
            s.rounds_packed += 1
        if s.start is None:
            s.start = now
        if f is not None:
            s.finish = now + f
            finished.add(jid)
        elif views is not None:
            views[jid] = _view(s, True)
    return finished


def _record(s: _Live, now: float, cum_contention: float, cum_rounds: int) -> JobRecord:
    return JobRecord(
        job_id=s.job.id, num_gpus=s.job.num_gpus, model=s.job.model, submit_time=s.trace.submit_time,
        start_time=s.start if s.start is not None else now,
        finish_time=s.finish if s.finish is not None else now, duration=s.trace.duration,
        preemptions=s.preemptions, migrations=s.migrations, rounds_packed=s.rounds_packed,
        rounds_run=s.rounds_run,
        avg_contention=(cum_contention - s.contention_at_arrival) / max(1, cum_rounds - s.rounds_at_arrival),
        packed_s=s.packed_s, work_done=s.done_work,
    )


def _busy_gpu_seconds(decision: RoundDecision, outcomes: dict[str, Outcome], round_s: float,
                      finished: set[str]) -> float:
    """GPU-seconds during which a GPU held at least one unfinished job this round."""
    if not finished:  # every placed job held its GPUs all round
        return decision.placement.busy_gpus() * round_s
    held = {j: min(round_s, outcomes[j].held) for j in finished}  # the others: the whole round
    rows = decision.placement.rows()
    if rows is not None:  # per GPU row, the longest any of its jobs held it; summed in row order
        h = np.array([*map(held.get, rows.ids, repeat(round_s)), -1.0])  # job number -> held; -1 -> none
        t = rows.table
        per_gpu = np.maximum(h[t[:, 0]], h[t[:, 1]])
        return reduce(add, per_gpu[per_gpu >= 0].tolist(), 0.0)  # added one by one, as the loop below
    total = 0.0
    for gpus in decision.placement.nodes.values():  # summed GPU by GPU, in placement order
        for slot in gpus:
            if slot:
                total += round_s if finished.isdisjoint(slot) else max(held.get(j, round_s) for j in slot)
    return total


def _without(p: Placement, gone: set[str]) -> Placement:
    """``p`` less the ``gone`` jobs; only the nodes that held them are rebuilt (a table: renumbered)."""
    if not gone:
        return p
    rows = p.rows()
    if rows is not None:
        keep = np.fromiter(map(gone.__contains__, rows.ids), bool, len(rows.ids))
        np.logical_not(keep, out=keep)
        number = np.full(len(rows.ids) + 1, -1, dtype=np.int64)  # old number -> new; gone and -1: -1
        number[:-1][keep] = np.arange(int(keep.sum()))
        return Placement.from_rows(rows._replace(ids=tuple(compress(rows.ids, keep.tolist())),
                                                 table=number[rows.table]))
    gpus_of = p.job_gpus()
    touched = {node for j in gone for node, _ in gpus_of.get(j, ())}
    return Placement.built({n: tuple(slot - gone for slot in gpus) if n in touched else gpus
                            for n, gpus in p.nodes.items()},
                           {j: refs for j, refs in gpus_of.items() if j not in gone})


def _unchanged(d: RoundDecision, order: Sequence[str]) -> RoundDecision:
    """Last round's decision as this round's: the same placement, every placed job kept, no action."""
    placed = d.placement.jobs()
    return RoundDecision(
        placement=d.placement, started=(), preempted=(), migrated=(),
        kept=tuple(j for j in order if j in placed), packed=d.packed, pending=d.pending,
        strategies=d.strategies, speeds=d.speeds, migration_cost=0.0, timings=StageTimings())
