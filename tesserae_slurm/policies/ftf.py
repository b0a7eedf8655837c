"""Themis-style finish-time fairness order (policies.md §9): the job treated least fairly goes first.

For each active job, at every round:

    rho = T_shared / T_ideal
    T_shared = (now - submit) + remaining / s          (elapsed, plus the rest run alone from now)
    T_ideal  = (total / s) x max(1, c)                  (alone, slowed by its fair share of the cluster)

``remaining`` and ``total`` are the job's isolated seconds of work on the reference GPU type (the
view's ``remaining_work`` / ``total_work``), ``s`` its best isolated speed on the cluster's GPU types
(1.0 on the reference type), and ``c`` the mean contention over the job's life so far: active jobs
per GPU, sampled at every round (the policy's state). This is the same rho the simulator reports
as the FTF metric once the job finishes (Shockwave's "themis" variant), so ordering by it targets
the worst ratio. A running job's rho holds still while a waiting job's grows, so waiting jobs
overtake. Without a known duration rho falls back to wall time over service:
``(now - submit) / (max(executed, round) x max(1, c))``. Jobs are ordered by rho, largest first;
ties keep arrival order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..model import JobView
from .base import Ranking, SchedulingInput


@dataclass(frozen=True, slots=True)
class Contention:
    total: float = 0.0  # sum of per-round samples (active jobs / GPUs)
    samples: int = 0

    @property
    def mean(self) -> float:
        return self.total / self.samples if self.samples else 0.0


@dataclass(frozen=True)
class ThemisState:
    contention: Mapping[str, Contention] = field(default_factory=lambda: MappingProxyType({}))


def rho(view: JobView, now: float, round_s: float, speed: float, contention: float) -> float:
    """Finish-time fairness estimate of one job (see the module docstring)."""
    share = max(1.0, contention)
    elapsed = max(0.0, now - view.submit_time)
    speed = speed if speed > 0 else 1.0
    total = view.total_work
    if total is not None and total > 0:
        remaining = view.remaining_work
        if remaining is None:
            remaining = max(0.0, total - view.executed_time)
        return (elapsed + remaining / speed) / (total / speed * share)
    return elapsed / (max(view.executed_time, round_s) * share)


@dataclass(frozen=True)
class ThemisPolicy:
    name: str = "ftf"

    def initial_state(self) -> ThemisState:
        return ThemisState()

    def rank(self, inp: SchedulingInput, state: ThemisState) -> tuple[Ranking, ThemisState]:
        sample = len(inp.jobs) / max(1, inp.cluster.total_gpus)
        types = inp.cluster.gpu_types
        seen: dict[str, Contention] = {}
        keyed = []
        speeds: dict[tuple[str, str, int, tuple[str, ...]], float] = {}
        for i, v in enumerate(inp.jobs):
            old = state.contention.get(v.id, Contention())
            c = Contention(old.total + sample, old.samples + 1)
            seen[v.id] = c
            skey = (v.job.model, v.job.batch_size, v.num_gpus, v.job.parallelism)
            if skey not in speeds:
                speeds[skey] = max(inp.throughput.isolated(v.job, g) for g in types)
            keyed.append((-rho(v, inp.now, inp.round_s, speeds[skey], c.mean), i, v.id))
        keyed.sort()
        return Ranking(tuple(jid for _, _, jid in keyed)), ThemisState(MappingProxyType(seen))
