"""Outcome: the round's end in the database, the metrics and the log: its status (applied, partial,
dry-run; skipped or failed when it could not decide), the problems by job, and one more round run for
each job that ran through it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...model import RoundDecision
from ..service.metrics import ACTIVE_STATES, JobSample, Metrics
from ..state.gpuset import parse_gpus
from ..state.journal import Journal
from ..state.store import JobRow
from .actions import RoundPlan
from .decide import Decided
from .stop_start import ApplyResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoundResult:
    round_id: int
    status: str  # applied | partial | dry-run | skipped | failed
    error: str = ""
    decision: RoundDecision | None = None
    plan: RoundPlan | None = None


def applied(journal: Journal, plan: RoundPlan, result: ApplyResult, count_rounds: bool = True) -> tuple[str, str]:
    """Counts the round for the jobs that ran through it (not a start between rounds: ``count_rounds``
    False); returns its status and the problems by job."""
    if count_rounds:
        kept = set(plan.kept)
        journal.count_rounds_run([j for j in plan.targets if j in kept or j in result.started])
    failures = {**result.failed, **result.skipped}
    return "partial" if failures else "applied", "; ".join(f"job {j}: {e}" for j, e in sorted(failures.items()))


def finish_round(journal: Journal, metrics: Metrics, round_id: int, status: str, decided: Decided, error: str,
                 t_round: float, clock: Callable[[], float], kind: str = "round") -> RoundResult:
    """``t_round``: when the round began (``time.perf_counter``), for the log line; ``kind``: ``start`` for
    a start between rounds (counted apart in the metrics)."""
    d, plan = decided.decision, decided.plan
    journal.update_round(round_id, status=status, error=error, finished_at=clock())
    if kind == "round":
        metrics.round_done(status, decided.decision_s)
    else:
        metrics.start_pass_done(status)
    count_jobs(journal, metrics, d)
    log.info("%s %d %s: %d started, %d preempted, %d migrated, %d kept, %d packed pairs, %d pending "
             "(%.1f ms decision, %.2f s %s)%s", "round" if kind == "round" else "start between rounds, round",
             round_id, status, sum(a.kind == "start" for a in plan.actions),
             sum(a.kind == "preempt" for a in plan.actions), sum(a.kind == "migrate" for a in plan.actions),
             len(plan.kept), len(d.packed), len(d.pending), decided.decision_s * 1e3,
             time.perf_counter() - t_round, "round" if kind == "round" else "pass",
             f"; problems: {error}" if error else "")
    return RoundResult(round_id, status, error, d, plan)


def count_jobs(journal: Journal, metrics: Metrics, d: RoundDecision) -> None:
    """The job gauges, counters and histograms after a round: the active rows, and the rows of the jobs
    active at the last count that are not now (they ended: their final state and run time)."""
    active = [_sample(r) for r in journal.store.job_columns(_SAMPLED, ACTIVE_STATES)]
    gone = metrics.watched() - {a.job_id for a in active}
    ended = [_sample(r) for r in journal.store.jobs_by_id(sorted(gone))] if gone else []
    metrics.update(active, ended, {p.job_id: p.reason.value for p in d.pending}, len(d.packed))


_SAMPLED = ("job_id", "state", "user", "num_gpus", "gpus", "submit_time", "first_start", "executed_time")


def _sample(r: JobRow) -> JobSample:  # or a row of the _SAMPLED columns
    slots = tuple((node, i) for node, idx in parse_gpus(r.gpus).items() for i in idx) if r.gpus else ()
    return JobSample(r.job_id, r.state, r.user, r.num_gpus, slots, r.submit_time, r.first_start, r.executed_time)


def skip_round(journal: Journal, metrics: Metrics, round_id: int, why: str, status: str,
               clock: Callable[[], float]) -> RoundResult:
    """A round that could not decide (``skipped``: Slurm unreachable; ``failed``: a problem of ours)."""
    log.error("round %d %s: %s", round_id, status, why)
    journal.update_round(round_id, status=status, error=why, finished_at=clock())
    journal.event(clock(), "round-" + status, why, round_id=round_id)
    metrics.round_done(status, None)
    return RoundResult(round_id, status, why)
