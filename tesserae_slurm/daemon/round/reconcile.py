"""Reconcile: bring every job's row in line with what Slurm shows now, and say what must follow.

New managed jobs get a row; each row moves as ``transitions.transition`` rules and counts the time and
work Slurm ran it (``transitions.account``); events go to the log and the events table. What the rows
cannot settle alone comes back as ``Followups``: preemptions to finish, released jobs to hold again,
jobs started by hand to evict. The guard carries them out (``guard.py``), before the decision.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..state.gpuset import format_gpus
from ..state.journal import JobFacts, Journal
from ..state.store import NO_PLACEMENT, PENDING, TERMINAL_STATES, JobUpdate
from .actions import StopItem, assigned_gpus
from .observe import ManagedJob, Snapshot
from .transitions import Transition, account, transition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Followups:
    requeue: list[StopItem] = field(default_factory=list)  # finish a preemption; stop a job with bad metadata
    hold: list[str] = field(default_factory=list)  # released outside tesserae: hold again
    evict: list[str] = field(default_factory=list)  # running without the daemon's assignment: requeue-hold now

    def __bool__(self) -> bool:
        return bool(self.requeue or self.hold or self.evict)


def reconcile(journal: Journal, snap: Snapshot, own_holds: set[str], start_timeout_s: float,
              round_id: int | None) -> Followups:
    """``own_holds``: the jobs whose administrator hold is the daemon's own (``guard.Guard.own_holds``)."""
    stored = journal.facts(snap.jobs)
    new = [seen for job_id, seen in snap.jobs.items()
           # one finished before the daemon ever saw it: nothing to schedule or account
           if job_id not in stored and not seen.slurm.state.is_finished]
    journal.insert_jobs([(seen.slurm, seen.meta) for seen in new], snap.time)
    journal.seen_active(snap.time)  # so a row written below is one whose job changed
    facts = dict(stored)
    for seen in new:
        facts[seen.id] = JobFacts(seen.id, num_gpus=seen.meta.num_gpus if seen.meta else 1)
    out = Followups()
    updates: dict[str, JobUpdate] = {}
    for job_id, f in facts.items():
        mj = snap.jobs.get(job_id)
        t = transition(f, mj, snap.time, start_timeout_s, own_hold=job_id in own_holds)
        updates[job_id] = _update(f, mj, t, snap.time)
        if t.event:
            log.warning("job %s: %s", job_id, t.event)
            journal.event(snap.time, "reconcile", t.event, job_id, round_id)
        if t.followup == "requeue":
            out.requeue.append(StopItem("requeue", job_id, assigned_gpus(f.assignment)))
        elif t.followup == "hold":
            out.hold.append(job_id)
        elif t.followup == "evict":
            out.evict.append(job_id)
    journal.update_jobs(updates, known=stored)  # the new rows were written whole
    return out


def _update(f: JobFacts, mj: ManagedJob | None, t: Transition, now: float) -> JobUpdate:
    """The row's new columns: the transition's state and reason, and what Slurm says of the job's run (last_seen:
    ``Journal.seen_active`` wrote it for the active rows)."""
    cols: dict[str, Any] = {"state": t.state}
    if f.state in TERMINAL_STATES:
        cols["last_seen"] = now
    if t.reason or t.state != f.state:
        cols["reason"] = t.reason
    if mj is not None:
        sj = mj.slurm
        cols.update(account(f, sj, now).columns(f.num_gpus), slurm_state=sj.state.value, restarts=sj.restart_count,
                    name=sj.name)
        ran = sj.state.is_active or (sj.end_time is not None and sj.start_time is not None
                                     and sj.end_time > sj.start_time)
        if sj.start_time is not None and ran:
            cols["first_start"] = float(sj.start_time)  # written only if none yet
        if sj.state.is_finished:
            cols.update(exit_code=sj.exit_code, finished_at=float(sj.end_time or now))
        if t.adopt and mj.assignment is not None:
            a = mj.assignment
            cols.update(assignment=sj.admin_comment, assign_round=a.round_id, gpus=format_gpus(a.gpus),
                        nodes=",".join(sorted(a.gpus)), packed_with=a.partner, strategy=a.strategy)
    if t.clear_placement and t.state in TERMINAL_STATES:
        return JobUpdate(**cols).ended(mj.slurm.nodes if mj is not None else ())
    if t.clear_placement:
        cols.update(NO_PLACEMENT)
        if t.state == PENDING and f.run_start is not None and (mj is None or mj.slurm.start_time is None):
            cols.update(run_start=None, run_counted=0.0)
    return JobUpdate(**cols)
