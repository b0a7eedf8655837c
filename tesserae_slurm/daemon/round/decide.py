"""Decide: the policy ranks the jobs and the engine places them (the core, pure), then the plan says
what that means in Slurm actions (``actions.plan_round``).

``rank_and_decide`` is the daemon's only call into the core, the same two calls the simulator makes
(docs/architecture.md). Where foreign jobs hold GPUs, the engine saw each such node with its free GPUs
numbered 0..n-1; the plan maps them back to Slurm's indices, and so does the decision as recorded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...engine import EngineConfig, NodeRule, RoundRequest, decide
from ...model import RoundDecision
from ...policies.base import Policy, Ranking, SchedulingInput
from ...profiles import ThroughputProfile
from ...profiles.speeds import SpeedModel
from ...site.config import SiteConfig
from .actions import RoundPlan, plan_round
from .inputs import RoundInputs
from .observe import Snapshot, in_slurm_indices


@dataclass(frozen=True)
class Decided:
    decision: RoundDecision  # as recorded: in Slurm's GPU indices, the foreign jobs that hold GPUs named
    plan: RoundPlan
    order: tuple[str, ...]  # the policy's
    policy_state: Any  # the policy's state after this round
    rank_s: float  # policy.rank alone
    decision_s: float  # rank and decide


def decide_round(policy: Policy, state: Any, inp: RoundInputs, snap: Snapshot, profile: ThroughputProfile,
                 cfg: SiteConfig, engine: EngineConfig, rules: Mapping[str, NodeRule]) -> Decided:
    """``profile``: the table the engine decides with (online measurements laid over the configured one);
    ``rules``: operators' node rules (`tesserae pin|keep-off`)."""
    t0 = time.perf_counter()
    ranking, new_state, decision, rank_s = rank_and_decide(policy, state, inp, profile, cfg, engine, rules,
                                                           snap.time)
    decision_s = time.perf_counter() - t0
    plan = plan_round(decision, inp.actual, ranking.order, inp.gpu_index)
    return Decided(for_the_record(decision, snap), plan, ranking.order, new_state, rank_s, decision_s)


def rank_and_decide(policy: Policy, state: Any, inp: RoundInputs, profile: ThroughputProfile, cfg: SiteConfig,
                    engine: EngineConfig, rules: Mapping[str, NodeRule], now: float
                    ) -> tuple[Ranking, Any, RoundDecision, float]:
    """``policy.rank`` then ``engine.decide`` on the jobs in the policy's order; returns the ranking, the
    policy's new state, the decision and the seconds ranking took."""
    t0 = time.perf_counter()
    throughput = SpeedModel(profile, inp.cluster).lookup()
    ranking, new_state = policy.rank(SchedulingInput(now, cfg.scheduler.round_seconds, inp.views, inp.cluster,
                                                     throughput, cfg.scheduler.seed, inp.current), state)
    rank_s = time.perf_counter() - t0
    ordered = tuple(inp.jobs[j] for j in ranking.order)
    decision = decide(RoundRequest(inp.cluster, ordered, inp.current, ranking.pairs, engine, rules,
                                   limits=cfg.limits, held=ranking.held), profile, clock=time.perf_counter)
    return ranking, new_state, decision, rank_s


def for_the_record(decision: RoundDecision, snap: Snapshot) -> RoundDecision:
    """Where foreign jobs hold GPUs: the placement in Slurm's indices with those GPUs marked, and each
    pending job's detail naming them (``tesserae explain``, ``round show``)."""
    if not snap.held_by_others:
        return decision
    note = "GPUs held by jobs tesserae does not manage: " + "; ".join(snap.held_by_others)
    return replace(decision, placement=in_slurm_indices(decision.placement, snap), pending=tuple(
        p._replace(detail=f"{p.detail}; {note}" if p.detail else note) for p in decision.pending))
