"""Reference for the GPU-limit walk (placement/limit_gate.py): exact and slow.

A job is limited when, at its place in the walk (policy order, a policy pair at its first member's
place), the jobs placed before it fill its user or account. Walk, find the first job over a limit at
its place (placed or not), skip it and every later job already over on the same usage (the jobs
before the first one stay as they are, and usage only grows), walk again. Each walk settles at least
one job for certain, so the result is the walk with limited jobs skipped, by construction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from tesserae_slurm.model import Job
from tesserae_slurm.model.gpu_limits import GpuLimits


def exact_walk(limits: GpuLimits, jobs: Sequence[Job], pairs: Sequence[tuple[str, str]],
               place: Callable) -> tuple[object, tuple[tuple[str, str], ...], set[str]]:
    keys = {j.id: limits.keys(j) for j in jobs}
    by_id = {j.id: j for j in jobs}

    def over(j: Job, used: Mapping[str, int]) -> bool:
        return any(used.get(k, 0) + j.num_gpus > cap for k, cap in keys[j.id])

    limited = {j.id for j in jobs if over(j, {})}
    while True:
        order = [j for j in jobs if j.id not in limited]
        kept = tuple(p for p in pairs if p[0] not in limited and p[1] not in limited)
        result = place(order, kept)
        placed = set(result.placed)
        partner = {a: b for a, b in kept} | {b: a for a, b in kept}
        walk, seen = [], set()
        for j in order:  # the walk's order: a pair at its first member's place
            if j.id not in seen:
                seen |= {j.id, partner.get(j.id, j.id)}
                walk += [j.id] + ([partner[j.id]] if j.id in partner else [])
        used: Counter[str] = Counter()
        frozen: Counter[str] | None = None
        new = set()
        for jid in walk:
            j = by_id[jid]
            if frozen is None and not over(j, used):
                if jid in placed:
                    for k, _ in keys[jid]:
                        used[k] += j.num_gpus
            elif frozen is None:
                frozen = used.copy()
                new.add(jid)
            elif over(j, frozen):
                new.add(jid)
        if not new:
            return result, kept, limited
        limited |= new
