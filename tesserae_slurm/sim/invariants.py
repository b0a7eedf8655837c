"""Invariants of a simulation: checked on every round when asked (``--check``), always in tests.

Per decision: no GPU holds more than two jobs; packed jobs have the same GPU count and the same GPUs;
every placed job has exactly its GPU count; no job is lost (every active job is placed or pending);
started/preempted/migrated/kept match the placements; under GPU limits, no user or account holds more
than its limit and a job waits for a limit only when it would go over it; for configurations that keep
running jobs (``slurm-backfill``), nothing running is preempted or moved. Per round: every job's work is conserved
(work done + work left = its duration, nothing left below zero) and no job finishes twice. Per run:
every trace job finishes exactly once, with all its work done, no earlier than its isolated duration
allows (duration / the fastest speed any GPU type gives).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import MAX_JOBS_PER_GPU, Job, PendingReason, Placement, RoundDecision
from ..model.gpu_limits import GpuLimits
from .traces.record import TraceJob

if TYPE_CHECKING:
    from .metrics import SimResult

REL_TOL = 1e-7


class InvariantError(AssertionError):
    pass


def check_limits(d: RoundDecision, jobs: Sequence[Job], limits: GpuLimits) -> None:
    """Every user and account within its limit (each placed job counts its GPUs, packed or not), and
    every job waiting for ``Limit`` really over it: the limit holds no job back without cause."""
    by_id = {j.id: j for j in jobs}
    use: Counter[str] = Counter()
    for jid in d.placement.jobs():
        for key, _ in limits.keys(by_id[jid]):
            use[key] += by_id[jid].num_gpus
    for j in jobs:
        for key, cap in limits.keys(j):
            if use[key] > cap:
                raise InvariantError(f"{key} holds {use[key]} GPUs, over its limit of {cap}")
    for p in d.pending:
        if p.reason is PendingReason.LIMIT:
            j = by_id[p.job_id]
            if not any(use[k] + j.num_gpus > cap for k, cap in limits.keys(j)):
                raise InvariantError(f"job {j.id} waits for a limit it is under ({p.detail})")


def check_round(d: RoundDecision, jobs: Mapping[str, Job], current: Placement) -> None:
    gpus = d.placement.job_gpus()
    for node, slots in d.placement.nodes.items():
        for idx, slot in enumerate(slots):
            if len(slot) > MAX_JOBS_PER_GPU:
                raise InvariantError(f"{node} GPU {idx} holds {len(slot)} jobs")
            if len(slot) == 2:
                a, b = sorted(slot)
                if jobs[a].num_gpus != jobs[b].num_gpus:
                    raise InvariantError(f"packed {a} and {b} have different GPU counts")
                if gpus[a] != gpus[b]:
                    raise InvariantError(f"packed {a} and {b} do not share the same GPU set")
    for j, refs in gpus.items():
        if j not in jobs:
            raise InvariantError(f"placed job {j} is not active")
        if len(refs) != jobs[j].num_gpus:
            raise InvariantError(f"job {j} got {len(refs)} GPUs, needs {jobs[j].num_gpus}")
    placed, pending = set(gpus), {p.job_id for p in d.pending}
    if placed & pending:
        raise InvariantError(f"jobs both placed and pending: {sorted(placed & pending)}")
    if placed | pending != set(jobs):
        raise InvariantError(f"jobs lost by the decision: {sorted(set(jobs) - placed - pending)}")
    before = current.jobs()
    if set(d.started) != placed - before or set(d.preempted) != before - placed:
        raise InvariantError("started/preempted do not match the placements")
    if set(d.migrated) | set(d.kept) != placed & before or set(d.migrated) & set(d.kept):
        raise InvariantError("migrated/kept do not partition the jobs placed in both rounds")
    old = current.job_gpus()
    for j in d.kept:
        if old[j] != gpus[j]:
            raise InvariantError(f"job {j} is 'kept' but its GPUs changed")


def check_kept(d: RoundDecision, current: Placement, held: Sequence[str]) -> None:
    """Configurations that never preempt or move (``keeps_running``, plain Slurm): every job running
    before runs on the same GPUs, and no job the policy held was started."""
    if d.preempted or d.migrated:
        raise InvariantError(f"running jobs preempted {list(d.preempted)[:5]} or moved {list(d.migrated)[:5]}")
    old, new = current.job_gpus(), d.placement.job_gpus()
    for j, refs in old.items():
        if new.get(j) != refs:
            raise InvariantError(f"job {j} moved from {refs} to {new.get(j)}")
    started = set(held) & set(d.started)
    if started:
        raise InvariantError(f"held jobs started: {sorted(started)[:5]}")


def check_progress(work: Mapping[str, tuple[float, float, float]], finished: set[str],
                   done_before: set[str]) -> None:
    """``work``: job -> (duration, work done, work left) after this round's progress."""
    twice = finished & done_before
    if twice:
        raise InvariantError(f"jobs finished twice: {sorted(twice)}")
    for j, (duration, done, left) in work.items():
        if left < -REL_TOL * duration or done < 0:
            raise InvariantError(f"job {j}: negative work (done {done}, left {left})")
        if abs(done + left - duration) > REL_TOL * max(1.0, duration):
            raise InvariantError(f"job {j}: work not conserved: done {done} + left {left} != {duration}")
        if (j in finished) != (left == 0.0):
            raise InvariantError(f"job {j}: finished={j in finished} but {left} s of work left")


def check_result(result: SimResult, trace: Sequence[TraceJob], max_speed: float) -> None:
    ids = [r.job_id for r in result.jobs]
    if len(ids) != len(set(ids)):
        raise InvariantError("a job finished twice")
    missing = {t.job_id for t in trace} - set(ids)
    if missing or len(ids) != len(trace):
        raise InvariantError(f"jobs lost: {sorted(missing)[:5]}")
    for r in result.jobs:
        if abs(r.work_done - r.duration) > REL_TOL * max(1.0, r.duration):
            raise InvariantError(f"job {r.job_id}: did {r.work_done} s of work, needs {r.duration}")
        if r.jct < r.duration / max_speed - 1e-6 * max(1.0, r.duration):
            raise InvariantError(f"job {r.job_id}: JCT {r.jct} below its isolated duration {r.duration}")
        if not r.submit_time <= r.start_time <= r.finish_time:
            raise InvariantError(f"job {r.job_id}: submit {r.submit_time}, start {r.start_time}, "
                                 f"finish {r.finish_time}")
