"""Fast-forward over quiet rounds, exactly: the same numbers as simulating them one by one.

A round is *quiet* when no job arrives before it starts, the policy ranks exactly as last round (the
simulator then reuses last round's decision: nobody starts, stops, migrates or restarts) and no
placed job finishes inside it. Then every placed job does ``round x speed`` work, every active job
stays, and the next round looks the same again. After a round whose placed jobs are exactly the
ones that ran before it (so the running set stays), the simulator asks how many following rounds
are quiet: arrivals and finishes it checks itself; the ranking it asks the policy
(``policies.base.QuietRounds.stable_rounds``), which replays its own thresholds float for float.
It then applies those rounds in a tight loop with the same float operations per round as the
round-by-round path (``remaining -= work`` k times, not ``k x work``), appends one reused
``RoundRecord`` per round, and asks the policy for its state after them (``skip_rounds``).
Policies without the hook (Themis/FTF, Gavel, POP, SRTF) are never fast-forwarded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import RoundDecision
from ..profiles.speeds import SpeedModel
from .jobstate import JobColumns, LiveJob
from .metrics import RoundRecord
from .rounds import solo_speeds


@dataclass(frozen=True)
class Stretch:
    """The rounds after an executed one, while nothing changes: what each of them repeats."""

    ids: tuple[str, ...]  # placed jobs
    cols: JobColumns  # their numbers, at ``slots``
    slots: np.ndarray
    work: np.ndarray  # reference work per round (round x speed; 0 for a job that cannot run)
    moving: np.ndarray  # speed > 0 (only those can finish)
    packed: np.ndarray  # packed seconds per round (round or 0)
    gpu_s: np.ndarray  # round x num_gpus: attained GPU-seconds per round
    record: dict[str, Any]  # the reused round's record, but its time


def stretch_of(decision: RoundDecision, live: dict[str, LiveJob], cols: JobColumns, speeds: SpeedModel,
               round_s: float, infeasible: int, active: int) -> Stretch | None:
    """What each following quiet round does (the reused decision: the same groups at the same
    speeds, nobody restarting), or None if nothing would progress (the stall guard then counts
    rounds one by one). Speeds come from the same memos ``rounds.run_round`` just filled."""
    node_of = decision.placement.job_nodes()
    ids = tuple(node_of)
    slots = np.fromiter(map(cols.slot_of.__getitem__, ids), np.int64, len(ids))
    speed = solo_speeds(decision, ids, slots, live, cols, speeds)  # a copy (fancy indexing)
    packed = np.zeros(len(ids))
    if decision.packed:
        at = dict(zip(ids, range(len(ids))))
        strategies = decision.strategies
        for p in decision.packed:  # a pair counts only when both members are placed
            if p.placed in node_of and p.partner in node_of:
                a, b = live[p.placed].job, live[p.partner].job
                g = speeds.node_type[node_of[p.placed]]
                i, j = at[a.id], at[b.id]
                speed[i], speed[j] = speeds.packed(a, b, g, strategies.get(a.id), strategies.get(b.id))
                packed[i] = packed[j] = round_s
    moving = speed > 0
    work = np.where(moving, round_s * speed, 0.0)
    if not (work > 0).any():
        return None
    gpu_s = round_s * cols.num_gpus[slots]
    placement = decision.placement
    record = dict(
        active=active, running=len(ids), packed_pairs=len(decision.packed), migrations=0,
        preemptions=0, busy_gpus=placement.busy_gpus(), busy_gpu_s=placement.busy_gpus() * round_s, finished=0,
        scheduling_ms=0.0, placement_ms=0.0, packing_ms=0.0, migration_ms=0.0, infeasible_pairs=infeasible,
        reused=True)
    return Stretch(ids, cols, slots, work, moving, packed, gpu_s, record)


def upper_bound(st: Stretch, now: float, round_s: float, next_arrival: float) -> int:
    """A cheap bound on the quiet rounds (``quiet_rounds`` counts them exactly), to cap the policy's
    replay: rounds until the next arrival or the first finish, plus a margin for rounding."""
    rem = st.cols.remaining[st.slots]
    finish = float(np.min(rem[st.moving] / st.work[st.moving])) if st.work[st.moving].all() else 0.0
    arrive = (next_arrival - now) / round_s
    bound = min(finish, arrive) + 2
    return int(bound) if math.isfinite(bound) else 0


def quiet_rounds(st: Stretch, now: float, round_s: float, next_arrival: float,
                 limit: int) -> int:
    """How many rounds from ``now`` on (at most ``limit``) start before the next arrival and see no
    placed job finish, replaying ``remaining -= work`` exactly as the rounds would."""
    rem = st.cols.remaining[st.slots]
    k, t = 0, now
    while k < limit and t < next_arrival and not (st.moving & (st.work >= rem)).any():
        rem -= st.work
        t += round_s
        k += 1
    return k


def apply_rounds(st: Stretch, k: int, now: float, round_s: float,
                 rounds: list[RoundRecord]) -> float:
    """Apply ``k`` quiet rounds from ``now`` on: every placed job's counters advance with the same
    float operations ``rounds.run_round`` does, once per round; one record per round. Returns the
    clock after them."""
    cols, at = st.cols, st.slots
    rem, done, executed, attained, packed_s = (cols.remaining[at], cols.done_work[at], cols.executed[at],
                                               cols.attained[at], cols.packed_s[at])
    held = np.full(len(at), round_s)
    record = st.record
    for _ in range(k):
        rem -= st.work
        done += st.work
        executed += held
        attained += st.gpu_s
        packed_s += st.packed
        rounds.append(RoundRecord(time=now, **record))
        now += round_s
    cols.remaining[at], cols.done_work[at], cols.executed[at], cols.attained[at], cols.packed_s[at] = (
        rem, done, executed, attained, packed_s)
    cols.rounds_run[at] += k
    cols.rounds_packed[at[st.packed > 0]] += k
    return now

