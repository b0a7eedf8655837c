"""The site's own order: Slurm's priority (fair-share, QOS, age, nice as the site set them), highest first.

The daemon fills ``JobView.site_priority`` from the ``priority`` Slurm reports each round and
``nice`` from the job's nice value (daemon/loop.py says what it does for jobs Slurm holds, which
Slurm gives priority 0); the simulator fills it from the trace's ``priority`` column. Ties go to the
lower nice, then to arrival. Placement, packing and migration minimization are the engine's, as
for every policy; so are the per-user and per-account GPU limits.

The order depends only on those fields, which the simulator keeps fixed, so every quiet round a
shell asks about is stable.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Ranking, SchedulingInput, stable_order


@dataclass(frozen=True)
class SlurmPriorityPolicy:
    name: str = "slurm-priority"

    def initial_state(self) -> None:
        return None

    def rank(self, inp: SchedulingInput, state: None) -> tuple[Ranking, None]:
        return Ranking(stable_order(inp.jobs, lambda v: (-v.site_priority, v.nice, v.submit_time))), state

    def stable_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, max_rounds: int) -> int:
        return max_rounds  # the same jobs with the same fields: the same sort keys

    def skip_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, rounds: int) -> None:
        return state
