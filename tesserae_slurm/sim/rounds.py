"""One round's bookkeeping in the simulator shell: job views, exact progress, accounting, records.

Everything here runs once per simulated round for every active or placed job (tens of thousands of
rounds on the Philly set), so it memoizes what does not change between rounds: a job's speed alone
per (GPU type, strategy), and the progress of a job that neither restarts nor finishes (the same
``Outcome`` every round at the same speed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import not_
from typing import NamedTuple

import numpy as np

from ..model import Job, JobView, Placement, RoundDecision, StageTimings
from ..profiles.speeds import SpeedModel
from .jobstate import JobColumns, LiveJob
from .metrics import JobRecord
from .progress import Member, Outcome, run_pair
from .restart import RestartCost
from .traces.record import TraceJob


def job_of(t: TraceJob, parallelism: tuple[str, ...] = (), group_by_user: bool = False) -> Job:
    """The engine's job; ``group_by_user``: packed only with the same user's jobs (the daemon's
    ``mps.cross_user: never``)."""
    return Job(t.job_id, t.num_gpus, t.model, t.batch_size, user=t.user, parallelism=parallelism, no_pack=t.no_pack,
               account=t.account, time_limit=t.time_limit, group=t.user if group_by_user else "")


class SteadyOutcomes:
    """``run_alone``/``run_pair`` for members that do not restart and do not finish this round:
    ``(round x speed, no finish, packed seconds = round or 0)``, one shared ``Outcome`` per (speed,
    packed)."""

    def __init__(self, round_s: float) -> None:
        self.round_s = round_s
        self._memo: dict[tuple[float, bool], Outcome] = {}

    def work(self, speed: float) -> float:
        return self.round_s * speed if speed > 0 else 0.0

    def get(self, remaining: float, speed: float, packed: bool) -> Outcome | None:
        """The outcome, or None if the job would finish inside the round (then ask ``progress``)."""
        if speed > 0 and self.round_s * speed >= remaining:
            return None
        o = self._memo.get((speed, packed))
        if o is None:
            o = self._memo[(speed, packed)] = Outcome(self.work(speed), None, self.round_s if packed else 0.0)
        return o


def _solo(s: LiveJob, speeds: SpeedModel, gpu_type: str, strategy: str | None) -> float:
    key = (gpu_type, strategy)
    if s.solo_key != key:
        s.solo_key, s.solo_speed = key, speeds.solo(s.job, gpu_type, strategy)
    speed: float = s.solo_speed
    return speed


def _run_pairs(decision: RoundDecision, live: dict[str, LiveJob], speeds: SpeedModel, round_s: float,
               steady: SteadyOutcomes, late: set[str], overhead: Callable[[LiveJob], float],
               outcomes: dict[str, Outcome]) -> int:
    """Each packed pair's outcomes (a pair counts only when both members are placed) into
    ``outcomes``; returns how many pairs do not fit in truth (both speeds 0)."""
    node_of, strategies, node_type = decision.placement.job_nodes(), decision.strategies, speeds.node_type
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
        if a.id not in late and b.id not in late:
            oa, ob = steady.get(la.remaining, sa, True), steady.get(lb.remaining, sb, True)
        if oa is None or ob is None:
            ma = Member(la.remaining, overhead(la) if a.id in late else 0.0,
                        _solo(la, speeds, g, strategies.get(a.id)), sa)
            mb = Member(lb.remaining, overhead(lb) if b.id in late else 0.0,
                        _solo(lb, speeds, g, strategies.get(b.id)), sb)
            oa, ob = run_pair(ma, mb, round_s)
        outcomes[a.id], outcomes[b.id] = oa, ob
    return infeasible


_new = tuple.__new__  # JobView(...) without the named tuple's argument handling


def view_of(s: LiveJob, running: bool) -> JobView:
    """What the policy sees of a job (the shell rebuilds it only when the job ran or its running flag
    changed; other jobs keep last round's view). Equal to ``JobView(s.job, t.submit_time,
    s.attained, s.executed, s.rounds_run, running, t.duration, s.remaining, t.priority, t.priority)``
    (the trace's priority is both Gavel's weight and the site's order); a test compares the two."""
    t = s.trace
    return _new(JobView, (s.job, t.submit_time, s.attained, s.executed, s.rounds_run, running, t.duration,
                          s.remaining, t.priority, t.priority, 0, None))


def running_views(cols: JobColumns, ids: Sequence[str], idx: np.ndarray) -> Iterator[tuple[str, JobView]]:
    """(id, ``view_of(s, True)``) of the jobs at slots ``idx``, built from the columns."""
    return zip(ids, map(tuple.__new__, repeat(JobView), zip(
        cols.job[idx].tolist(), cols.submit_time[idx].tolist(), cols.attained[idx].tolist(),
        cols.executed[idx].tolist(), cols.rounds_run[idx].tolist(), repeat(True), cols.duration[idx].tolist(),
        cols.remaining[idx].tolist(), cols.priority[idx].tolist(), cols.priority[idx].tolist(), repeat(0),
        repeat(None))))


class RoundResult(NamedTuple):
    """What the shell needs of a round after ``run_round``."""

    finished: set[str]
    outcomes: dict[str, Outcome]  # of the finished jobs (their finish offsets and held seconds)
    infeasible: int  # pairs that do not fit in truth
    progressed: bool  # some placed job did work


def solo_speeds(decision: RoundDecision, ids: Sequence[str], idx: np.ndarray, live: dict[str, LiveJob],
                cols: JobColumns, speeds: SpeedModel) -> np.ndarray:
    """``_solo`` of the placed jobs ``ids`` (at slots ``idx``, in ``job_nodes`` order): each job's
    memo refreshed where its (GPU type, strategy) changed."""
    node_type, strategies = speeds.node_type, decision.strategies
    keys = list(zip(map(node_type.__getitem__, decision.placement.job_nodes().values()),
                    map(strategies.get, ids) if strategies else repeat(None, len(ids))))
    known = cols.solo_key[idx].tolist()
    if known != keys:
        for jid, key, was in zip(ids, keys, known):
            if was != key:
                _solo(live[jid], speeds, *key)
    speeds_now: np.ndarray = cols.solo_speed[idx]
    return speeds_now


def run_round(decision: RoundDecision, live: dict[str, LiveJob], cols: JobColumns, speeds: SpeedModel,
              restart: RestartCost, round_s: float, now: float, views: dict[str, JobView],
              steady: SteadyOutcomes | None = None, delays: Mapping[str, float] | None = None) -> RoundResult:
    """Every placed job's progress this round and its counters after it, over the job columns
    ``cols`` that every ``live`` job's slot is in: the jobs alone (all but a few) in array passes
    (``progress.run_alone``'s arithmetic, restarting or not), packed pairs one by one
    (``run_pair``); then the views of the jobs that go on. tests/oracles/sim_step.py is the same
    round one job at a time. ``delays``: seconds a job beginning a run waits before its restart (a real
    run's launch and stops, ``overheads.py``; negative for a job that started between rounds): a job's
    service and run time count from its start, as the daemon counts Slurm's run time, not from the round's."""
    delays = delays or {}
    steady = steady if steady is not None else SteadyOutcomes(round_s)
    node_of = decision.placement.job_nodes()
    ids = list(node_of)
    n = len(ids)
    idx = np.fromiter(map(cols.slot_of.__getitem__, ids), np.int64, n)
    resumed = set(decision.migrated)
    resumed.update(j for j in decision.started if live[j].rounds_run > 0)
    single: dict[str, Outcome] = {}  # outcomes computed one by one

    def overhead(s: LiveJob) -> float:
        lost = delays.get(s.job.id, 0.0) + (restart.of(s.job.model) if s.job.id in resumed else 0.0)
        return min(round_s, lost)

    late = resumed.union(delays) if delays else resumed
    infeasible = _run_pairs(decision, live, speeds, round_s, steady, late, overhead, single)
    solo, rem = solo_speeds(decision, ids, idx, live, cols, speeds), cols.remaining[idx]
    # jobs alone: ``run_alone`` (``progress._segment``) over all of them, the restart overhead 0.0 for
    # those that keep running (then the work is ``SteadyOutcomes.work``'s)
    start = np.zeros(n)
    delay = np.fromiter((delays.get(j, 0.0) for j in ids), float, n) if delays else None
    if resumed:
        at = np.flatnonzero(np.fromiter(map(resumed.__contains__, ids), bool, n))
        for i in at[np.isnan(cols.restart_s[idx[at]])].tolist():  # first restart of these jobs
            cols.restart_s[idx[i]] = restart.of(live[ids[i]].job.model)
        start[at] = cols.restart_s[idx[at]]
    if delay is not None:
        start += delay
    if resumed or delays:
        np.minimum(start, round_s, out=start)  # = overhead(s)
    runs = (round_s > start) & (solo > 0)
    possible = (round_s - start) * solo
    ends = runs & (possible >= rem)
    work = np.where(ends, rem, np.where(runs, possible, 0.0))
    finish = np.full(n, np.inf)  # inf: runs on past the round
    if ends.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            finish[ends] = np.minimum(round_s, start[ends] + rem[ends] / solo[ends])
        if delays:  # a job that started between rounds may have finished before this round's start
            np.maximum(finish, 0.0, out=finish)
    finished: set[str] = set()
    outcomes: dict[str, Outcome] = {}
    packed_i: list[int] = []
    packed_s: list[float] = []
    if single:  # the pairs' members, as ``run_pair`` found
        pos = dict(zip(ids, range(n)))
        for jid, o in single.items():
            i = pos[jid]
            work[i] = o.work
            finish[i] = np.inf if o.finish is None else o.finish
            if o.finish is not None:
                finished.add(jid)
                outcomes[jid] = o
            if o.packed_s > 0:
                packed_i.append(i)
                packed_s.append(o.packed_s)
    for i in np.flatnonzero(ends).tolist():
        jid = ids[i]
        if jid not in single:
            finished.add(jid)
            outcomes[jid] = Outcome(float(work[i]), float(finish[i]), 0.0)
    # every placed job's counters
    held = np.minimum(round_s, finish)
    # service counts from the job's start, before the round or into it (a finished job's no longer matters)
    if delay is not None:
        held = held - np.minimum(delay, held)
    rem = np.where(finish < np.inf, 0.0, rem - work)
    attained = cols.attained[idx] + held * cols.num_gpus[idx]
    executed = cols.executed[idx] + held
    ran_before = cols.rounds_run[idx]
    rounds_run = ran_before + 1
    cols.remaining[idx], cols.attained[idx] = rem, attained
    cols.executed[idx], cols.rounds_run[idx] = executed, rounds_run
    cols.done_work[idx] += work
    if packed_i:
        at_slot = idx[packed_i]
        cols.packed_s[at_slot] += packed_s
        cols.rounds_packed[at_slot] += 1
    for jid in decision.preempted:
        if jid in live:
            live[jid].preemptions += 1
    for jid in decision.migrated:
        live[jid].migrations += 1
    for i in np.flatnonzero(ran_before == 0).tolist():  # first round run: ``start`` is unset
        live[ids[i]].start = now
    for jid in finished:
        live[jid].finish = now + outcomes[jid].held
    # the views of the jobs that go on (a finished job leaves; the shell drops its view)
    if finished:
        goes_on = list(map(not_, map(finished.__contains__, ids)))
        views.update(running_views(cols, list(compress(ids, goes_on)), idx[np.array(goes_on, dtype=bool)]))
    else:
        views.update(running_views(cols, ids, idx))
    return RoundResult(finished, outcomes, infeasible, bool((work > 0).any()))


def record_of(s: LiveJob, now: float, cum_contention: float, cum_rounds: int) -> JobRecord:
    return JobRecord(
        job_id=s.job.id, num_gpus=s.job.num_gpus, model=s.job.model, submit_time=s.trace.submit_time,
        start_time=s.start if s.start is not None else now,
        finish_time=s.finish if s.finish is not None else now, duration=s.trace.duration,
        preemptions=s.preemptions, migrations=s.migrations, rounds_packed=s.rounds_packed,
        rounds_run=s.rounds_run,
        avg_contention=(cum_contention - s.contention_at_arrival) / max(1, cum_rounds - s.rounds_at_arrival),
        packed_s=s.packed_s, work_done=s.done_work, shifts=s.shifts, oscillations=s.returns,
    )


def busy_gpu_seconds(decision: RoundDecision, outcomes: dict[str, Outcome], round_s: float,
                      finished: set[str]) -> float:
    """GPU-seconds during which a GPU held at least one unfinished job this round."""
    if not finished:  # every placed job held its GPUs all round
        return decision.placement.busy_gpus() * round_s
    held = {j: min(round_s, outcomes[j].held) for j in finished}  # the others: the whole round
    rows = decision.placement.rows()  # per GPU row, the longest any of its jobs held it; summed in row order
    h = np.array([*map(held.get, rows.ids, repeat(round_s)), -1.0])  # job number -> held; -1 -> none
    t = rows.table
    per_gpu = np.maximum(h[t[:, 0]], h[t[:, 1]])
    used = per_gpu[per_gpu >= 0]
    return float(np.add.accumulate(used)[-1]) if len(used) else 0.0


def without(p: Placement, gone: set[str]) -> Placement:
    """``p`` less the ``gone`` jobs, renumbered."""
    if not gone:
        return p
    rows = p.rows()
    keep = np.fromiter(map(gone.__contains__, rows.ids), bool, len(rows.ids))
    np.logical_not(keep, out=keep)
    number = np.full(len(rows.ids) + 1, -1, dtype=np.int64)  # old number -> new; gone and -1: -1
    number[:-1][keep] = np.arange(int(keep.sum()))
    return Placement.from_rows(rows._replace(ids=tuple(compress(rows.ids, keep.tolist())), table=number[rows.table]))


def unchanged(d: RoundDecision, order: Sequence[str]) -> RoundDecision:
    """Last round's decision as this round's: the same placement, every placed job kept, no action."""
    placed = d.placement.jobs()
    return RoundDecision(
        placement=d.placement, started=(), preempted=(), migrated=(),
        kept=tuple(j for j in order if j in placed), packed=d.packed, pending=d.pending,
        strategies=d.strategies, speeds=d.speeds, migration_cost=0.0, timings=StageTimings())
