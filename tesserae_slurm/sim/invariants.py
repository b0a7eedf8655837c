"""Runtime checks of a round decision (opt-in in the simulator, always on in tests)."""

from __future__ import annotations

from collections.abc import Mapping

from ..model import MAX_JOBS_PER_GPU, Job, Placement, RoundDecision


class InvariantError(AssertionError):
    pass


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
