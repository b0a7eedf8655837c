"""Per-user and per-account GPU limits: applied by the engine after ranking, so every policy obeys them.

A placed job counts its ``num_gpus`` against its user's and its account's limit, packed or alone (as
Slurm's GrpTRES counts each job's allocation). Jobs without a user (or account) are not limited by
that key. The rule is the consolidation walk with one more check: a job is skipped, reason ``Limit``,
when the jobs placed *before it in policy order* already hold so many GPUs of its user or account
that its own would go over. A job is therefore never held back by jobs that did not get GPUs, and a
job held back is over its limit in the final placement too (usage only grows along the walk).

The walk itself is compiled (consolidate_jit.walk) and knows nothing of limits, so ``place_within``
runs it on the order without the jobs known to be limited, scans the placed jobs in order and adds
the ones that went over, and repeats: usually once or twice. Packing partners are then added only
while their user and account stay within their limits, in policy order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..model import Job, PackedPair, PendingJob, PendingReason
from ..model.limits import GpuLimits
from .consolidate import ConsolidationResult

__all__ = ["LimitGate", "gate"]

Place = Callable[[Sequence[Job], Sequence[tuple[str, str]]], ConsolidationResult]


def gate(limits: GpuLimits, jobs: Sequence[Job]) -> LimitGate | None:
    """None when no limit can bind this round (all jobs of each key fit under it together)."""
    if limits.empty:
        return None
    keys = {j.id: k for j in jobs if (k := limits.keys(j))}
    demand: Counter[str] = Counter()
    caps: dict[str, int] = {}
    for j in jobs:
        for key, cap in keys.get(j.id, ()):
            demand[key] += j.num_gpus
            caps[key] = cap
    if all(demand[k] <= caps[k] for k in demand):
        return None
    return LimitGate(keys)


class LimitGate:
    """One round's limit bookkeeping (built by ``GpuLimits.gate``)."""

    def __init__(self, keys: Mapping[str, tuple[tuple[str, int], ...]]) -> None:
        self.keys = keys
        self.used: Counter[str] = Counter()  # GPUs held per key by the jobs placed so far
        self.limited: dict[str, Job] = {}

    def _over(self, job: Job, used: Mapping[str, int]) -> bool:
        return any(used.get(k, 0) + job.num_gpus > cap for k, cap in self.keys.get(job.id, ()))

    def _take(self, job: Job) -> None:
        for k, _ in self.keys.get(job.id, ()):
            self.used[k] += job.num_gpus

    def place_within(self, jobs: Sequence[Job], pairs: Sequence[tuple[str, str]],
                     place: Place) -> tuple[ConsolidationResult, tuple[tuple[str, str], ...]]:
        """The walk in policy order with limited jobs skipped; returns it and the policy pairs kept
        (a pair with a limited member is dropped: the other member is walked alone)."""
        by_id = {j.id: j for j in jobs}
        for j in jobs:  # over its limit with nothing placed: never needs a walk to find out
            if self._over(j, {}):
                self.limited[j.id] = j
        while True:
            order = [j for j in jobs if j.id not in self.limited]
            kept = tuple(p for p in pairs if p[0] not in self.limited and p[1] not in self.limited)
            result = place(order, kept)
            used: Counter[str] = Counter()
            frozen: Counter[str] | None = None  # usage before the first job that went over
            new = []
            for jid in result.placed:
                j = by_id[jid]
                if frozen is None and not self._over(j, used):
                    for k, _ in self.keys.get(jid, ()):
                        used[k] += j.num_gpus
                elif frozen is None:
                    frozen = used.copy()
                    new.append(j)
                elif self._over(j, frozen):  # over on the usage of jobs that stay placed: certain
                    new.append(j)
            if not new:
                for jid in result.placed:
                    self._take(by_id[jid])
                return result, kept
            self.limited.update((j.id, j) for j in new)

    def hold_over(self, waiting: Iterable[Job]) -> None:
        """Jobs the walk left waiting that are over a limit already: they wait for it, and never pack."""
        self.limited.update((j.id, j) for j in waiting if self._over(j, self.used))

    def accept_pairs(self, pairs: Sequence[PackedPair], order: Mapping[str, int],
                     by_id: Mapping[str, Job]) -> list[PackedPair]:
        """Packed partners in policy order, each kept while its user and account stay within limits."""
        kept = []
        for p in sorted(pairs, key=lambda p: order[p.partner]):
            j = by_id[p.partner]
            if self._over(j, self.used):
                self.limited[j.id] = j
                continue
            self._take(j)
            kept.append(p)
        return kept

    def pending(self) -> list[PendingJob]:
        """The limited jobs with their reason, counted on the final usage."""
        out = []
        for j in self.limited.values():
            over = [f"{k} holds {self.used.get(k, 0)} of {cap} GPUs" for k, cap in self.keys[j.id]
                    if self.used.get(k, 0) + j.num_gpus > cap]
            out.append(PendingJob(j.id, PendingReason.LIMIT, f"needs {j.num_gpus} GPUs; " + "; ".join(over)))
        return out
