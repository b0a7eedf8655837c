"""Tiresias' one-sort ranking against the straightforward version it replaced (kept here as the oracle)."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.policies.las import service_of
from tesserae_slurm.policies.tiresias import QueuedJob, TiresiasPolicy, TiresiasState

from policy_helpers import inp, view


def _level(p: TiresiasPolicy, service: float, queue: int) -> int:
    """The queue a job's service since its last promotion puts it in (several limits at once if crossed)."""
    while queue < len(p.queue_limits) and service >= p.queue_limits[queue]:
        queue += 1
    return queue


def reference_rank(p: TiresiasPolicy, i, state: TiresiasState):
    """The first implementation: renumber, append arrivals, then sort by (queue, seq) twice."""
    elapsed = 0.0 if state.last_now is None else max(0.0, i.now - state.last_now)
    views = {v.id: v for v in i.jobs}
    jobs = {}
    for jid, q in state.jobs.items():
        v = views.get(jid)
        if v is None:
            continue
        if not v.running and v.executed_time - q.executed_base > 0:
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
        elif p._promote(q, v):
            jobs[jid] = QueuedJob(0, seq, service_of(v, p.service), v.executed_time)
            seq += 1
            promotions += 1
    order = tuple(sorted(jobs, key=lambda j: (jobs[j].queue, jobs[j].seq)))
    return order, TiresiasState(MappingProxyType(jobs), seq, i.now, promotions, demotions)


@dataclass
class _Job:
    gpus: int
    served: float = 0.0
    running: bool = False


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.lists(st.booleans(), max_size=12)),
                min_size=1, max_size=12),
       st.sampled_from([0.0, 0.5, 2.0]), st.sampled_from(["gpu-time", "time"]))
def test_same_order_and_state_as_the_reference(rounds, knob, service):
    """Random rounds: arrivals, jobs running or not, service growing, jobs finishing."""
    policy = TiresiasPolicy(queue_limits=(500.0, 1500.0), promote_knob=knob, service=service)
    fast = slow = policy.initial_state()
    jobs: dict[str, _Job] = {}
    now, next_id = 0.0, 0
    for arrivals, finish, running in rounds:
        for _ in range(arrivals):
            jobs[f"j{next_id}"] = _Job(1 + next_id % 4)
            next_id += 1
        for jid in list(jobs)[:finish % 3]:
            if finish > 3:
                del jobs[jid]
        for (jid, j), r in zip(jobs.items(), running + [False] * len(jobs)):
            j.running = r
        views = [view(jid, j.gpus, served=j.served, running=j.running) for jid, j in jobs.items()]
        i = inp(views, now=now)
        ranking, fast = policy.rank(i, fast)
        order, slow = reference_rank(policy, i, slow)
        assert ranking.order == order
        assert dict(fast.jobs) == dict(slow.jobs)
        assert (fast.next_seq, fast.promotions, fast.demotions) == (slow.next_seq, slow.promotions, slow.demotions)
        for j in jobs.values():
            if j.running:
                j.served += 360.0
        now += 360.0
