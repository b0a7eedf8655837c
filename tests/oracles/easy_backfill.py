"""EASY backfill on one node, as Mu'alem & Feitelson (2001) state it: the first waiting job that does
not fit gets a *shadow time* (when enough GPUs will have freed up, by the running jobs' limits) and
the *extra* GPUs it leaves then; a later job starts if it fits now and ends by the shadow time or
fits in the extra GPUs. Counting GPUs only (one node), independently of the engine's walk."""

from __future__ import annotations

from collections.abc import Sequence


def easy_starts(gpus: int, running: Sequence[tuple[int, float]], queue: Sequence[tuple[str, int, float]],
                now: float) -> tuple[list[str], tuple[str, float] | None]:
    """``running``: (GPUs, end by limit); ``queue``: (id, GPUs, limit) in priority order, each at most
    ``gpus``. Returns the ids started now, in order, and the (id, shadow time) reservation."""
    free = gpus - sum(g for g, _ in running)
    ends = sorted(running, key=lambda r: r[1])
    started: list[str] = []
    shadow: float | None = None
    top = ""
    extra = 0
    for jid, g, limit in queue:
        if shadow is None:
            if g <= free:
                started.append(jid)
                free -= g
                ends = sorted([*ends, (g, now + limit)], key=lambda r: r[1])
                continue
            avail, shadow = free, now
            for rg, end in ends:  # release in end order until the top job fits
                if avail >= g:
                    break
                avail, shadow = avail + rg, end
            # everything ending at the shadow time is free then too
            avail = free + sum(rg for rg, end in ends if end <= shadow)
            top, extra = jid, avail - g
            continue
        if g > free:
            continue
        if now + limit <= shadow:
            started.append(jid)
            free -= g
        elif g <= extra:
            started.append(jid)
            free -= g
            extra -= g
    return started, None if shadow is None else (top, shadow)
