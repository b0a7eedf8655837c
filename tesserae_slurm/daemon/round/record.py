"""Record: the round's decision in the state database before anything is sent to Slurm: the round's row
(its numbers, stage times, the decision with the policy's order and where each speed came from), one
placement row per placed job, and each job's reason to wait. A dry run records its actions as
intents it never carries out, and keeps its placement as the next dry round's accounting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...model import Placement
from ...request_codec import request_to_json
from ..state.gpuset import format_gpus
from ..state.journal import Intent, Journal, RoundCounts
from ..state.store import JobUpdate
from .actions import RoundPlan
from .decide import Decided
from .inputs import RoundInputs


def round_counts(decided: Decided, inp: RoundInputs) -> RoundCounts:
    d, plan = decided.decision, decided.plan
    return RoundCounts(
        scheduling_ms=decided.rank_s * 1e3, placement_ms=d.timings.placement * 1e3,
        packing_ms=d.timings.packing * 1e3, migration_ms=d.timings.migration * 1e3,
        jobs_active=len(inp.jobs), running=len(plan.targets), kept=len(plan.kept),
        started=sum(a.kind == "start" for a in plan.actions),
        preempted=sum(a.kind == "preempt" for a in plan.actions),
        migrated=sum(a.kind == "migrate" for a in plan.actions), packed_pairs=len(d.packed),
        pending=len(d.pending),
    )


def record_decision(journal: Journal, round_id: int, inp: RoundInputs, decided: Decided,
                    sources: Mapping[str, Any], dry_run: bool, inputs_of: str = "") -> None:
    """``sources``: where each placed job's speed came from (``feedback.online.OnlineFeedback.sources``);
    ``inputs_of``: the profile the round decided with, to record the round's inputs (``state.record_inputs``)
    beside its decision so it can be replayed; "" records none."""
    d, plan = decided.decision, decided.plan
    inputs = request_to_json(decided.request, inputs_of) if inputs_of and decided.request is not None else None
    # why each job was left out and which nodes could not be used: explain's causes and the page's map
    left_out = {"excluded": dict(inp.excluded), "held_in_slurm": list(inp.held_in_slurm),
                "nodes_out": {n: {"gpus": g, "why": why} for n, (g, why) in inp.nodes_out.items()}}
    journal.record_decision(round_id, d, plan.targets, round_counts(decided, inp), decided.order, sources, inputs,
                            left_out)
    if dry_run:
        return
    reasons = {j: JobUpdate(reason=why) for j, why in inp.excluded.items()}
    for p in d.pending:
        reasons[p.job_id] = JobUpdate(reason=p.reason.value + (f": {p.detail}" if p.detail else ""))
    for j in plan.kept:  # no Slurm call; only the record of who shares its GPUs (and its speed) changes
        reasons[j] = JobUpdate(packed_with=plan.targets[j].partner, speed=plan.targets[j].speed, reason="")
    journal.update_jobs(reasons, known=inp.rows)  # a waiting job's reason mostly stays what it was


def record_dry_run(journal: Journal, round_id: int, plan: RoundPlan, placement: Placement, now: float,
                   finished: float) -> None:
    """The plan's actions as intents marked skipped at ``finished``; ``placement`` kept as the shadow."""
    journal.record_intents(round_id, [Intent(a.kind, a.job_id, {
        "gpus": format_gpus(a.target.gpus) if a.target else "",
        "from": format_gpus(a.previous) if a.previous else ""}) for a in plan.actions], now)
    for a in journal.store.actions(round_id=round_id, status="intent"):
        journal.finish_action(a.id, "skipped", finished, "dry run: nothing sent to Slurm")
    journal.save_shadow(placement)
