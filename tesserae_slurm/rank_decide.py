"""One round of the functional core: the policy ranks the active jobs, the engine decides.

The daemon, the simulator and the benchmarks all make a round through ``rank_and_decide``, so the
ranking is checked once for every shell: a policy that leaves out an active job, names one that is
not active, or names one twice is refused with one line (InputError) rather than deciding a round
over part of the queue (docs/architecture.md, "the flow of one round").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from .engine import Clock, EngineConfig, RoundRequest, decide
from .model import InputError, Job, JobView, RoundDecision
from .model.gpu_limits import GpuLimits
from .model.placement import GpuRef
from .placement.node_rules import NodeRule
from .policies.base import Policy, Ranking, SchedulingInput
from .profiles import ThroughputProfile

__all__ = ["RankedRound", "rank_and_decide", "ranked_jobs"]

_SHOWN = 5  # job ids named in an error before "..."
_JOB = itemgetter(0)  # of a JobView
_ID = attrgetter("id")  # of a Job


@dataclass(frozen=True)
class RankedRound:
    ranking: Ranking
    policy_state: Any  # the policy's state after this round, for the next one
    request: RoundRequest  # what the engine was (or would have been) asked
    decision: RoundDecision
    rank_s: float = 0.0  # the ranking's time on the shell's clock (0 without a clock)
    reused: bool = False  # the shell's ``keep`` gave last round's decision; the engine was not called


def rank_and_decide(policy: Policy, inp: SchedulingInput, state: Any, profile: ThroughputProfile,
                    config: EngineConfig, *, rules: Mapping[str, NodeRule] | None = None,
                    limits: GpuLimits | None = None, clock: Clock | None = None,
                    keep: Callable[[Ranking], RoundDecision | None] | None = None,
                    recent: Mapping[str, tuple[tuple[GpuRef, ...], ...]] | None = None,
                    remaining_known: bool = True) -> RankedRound:
    """Rank ``inp.jobs`` with ``policy`` from ``state``, check the ranking, and decide the round on
    ``inp.placement`` (the placement the policy saw) with ``profile``.

    ``keep``: the shell's shortcut for a round that changes nothing (the simulator's quiet rounds):
    given the ranking, last round's decision to keep, or None to ask the engine. ``clock`` times the
    ranking and the engine's stages, as ``engine.decide``'s clock. ``recent``: each job's GPUs in the
    rounds before this one, newest first (the shell's record; cost-aware decisions read it), and the
    jobs' remaining work comes from the views where the shell knows it, unless ``remaining_known`` is
    False (a simulation of the daemon, whose jobs declare no duration)."""
    t0 = clock() if clock is not None else 0.0
    ranking, new_state = policy.rank(inp, state)
    rank_s = clock() - t0 if clock is not None else 0.0
    remaining: Mapping[str, float] = {}
    if config.moves is not None and inp.placement is not None and remaining_known:
        remaining = {v.job.id: v.remaining_work for v in inp.jobs if v.remaining_work is not None}
    request = RoundRequest(inp.cluster, ranked_jobs(ranking, inp.jobs, policy.name), inp.placement, ranking.pairs,
                           config, rules or {}, limits=limits, held=ranking.held, remaining=remaining,
                           recent=recent or {})
    kept = keep(ranking) if keep is not None else None
    if kept is not None:
        return RankedRound(ranking, new_state, request, kept, rank_s, reused=True)
    return RankedRound(ranking, new_state, request, decide(request, profile, clock=clock), rank_s)


def ranked_jobs(ranking: Ranking, views: Sequence[JobView], policy: str = "the policy") -> tuple[Job, ...]:
    """The active jobs in ``ranking.order``; InputError unless the order names every job of
    ``views`` exactly once."""
    active = list(map(_JOB, views))
    by_id = dict(zip(map(_ID, active), active))  # C-level passes: the simulator asks every round
    try:
        jobs = tuple(map(by_id.__getitem__, ranking.order))
    except KeyError as e:
        raise InputError(f"policy {policy} ranked job {e.args[0]!r}, which is not active") from None
    if len(jobs) == len(by_id) and len(set(ranking.order)) == len(jobs):
        return jobs
    seen: set[str] = set()
    for j in ranking.order:
        if j in seen:
            raise InputError(f"policy {policy} ranked job {j!r} more than once")
        seen.add(j)
    missing = [v.id for v in views if v.id not in seen]
    shown = ", ".join(missing[:_SHOWN]) + (", ..." if len(missing) > _SHOWN else "")
    raise InputError(f"policy {policy} ranked {len(jobs)} of {len(by_id)} active jobs; left out: {shown}")

