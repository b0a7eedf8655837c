"""Tiresias' first implementation, the straightforward one: renumber, append arrivals, then sort by
(queue, seq) twice. The policy's ranking and state are held to it."""

from __future__ import annotations

from types import MappingProxyType

from tesserae_slurm.model import JobView
from tesserae_slurm.policies.base import SchedulingInput
from tesserae_slurm.policies.las import service_of
from tesserae_slurm.policies.tiresias import QueuedJob, TiresiasPolicy, TiresiasState


def _level(p: TiresiasPolicy, service: float, queue: int) -> int:
    """The queue a job's service since its last promotion puts it in (several limits at once if crossed)."""
    while queue < len(p.queue_limits) and service >= p.queue_limits[queue]:
        queue += 1
    return queue


def _promote(p: TiresiasPolicy, q: QueuedJob, v: JobView) -> bool:
    """A waiting job below Q0 that ran since its last promotion has waited P x that run."""
    if p.promote_knob <= 0 or q.queue == 0 or v.running:
        return False
    ran = v.executed_time - q.executed_base
    return ran > 0 and q.pending_s >= p.promote_knob * ran


def reference_rank(p: TiresiasPolicy, i: SchedulingInput,
                   state: TiresiasState) -> tuple[tuple[str, ...], TiresiasState]:
    """The first implementation: renumber, append arrivals, then sort by (queue, seq) twice."""
    elapsed = 0.0 if state.last_now is None else max(0.0, i.now - state.last_now)
    views = {v.id: v for v in i.jobs}
    jobs = {}
    for jid, q in state.jobs.items():
        v = views.get(jid)
        if v is None:
            continue
        if p.promote_knob > 0 and not v.running and v.executed_time - q.executed_base > 0:
            q = q._replace(pending_s=q.pending_s + elapsed)
        jobs[jid] = q
    seq = state.next_seq
    for jid in sorted(jobs, key=lambda j: (jobs[j].queue, not views[j].running, jobs[j].seq)):
        jobs[jid] = jobs[jid]._replace(seq=seq)
        seq += 1
    for v in i.jobs:
        if v.id not in jobs:
            jobs[v.id] = QueuedJob(0, seq, 0.0, 0.0)
            seq += 1
    demotions, promotions = state.demotions, state.promotions
    for jid in sorted(jobs, key=lambda j: (jobs[j].queue, jobs[j].seq)):
        q, v = jobs[jid], views[jid]
        level = _level(p, service_of(v, p.service) - q.service_base, q.queue)
        if level != q.queue:
            jobs[jid] = q._replace(queue=level, seq=seq)
            seq += 1
            demotions += 1
        elif _promote(p, q, v):
            jobs[jid] = QueuedJob(0, seq, service_of(v, p.service), v.executed_time)
            seq += 1
            promotions += 1
    order = tuple(sorted(jobs, key=lambda j: (jobs[j].queue, jobs[j].seq)))
    return order, TiresiasState(MappingProxyType(jobs), seq, i.now, promotions, demotions)
