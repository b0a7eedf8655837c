"""A small table-driven ThroughputLookup and round loop for the Gavel / POP tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tesserae_slurm.model import Cluster, Job, JobView
from tesserae_slurm.policies.base import SchedulingInput


class TableSpeeds:
    """Speeds by model name: ``iso[(model, type)]`` alone (default 1.0), ``pair[(ma, mb, type)]`` packed.

    A pair missing from the table (in both orders) cannot pack; jobs with different GPU counts never do.
    Two jobs of one model run at the same speed (as real profiles make them): the table's first value.
    """

    def __init__(self, iso: Mapping[tuple[str, str], float] | None = None,
                 pair: Mapping[tuple[str, str, str], tuple[float, float]] | None = None) -> None:
        self.iso = dict(iso or {})
        self.pair = {k: ((v[0], v[0]) if k[0] == k[1] else v) for k, v in (pair or {}).items()}

    def isolated(self, job: Job, gpu_type: str) -> float:
        return self.iso.get((job.model, gpu_type), 1.0)

    def packed(self, a: Job, b: Job, gpu_type: str) -> tuple[float, float] | None:
        if a.num_gpus != b.num_gpus or a.no_pack or b.no_pack:
            return None
        if (a.model, b.model, gpu_type) in self.pair:
            return self.pair[(a.model, b.model, gpu_type)]
        if (b.model, a.model, gpu_type) in self.pair:
            sb, sa = self.pair[(b.model, a.model, gpu_type)]
            return sa, sb
        return None


def jv(jid: str, gpus: int = 1, model: str = "m", *, submit: float = 0.0, executed: float = 0.0,
       remaining: float | None = None, weight: float = 1.0, no_pack: bool = False) -> JobView:
    return JobView(Job(jid, gpus, model, no_pack=no_pack), submit, attained_service=executed * gpus,
                   executed_time=executed, remaining_work=remaining, priority_weight=weight)


def sched_input(views: Sequence[JobView], cluster: Cluster | str, lookup=None, now: float = 0.0,
                round_s: float = 360.0, seed: int = 0) -> SchedulingInput:
    cl = Cluster.from_spec(cluster) if isinstance(cluster, str) else cluster
    return SchedulingInput(now, round_s, tuple(views), cl, lookup or TableSpeeds(), seed)


def place_in_order(order: Sequence[str], pairs: Sequence[tuple[str, str]], gpus: Mapping[str, int],
                   capacity: int) -> list[str]:
    """One GPU type, no fragmentation: walk the order, pairs as one unit, place what fits (backfill)."""
    partner = {a: b for a, b in pairs} | {b: a for a, b in pairs}
    free, placed, seen = capacity, [], set()
    for j in order:
        if j in seen:
            continue
        unit = [j, partner[j]] if j in partner else [j]
        seen.update(unit)
        if gpus[j] <= free:
            free -= gpus[j]
            placed.extend(unit)
    return placed
