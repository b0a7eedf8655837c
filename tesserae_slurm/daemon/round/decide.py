"""Decide: the policy ranks the jobs and the engine places them (the core, pure), then the plan says
what that means in Slurm actions (``actions.plan_round``).

``rank_and_decide`` (tesserae_slurm/rank_decide.py) is the daemon's only call into the core, the same
call the simulator and the benchmarks make (docs/architecture.md). Where foreign jobs hold GPUs, the
engine saw each such node with its free GPUs numbered 0..n-1; the plan maps them back to Slurm's
indices, and so does the decision as recorded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...engine import EngineConfig, RoundRequest
from ...model import RoundDecision
from ...placement.node_rules import NodeRule
from ...policies.base import Policy, SchedulingInput
from ...profiles import ThroughputProfile
from ...profiles.speeds import SpeedModel
from ...rank_decide import rank_and_decide
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
    request: RoundRequest | None = None  # what the engine was asked (engine indices), for the record


def decide_round(policy: Policy, state: Any, inp: RoundInputs, snap: Snapshot, profile: ThroughputProfile,
                 cfg: SiteConfig, engine: EngineConfig, rules: Mapping[str, NodeRule]) -> Decided:
    """``profile``: the table the engine decides with (online measurements laid over the configured one);
    ``rules``: operators' node rules (`tesserae pin|keep-off`)."""
    t0 = time.perf_counter()
    throughput = SpeedModel(profile, inp.cluster).lookup()
    ranked = rank_and_decide(
        policy, SchedulingInput(snap.time, cfg.scheduler.round_seconds, inp.views, inp.cluster, throughput,
                                cfg.scheduler.seed, inp.current),
        state, profile, engine, rules=rules, limits=cfg.limits, clock=time.perf_counter, recent=inp.recent)
    decision_s = time.perf_counter() - t0
    plan = plan_round(ranked.decision, inp.actual, ranked.ranking.order, inp.gpu_index)
    return Decided(for_the_record(ranked.decision, snap), plan, ranked.ranking.order, ranked.policy_state,
                   ranked.rank_s, decision_s, ranked.request)


def for_the_record(decision: RoundDecision, snap: Snapshot) -> RoundDecision:
    """Where foreign jobs hold GPUs: the placement in Slurm's indices with those GPUs marked, and each
    pending job's detail naming them (``tesserae explain``, ``round show``)."""
    if not snap.held_by_others:
        return decision
    note = "GPUs held by jobs tesserae does not manage: " + "; ".join(snap.held_by_others)
    return replace(decision, placement=in_slurm_indices(decision.placement, snap), pending=tuple(
        p._replace(detail=f"{p.detail}; {note}" if p.detail else note) for p in decision.pending))
