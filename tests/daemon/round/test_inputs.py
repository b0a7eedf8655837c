"""The priority the daemon gives the slurm-priority order, from what Slurm reports each round."""

from __future__ import annotations

from tesserae_slurm.daemon.round.inputs import site_priority
from tesserae_slurm.slurm.types import SlurmJob, SlurmJobState as S


def job(state: S, priority: int, reason: str = "") -> SlurmJob:
    return SlurmJob(7, "j", "u", state, reason=reason, priority=priority)


def test_held_jobs_keep_the_last_priority_slurm_gave_them():
    memory: dict[str, int] = {}
    assert site_priority(memory, "7", job(S.PENDING, 0, "JobHeldAdmin")) == 0.0  # never unheld: nothing known
    assert site_priority(memory, "7", job(S.RUNNING, 4200)) == 4200.0  # released: Slurm's own value
    assert site_priority(memory, "7", job(S.RUNNING, 4300)) == 4300.0  # and its newest
    # preempted: requeue-held, Slurm reports 0 again; the job keeps its place
    assert site_priority(memory, "7", job(S.PENDING, 0, "job requeued in held state")) == 4300.0
