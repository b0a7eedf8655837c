"""Reference keep-first walk: the rules of ``placement/keep_walk.py`` written plainly, unit by unit, with
no counts, no remembered failures and no fused scans (one node type, no node rules). The compiled walk
must give the same units the same GPU rows."""

from __future__ import annotations

from collections.abc import Sequence


def keep_walk(sizes: Sequence[int], need: Sequence[int], homes: Sequence[Sequence[int]],
              protect: Sequence[bool], modest: Sequence[bool], value: Sequence[float],
              cost: Sequence[float]) -> list[list[int] | None]:
    """Each unit's rows (sorted), or None when it waits or the walk stopped before it."""
    offset = [0]
    for s in sizes:
        offset.append(offset[-1] + s)
    total_rows = offset[-1]
    node_of = [i for i, s in enumerate(sizes) for _ in range(s)]
    free = [True] * total_rows
    holder = [-1] * total_rows
    for k, home in enumerate(homes):
        for r in home:
            if holder[r] < 0:
                holder[r] = k
    out: list[list[int] | None] = [None] * len(need)
    for k, n in enumerate(need):
        if sum(free) == 0:
            break
        home = list(homes[k])
        if len(home) == n and all(free[r] and holder[r] in (-1, k) for r in home):
            rows = home
        else:
            for r in home:
                if holder[r] == k:
                    holder[r] = -1
            rows = _place(k, n, sizes, offset, node_of, free, holder, protect, modest[k], value[k], cost)
        for r in home:  # what is left of its reservation ends with its turn
            if holder[r] == k:
                holder[r] = -1
        if rows is None:
            continue
        for r in rows:
            free[r] = False
            holder[r] = -1
        out[k] = sorted(rows)
    return out


def _avail(i: int, offset: Sequence[int], free: Sequence[bool], holder: Sequence[int]) -> int:
    return sum(1 for r in range(offset[i], offset[i + 1]) if free[r] and holder[r] < 0)


def _eff1(i: int, offset: Sequence[int], free: Sequence[bool], holder: Sequence[int], protect: Sequence[bool]) -> int:
    return sum(1 for r in range(offset[i], offset[i + 1]) if free[r] and (holder[r] < 0 or not protect[holder[r]]))


def _victims(i: int, d: int, offset: Sequence[int], free: Sequence[bool], holder: Sequence[int],
             protect: Sequence[bool]) -> list[int]:
    """The holders of the ``d`` home rows of node ``i`` taken first (the latest holders' rows)."""
    hs = sorted((holder[r] for r in range(offset[i], offset[i + 1])
                 if free[r] and holder[r] >= 0 and not protect[holder[r]]), reverse=True)
    return hs[:d]


def _place(k: int, n: int, sizes: Sequence[int], offset: Sequence[int], node_of: Sequence[int], free: list[bool],
           holder: list[int], protect: Sequence[bool], modest: bool, value: float,
           cost: Sequence[float]) -> list[int] | None:
    nn = len(sizes)
    for displace in ((False,) if modest else (False, True)):
        eff, key = [0] * nn, [0] * nn
        for i in range(nn):
            a = _avail(i, offset, free, holder)
            e = _eff1(i, offset, free, holder, protect) if displace else a
            eff[i] = e
            if displace and (e >= n or n > max(sizes)):
                d = min(n, e) - a
                if d > 0:
                    victims = _victims(i, d, offset, free, holder, protect)
                    if sum(cost[u] for u in set(victims)) >= value:
                        eff[i] = a
                    else:  # the most senior victim as junior as can be, then the fewest GPUs displaced
                        key[i] = (10**9 - victims[-1]) * 10**6 + d
        nodes = _pick(eff, key, sizes, n)
        if nodes:
            rows: list[int] = []
            for i, c in nodes:
                rows += _take(i, c, offset, free, holder, protect)
            return rows
    return None


def _pick(eff: Sequence[int], key: Sequence[int], sizes: Sequence[int], n: int) -> list[tuple[int, int]]:
    nn = len(eff)
    if n <= max(sizes):
        fits = [i for i in range(nn) if eff[i] >= n]
        if not fits:
            return []
        best = min(fits, key=lambda i: (key[i], eff[i], i))
        return [(best, n)]
    chosen: list[tuple[int, int]] = []
    rest = n
    for s in sorted(set(sizes), reverse=True):
        for i in range(nn):
            if rest < s:
                break
            if sizes[i] == s and eff[i] == s:
                chosen.append((i, s))
                rest -= s
    if rest:
        taken = {i for i, _ in chosen}
        fits = [i for i in range(nn) if i not in taken and eff[i] >= rest]
        if not fits:
            return []
        chosen.append((min(fits, key=lambda i: (eff[i], i)), rest))
    order = sorted((i for i in range(nn) if eff[i] > 0), key=lambda i: (-eff[i], i))
    acc, few = 0, []
    for i in order:
        if acc >= n:
            break
        few.append((i, min(eff[i], n - acc)))
        acc += eff[i]
    if acc >= n and len(few) < len(chosen):
        return few
    return chosen


def _take(i: int, count: int, offset: Sequence[int], free: Sequence[bool], holder: Sequence[int],
          protect: Sequence[bool]) -> list[int]:
    rows = [r for r in range(offset[i], offset[i + 1]) if free[r] and holder[r] < 0][:count]
    held = sorted((r for r in range(offset[i], offset[i + 1])
                   if free[r] and holder[r] >= 0 and not protect[holder[r]]),
                  key=lambda r: -holder[r])
    return rows + held[:count - len(rows)]
