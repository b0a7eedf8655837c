"""The rules of reconciliation (pure): from a job's row and what Slurm reports now to its next state,
and the counting of the time and work Slurm ran it. ``reconcile.py`` applies them every round.

Slurm is the truth for *what happened* (a job finished, was cancelled, vanished, was released or
requeued by hand); the database is the truth for *what the daemon meant* (it signalled a job to
preempt it; it placed a job with this exact assignment). A job Slurm runs is the daemon's only when
its AdminComment equals the assignment the daemon recorded before releasing it, so an interrupted
start, a hand-released job and a stale assignment are told apart without guessing. Every rule is a
row of the table in docs/daemon.md ("Reconciliation").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

from ...slurm import SlurmJob, SlurmJobState
from ..state.journal import NEW, JobFacts
from ..state.store import LOST, PENDING, PLACED_STATES, PREEMPTING, RUNNING, STARTING, TERMINAL_STATES, JobUpdate
from .observe import ManagedJob

Followup = Literal["", "requeue", "hold", "evict"]
ADMIN_HOLD = "JobHeldAdmin"


@dataclass(frozen=True)
class Transition:
    state: str
    reason: str = ""
    followup: Followup = ""  # requeue: finish/perform a preemption; hold: put a released job back on hold;
    # evict: requeue-hold at once, no grace (it runs without an assignment from the daemon)
    event: str = ""  # something an admin should see (logged and stored as an event)
    adopt: bool = False  # take the assignment found in Slurm as the job's placement (database was lost)
    clear_placement: bool = False


def finished_state(sj: SlurmJob) -> str:
    return sj.state.value if sj.state.value in TERMINAL_STATES else "FAILED"


def transition(f: JobFacts, mj: ManagedJob | None, now: float, start_timeout_s: float,
               own_hold: bool = False) -> Transition:
    """``own_hold``: the daemon's store records an administrator hold of this job as the daemon's own."""
    if mj is None:
        if f.state in TERMINAL_STATES:
            return Transition(f.state)
        return Transition(LOST, "vanished from Slurm (finished longer ago than MinJobAge, or left the partition)",
                          event="job vanished from Slurm while the daemon was not looking", clear_placement=True)
    sj = mj.slurm
    ours = bool(f.assignment) and sj.admin_comment == f.assignment
    if mj.meta is None:
        if sj.state.is_finished:
            return Transition(finished_state(sj), clear_placement=True)
        if sj.state.is_active:
            return Transition(PREEMPTING, f"invalid tesserae metadata: {mj.meta_error}", followup="requeue",
                              event="a job with invalid metadata was running: requeue-held")
        return Transition(PENDING, f"invalid tesserae metadata: {mj.meta_error} (fix the Comment or resubmit)",
                          followup="" if sj.held else "hold")

    if sj.state.is_finished:
        if f.state in TERMINAL_STATES and f.state != LOST:
            return Transition(f.state)
        code = f" (exit code {sj.exit_code})" if sj.exit_code else ""
        return Transition(finished_state(sj), f"{sj.state.value.lower()}{code}", clear_placement=True)

    if sj.state.is_active:
        if f.state == PREEMPTING:
            return Transition(PREEMPTING, "preemption in progress", followup="requeue")
        if sj.state is SlurmJobState.COMPLETING:
            return Transition(f.state if f.state != NEW else PENDING)
        if ours and f.state in PLACED_STATES:
            return Transition(RUNNING)
        if f.state == NEW and mj.assignment is not None and mj.assignment.job_id == f.job_id:
            return Transition(RUNNING, "adopted: running on the assignment found in Slurm", adopt=True,
                              event="adopted a running job the database did not know (state file replaced?)")
        return Transition(PENDING, "started outside tesserae: stopped and held", followup="evict",
                          event="running without the daemon's current assignment (released by hand?): requeue-held",
                          clear_placement=True)

    # pending
    if sj.held:
        if (sj.admin_held or sj.reason == ADMIN_HOLD) and not own_hold:
            return Transition(PENDING, "held by an administrator (scontrol release to let tesserae schedule it)",
                              clear_placement=True)
        event = ""
        if f.state in PLACED_STATES:
            event = "placed job is held again (requeued or held outside tesserae, or an interrupted start)"
        elif f.state in TERMINAL_STATES:
            event = f"finished job ({f.state}) is back in the queue (requeued by hand)"
        return Transition(PENDING, "", event=event, clear_placement=True)
    if f.state == RUNNING:  # it ran and is queued again unheld: `scontrol requeue` by its owner, or Slurm's
        # own requeue (node failure). Slurm would start it again by itself once its BeginTime passes.
        return Transition(PENDING, "", followup="hold", event="requeued outside tesserae: held again",
                          clear_placement=True)
    if f.state in PLACED_STATES and ours:
        if f.placed_at is not None and now - f.placed_at > start_timeout_s:
            why = sj.reason or "no reason given"
            return Transition(PENDING, f"Slurm did not start it within {start_timeout_s:g} s ({why})",
                              followup="hold", event=f"released job did not start ({why}): held again",
                              clear_placement=True)
        return Transition(STARTING)
    return Transition(PENDING, "", followup="hold", event="released outside tesserae: held again",
                      clear_placement=True)


class Counted(NamedTuple):
    """A job's run-time counters after counting what Slurm ran (the row's columns of the same names)."""

    executed_time: float  # wall seconds
    run_start: float | None  # Slurm's start time of the run counted (None: no run open)
    run_counted: float  # seconds of that run already counted
    work_done: float  # seconds of work at the best speed alone: each counted second x the placement's speed

    def onto(self, update: JobUpdate, num_gpus: int) -> JobUpdate:
        """``update`` with these counters and the GPU-seconds they make."""
        return replace(update, **self.columns(num_gpus))

    def columns(self, num_gpus: int) -> dict[str, Any]:
        """These counters and the GPU-seconds they make, by column."""
        return {"executed_time": self.executed_time, "run_start": self.run_start, "run_counted": self.run_counted,
                "work_done": self.work_done, "attained_service": self.executed_time * num_gpus}


def _count(f: JobFacts, seconds: float, run_start: float | None, run_counted: float) -> Counted:
    """``seconds`` more of run time, at the speed the job was placed to run at since the last look."""
    return Counted(f.executed_time + seconds, run_start, run_counted, f.work_done + seconds * f.speed)


def account(f: JobFacts, sj: SlurmJob | None, now: float) -> Counted:
    """The counters after counting the wall time Slurm ran the job.

    Counting is incremental and keyed by Slurm's start time of the run, so a restart of the daemon
    neither loses nor double-counts a run; the tail of a run that ended while nobody looked is
    taken from Slurm's end time when the job finished, and from the requeue itself otherwise
    (the preemption path calls ``close_run``). The work done is counted at the speed the row holds,
    which is last round's: the speed the job ran at since the last look."""
    if sj is None or sj.start_time is None:
        return Counted(f.executed_time, f.run_start, f.run_counted, f.work_done)
    start = float(sj.start_time)
    end = float(sj.end_time) if sj.end_time is not None else now
    counted = f.run_counted if f.run_start == start else 0.0
    elapsed = max(0.0, end - start)
    return _count(f, max(0.0, elapsed - counted), start, max(counted, elapsed))


def close_run(f: JobFacts, now: float) -> Counted:
    """Count the rest of the current run up to ``now`` (the job was just requeued) and close it."""
    if f.run_start is None:
        return Counted(f.executed_time, None, 0.0, f.work_done)
    return _count(f, max(0.0, now - f.run_start - f.run_counted), None, 0.0)  # run_counted >= 0
