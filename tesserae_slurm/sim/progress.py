"""Exact progress of the jobs sharing one set of GPUs during one round (pure arithmetic).

A group is one job alone, or two jobs packed on the same GPUs. Each job first spends its restart
overhead (nothing if it kept its GPUs), then computes. While its partner has not finished, a packed
job runs at its packed speed (the partner counts as present from the start of the round, restarting
or not); once the partner finishes, the survivor runs at its speed alone for the rest of the round
(same strategy). A job finishes at the exact instant its remaining work reaches zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Member:
    remaining: float  # seconds of reference work left
    overhead: float  # seconds lost before computing this round (<= round; < 0: it began before the round)
    solo: float  # speed alone
    packed: float  # speed while the partner is present (= solo for a job alone)


@dataclass(frozen=True, slots=True)
class Outcome:
    work: float  # reference work done this round
    finish: float | None  # offset in the round at which the job finished, or None
    packed_s: float  # seconds computed next to a partner

    @property
    def held(self) -> float:
        """Seconds the job held its GPUs this round (until it finished, or all of it)."""
        return self.finish if self.finish is not None else math.inf


def _segment(remaining: float, start: float, end: float, speed: float) -> tuple[float, float | None]:
    """(work done, finish time or None) running at ``speed`` from ``start`` to ``end``."""
    if end <= start or speed <= 0:
        return 0.0, None
    possible = (end - start) * speed
    if possible >= remaining:  # finishes inside (rounding can put start + remaining/speed past end)
        return remaining, min(end, max(0.0, start + remaining / speed))  # start < 0: began before the round
    return possible, None


def run_alone(m: Member, round_s: float) -> Outcome:
    work, finish = _segment(m.remaining, m.overhead, round_s, m.solo)
    return Outcome(work, finish, 0.0)


def run_pair(a: Member, b: Member, round_s: float) -> tuple[Outcome, Outcome]:
    wa, fa = _segment(a.remaining, a.overhead, round_s, a.packed)
    wb, fb = _segment(b.remaining, b.overhead, round_s, b.packed)
    if fa is None and fb is None:  # nobody finishes: packed all round
        return (Outcome(wa, None, max(0.0, round_s - a.overhead)),
                Outcome(wb, None, max(0.0, round_s - b.overhead)))
    first_is_a = fb is None or (fa is not None and fa <= fb)
    first, other = (a, b) if first_is_a else (b, a)
    t = fa if first_is_a else fb
    assert t is not None
    first_out = Outcome(first.remaining, t, t - first.overhead)
    # the survivor: packed until t (if it had started by then), alone afterwards
    together, finish = _segment(other.remaining, other.overhead, t, other.packed)
    packed_s = max(0.0, t - other.overhead)
    if finish is not None:  # finished at the same instant
        other_out = Outcome(other.remaining, finish, packed_s)
    else:
        alone, finish = _segment(other.remaining - together, max(t, other.overhead), round_s, other.solo)
        other_out = Outcome(other.remaining if finish is not None else together + alone, finish, packed_s)
    return (first_out, other_out) if first_is_a else (other_out, first_out)
