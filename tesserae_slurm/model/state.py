"""What the shells (simulator, daemon) know about each active job at the start of a round.

Policies read these views to rank jobs. Per-policy memory (Tiresias queues, Gavel deficits) is not
here: a policy carries it in its own state object, passed in and returned, so ranking stays pure.
"""

from __future__ import annotations

from typing import NamedTuple

from .job import Job


class JobView(NamedTuple):
    """One active job as the policies see it. A named tuple, not a frozen dataclass: the simulator
    builds one for every job that ran, every round (millions on the Philly set), and a tuple is
    built about 3x faster. Immutable either way; ``view._replace(...)`` makes a changed copy."""

    job: Job
    submit_time: float  # seconds, shell's clock (trace time in the simulator, epoch in the daemon)
    attained_service: float = 0.0  # GPU-seconds run so far (num_gpus x wall seconds placed)
    executed_time: float = 0.0  # wall seconds placed so far
    rounds_run: int = 0
    running: bool = False  # placed in the round that just ended
    total_work: float | None = None  # isolated duration in seconds, when known (oracle / estimate)
    remaining_work: float | None = None  # isolated seconds of work left, when known
    priority_weight: float = 1.0
    # the site's own order (policies/slurm_priority.py): Slurm's priority in the daemon, the trace's
    # priority column in the simulator; higher first, then lower nice, then arrival
    site_priority: float = 0.0
    nice: int = 0
    # seconds of work done at the job's best speed alone (wall seconds run x the normalized speed of
    # each placement), when the shell counts it: the daemon does, from each round's speeds; the
    # simulator gives total_work and remaining_work instead
    work_done: float | None = None

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def num_gpus(self) -> int:
        return self.job.num_gpus
