"""Apply: carry out the round's plan through ``stop_start.Applier``, in the order that keeps GPUs
single-booked and the round short.

Stops begin first (the checkpoint signal); starts onto GPUs no stopping job holds go ahead while the
stopping jobs checkpoint; the rest start once the stops are done, and never onto GPUs a job still
holds (``occupied``). A daemon asked to stop leaves the starts not made yet to the next start. Jobs
just preempted are requeue-held, a hold their owner could lift: the guard makes them the daemon's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from ..service.metrics import Metrics
from ..state.gpuset import GpuMap, parse_gpus
from ..state.journal import Journal
from ..state.store import PREEMPTING
from .actions import RoundPlan
from .guard import Guard
from .observe import Snapshot
from .stop_start import Applier, ApplyResult


def apply_plan(round_id: int, plan: RoundPlan, snap: Snapshot, actual: Mapping[str, GpuMap], applier: Applier,
               guard: Guard, journal: Journal, metrics: Metrics, stop: threading.Event) -> ApplyResult:
    """``actual``: the GPUs each placed job held when the round decided (``inputs.RoundInputs.actual``)."""
    journal.update_round(round_id, status="applying")
    t0 = time.perf_counter()
    result = ApplyResult()
    stopping = applier.begin_stops(round_id, plan.stop_items(), {j: m.slurm for j, m in snap.jobs.items()}, result)
    busy = {(n, g) for a in plan.stops for n, idx in (a.previous or {}).items() for g in idx}
    now_starts = [a for a in plan.starts if a.kind == "start" and a.target is not None
                  and not any((n, g) in busy for n, idx in a.target.gpus.items() for g in idx)]
    first = {a.job_id for a in now_starts}
    later = [a for a in plan.starts if a.job_id not in first]
    if now_starts and not stop.is_set():
        applier.start_jobs(round_id, now_starts, occupied(journal, actual, set()), result)
    applier.finish_stops(stopping, result)
    for a in plan.stops:
        if a.job_id in result.stopped:
            metrics.action(a.kind)
    if stop.is_set():
        result.skipped.update({a.job_id: "daemon stopping" for a in plan.starts
                               if a.job_id not in result.skipped and a.job_id not in result.started})
    elif later:
        applier.start_jobs(round_id, later, occupied(journal, actual, result.stopped), result)
    for a in plan.starts:
        if a.kind == "start" and a.job_id in result.started:
            metrics.action("start")
    guard.hold(round_id, [a.job_id for a in plan.stops if a.kind == "preempt" and a.job_id in result.stopped],
               "secure", ApplyResult())
    journal.update_round(round_id, apply_ms=(time.perf_counter() - t0) * 1e3)
    return result


def occupied(journal: Journal, actual: Mapping[str, GpuMap], stopped: set[str]) -> dict[tuple[str, int], set[str]]:
    """Who holds each GPU now: placed jobs not stopped yet, and stops carried over from an earlier
    round (PREEMPTING, still running: their GPUs stay booked until Slurm has them pending)."""
    held = dict(actual)
    for r in journal.rows((PREEMPTING,)):
        if r.gpus and r.job_id not in held:
            held[r.job_id] = parse_gpus(r.gpus)
    out: dict[tuple[str, int], set[str]] = {}
    for job, gpus in held.items():
        if job in stopped:
            continue
        for node, idx in gpus.items():
            for g in idx:
                out.setdefault((node, g), set()).add(job)
    return out
