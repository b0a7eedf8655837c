"""FIFO: jobs in arrival order (policies.md §1).

Default (``preemptive=False``): jobs that ran last round come first, in arrival order, then the
waiting ones in arrival order. The engine backfills, so a later small job may start while an earlier
large one waits; without this rule the large job would later evict it once GPUs free up, which no
FIFO user expects. ``preemptive=True`` is Blox's form: strict arrival order rebuilt every round.

Either order depends only on arrival and the running set, so it holds for as long as both do
(``stable_rounds``: every round a shell asks about is stable).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Ranking, SchedulingInput, stable_order


@dataclass(frozen=True)
class FifoPolicy:
    preemptive: bool = False
    name: str = "fifo"

    def initial_state(self) -> None:
        return None

    def rank(self, inp: SchedulingInput, state: None) -> tuple[Ranking, None]:
        if self.preemptive:
            return Ranking(stable_order(inp.jobs, lambda v: v.submit_time)), state
        return Ranking(stable_order(inp.jobs, lambda v: (not v.running, v.submit_time))), state

    def stable_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, max_rounds: int) -> int:
        return max_rounds  # same jobs, same running set: the same sort keys

    def skip_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, rounds: int) -> None:
        return state
