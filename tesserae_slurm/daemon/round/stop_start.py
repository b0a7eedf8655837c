"""The protocol of stopping and starting jobs through Slurm, recording intent first and the outcome after.

``apply.py`` orders a round's stops and starts; this module carries each out. Stop: signal every job
to preempt or migrate (checkpoint signal to the batch shell), wait until they exit or the grace
period ends, requeue-hold them, and wait until Slurm has them pending again; the signal and the
requeue-hold are one Slurm call each for all the jobs due at once, and the waits look at those jobs
alone (``list_jobs_brief``), never the whole queue. Start: write each job's
assignment into its AdminComment, pin its node list and make it eligible now (one `scontrol update` per
job, ``slurm.parallel_starts`` of them in flight at once: the jobs are held, so their order is the
release's), then release all of them with one call, in the policy's order. Every step tolerates having
been done already (a restarted daemon may repeat it), and a start never goes to GPUs that a job which
failed to stop still holds: the daemon keeps its own GPU accounting and never double-books a GPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...harness.assignment import EVERY_KEY, REPORTS_KEY, STOPS_KEY
from ...site.config import SiteConfig
from ...slurm import SlurmBackend, SlurmCommandError, SlurmError, SlurmJob, SlurmJobState
from ...slurm.fan_out import fan_out
from ..feedback.stop_records import checkpointed, forget
from ..service import failpoints
from ..state.gpuset import format_gpus
from ..state.journal import Intent, Journal
from ..state.store import PENDING, PREEMPTING, STARTING, JobUpdate
from .actions import Action, StopItem, Target
from .transitions import account, close_run, finished_state

log = logging.getLogger(__name__)
# After requeue-hold, how long the round waits for Slurm to kill the job (KillWait) and list it pending;
# a job still not gone is carried over to the next round instead of holding this one up.
REQUEUE_SETTLE_S = 15.0
# slurmd revokes a killed job's credential with one-second resolution: a requeued job launched again
# within the same second is killed as "Job credential revoked" (seen on 22.05). Wait this long first.
RELAUNCH_GAP_S = 2.0
# How often a stop's grace looks for the job's stop record (one small file per stopping job).
RECORD_POLL_S = 0.1


@dataclass(frozen=True)
class Stopping:
    """Stops signalled and not yet requeue-held (between ``begin_stops`` and ``finish_stops``)."""

    round_id: int
    items: tuple[StopItem, ...]
    action_ids: Mapping[str, int]
    to_hold: tuple[str, ...]


@dataclass
class ApplyResult:
    stopped: set[str] = field(default_factory=set)
    ended: dict[str, str] = field(default_factory=dict)  # job -> how it ended while being stopped
    carried: dict[str, str] = field(default_factory=dict)  # stops left for the next round (GPUs stay booked)
    started: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _gone(sj: SlurmJob | None) -> bool:
    """No process of the job runs any more (finished, or pending after a requeue)."""
    return sj is None or sj.state.is_finished or sj.state is SlurmJobState.PENDING


class Applier:
    def __init__(self, backend: SlurmBackend, journal: Journal, cfg: SiteConfig, stop: threading.Event,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 poll_s: float = 0.5) -> None:
        self.backend, self.journal, self.cfg, self.stop = backend, journal, cfg, stop
        self.clock, self.sleep, self.poll_s = clock, sleep, poll_s
        self._stopped_at: dict[str, float] = {}  # job -> when its last run was stopped by this process
        self._signalled_at: dict[str, float] = {}  # job -> when this process sent it the checkpoint signal

    # ---- observation during the protocol ----------------------------------------------------------
    def _jobs(self, ids: Iterable[str]) -> dict[str, SlurmJob] | None:
        """The stopping jobs ``ids`` as Slurm has them now (one it no longer knows is absent)."""
        try:
            return {str(j.job_id): j for j in self.backend.list_jobs_brief([int(j) for j in ids])}
        except SlurmError as exc:
            log.warning("cannot list jobs while applying: %s", exc)
            return None

    def _wait(self, ids: Iterable[str], done: Callable[[SlurmJob | None], bool],
              deadline: float) -> dict[str, SlurmJob]:
        """Poll squeue until ``done`` holds for every id, ``deadline`` passes or the daemon is asked to
        stop (SIGTERM is heeded within one poll); returns the last view."""
        ids = list(ids)
        view: dict[str, SlurmJob] = {}
        while True:
            jobs = self._jobs(ids)
            if jobs is not None:
                view = jobs
                if all(done(jobs.get(j)) for j in ids):
                    return view
            if self.clock() >= deadline or self.stop.is_set():
                return view
            self.stop.wait(min(self.poll_s, max(0.0, deadline - self.clock())))

    # ---- phase 1: stop ----------------------------------------------------------------------------
    def stop_jobs(self, round_id: int, items: Sequence[StopItem], slurm: Mapping[str, SlurmJob],
                  result: ApplyResult) -> None:
        """Signal, wait out the grace period, requeue-hold: both halves at once (reconciliation's stops)."""
        self.finish_stops(self.begin_stops(round_id, items, slurm, result), result)

    def begin_stops(self, round_id: int, items: Sequence[StopItem], slurm: Mapping[str, SlurmJob],
                    result: ApplyResult) -> Stopping:
        """Record the intents and send the checkpoint signal; the caller may start other jobs meanwhile."""
        if not items:
            return Stopping(round_id, (), {}, ())
        now = self.clock()
        intents = [Intent(it.kind, it.job_id,
                          {"from": format_gpus(it.previous or {}), "to": format_gpus(it.target or {})},
                          JobUpdate(state=PREEMPTING)) for it in items]
        action_ids = dict(zip((it.job_id for it in items), self.journal.record_intents(round_id, intents, now),
                              strict=True))
        failpoints.hit("after-intent")

        to_hold: list[str] = []
        to_signal: list[str] = []
        for it in items:
            sj = slurm.get(it.job_id)
            if sj is not None and sj.state is SlurmJobState.PENDING and not sj.held:
                to_hold.append(it.job_id)  # released but not started yet: just hold it again
            elif sj is not None and sj.state.is_active and it.job_id not in self._signalled_at:
                to_signal.append(it.job_id)  # (a stop carried over keeps the grace of its first signal)
        if to_signal:
            self._signal(to_signal)
        signalled = [it.job_id for it in items if it.job_id in self._signalled_at]
        if signalled:
            log.info("round %d: signalled %s; grace period up to %gs", round_id, ",".join(signalled),
                     self.cfg.preemption.grace_seconds)
        return Stopping(round_id, tuple(items), action_ids, tuple(to_hold))

    def finish_stops(self, st: Stopping, result: ApplyResult) -> None:
        """Wait out the grace period (a job that exits in it has ended: the job side keeps a checkpointed
        job alive until the requeue-hold), requeue-holding each job as soon as its launcher records that
        its payload checkpointed and exited (``preemption.stop_records_dir``), and the rest at the end:
        ``requeuehold Incomplete``, which Slurm applies only to jobs still running, so an ended job stays
        ended. A job not gone within the bounded settle time is carried over: it stays PREEMPTING, its
        GPUs stay booked, and the next round finishes it."""
        if not st.items:
            return
        requeued: list[str] = []
        signalled = [it.job_id for it in st.items if it.job_id in self._signalled_at]
        if signalled:
            deadline = max(self._signalled_at[j] for j in signalled) + self.cfg.preemption.grace_seconds
            self._await_stops(signalled, deadline, requeued, result)
        if self.stop.is_set():  # SIGTERM mid-grace: the next start finishes these preemptions
            for it in st.items:
                why = "daemon stopping: the preemption is finished by the next start"
                result.skipped[it.job_id] = why
                self.journal.finish_action(st.action_ids[it.job_id], "skipped", self.clock(), why)
            return

        self._requeue([it.job_id for it in st.items if it.job_id not in st.to_hold and it.job_id not in requeued],
                      requeued, result)
        if st.to_hold:
            try:
                self.backend.hold([int(j) for j in st.to_hold])
                requeued.extend(st.to_hold)
            except SlurmError as exc:
                result.failed.update({j: str(exc) for j in st.to_hold})
        view = self._wait(requeued, _gone, self.clock() + REQUEUE_SETTLE_S) if requeued else {}

        now = self.clock()
        # the stopped jobs' rows at once: reading them one by one read every active job's row each time
        all_facts = self.journal.facts([it.job_id for it in st.items], active=False)
        for it in st.items:
            aid = st.action_ids[it.job_id]
            sj = view.get(it.job_id)
            if it.job_id in result.failed:
                self.journal.finish_action(aid, "failed", now, result.failed[it.job_id])
                continue
            facts = all_facts[it.job_id]
            if sj is not None and sj.state.is_finished:  # ended on its own: recorded as ended, never run again
                state = finished_state(sj)
                counted = account(facts, sj, now)  # its last run stays on the row, as a job that ends unstopped
                why = f"ended ({state.lower()}) before the requeue-hold: not requeued"
                result.ended[it.job_id] = state
                self._signalled_at.pop(it.job_id, None)
                self.journal.finish_action(aid, "done", now, why, job_id=it.job_id, job_update=counted.onto(JobUpdate(
                    state=state, slurm_state=sj.state.value, reason=why, exit_code=sj.exit_code,
                    finished_at=float(sj.end_time or now)), facts.num_gpus).ended(sj.nodes))
                continue
            if not _gone(sj):
                why = "still running after requeue-hold: carried over to the next round (its GPUs stay booked)"
                result.carried[it.job_id] = why
                self.journal.finish_action(aid, "skipped", now, why)
                continue
            self._signalled_at.pop(it.job_id, None)
            update = close_run(facts, now).onto(JobUpdate(
                state=PENDING, reason={"migrate": f"migrating (round {st.round_id})",
                                       "preempt": f"preempted in round {st.round_id}"}.get(it.kind, "requeue-held")),
                facts.num_gpus).cleared()
            if it.kind == "migrate":
                update = replace(update, migrations_added=1)
            elif it.kind == "preempt":
                update = replace(update, preemptions_added=1)
            self.journal.finish_action(aid, "done", now, job_id=it.job_id, job_update=update)
            result.stopped.add(it.job_id)
            self._stopped_at[it.job_id] = now

    def _await_stops(self, ids: Sequence[str], deadline: float, requeued: list[str], result: ApplyResult) -> None:
        """Until ``deadline`` (the grace's end): drop each job Slurm no longer runs, and requeue-hold each
        whose stop record for the run signalled appears; squeue is asked every ``poll_s``, the records
        (a file each) every ``RECORD_POLL_S``."""
        records = self.cfg.preemption.stop_records_dir
        left, next_look = set(ids), 0.0
        view: dict[str, SlurmJob] = {}
        while left:
            if not records or self.clock() >= next_look:  # without records each wait is one poll already
                jobs = self._jobs(left)
                if jobs is not None:
                    view = jobs
                    left = {j for j in left if (sj := view.get(j)) is not None and sj.state.is_active}
                next_look = self.clock() + self.poll_s
            done = [j for j in sorted(left) if records and (sj := view.get(j)) is not None
                    and checkpointed(records, j, sj.restart_count, sj.user)]
            for j in done:
                log.info("job %s checkpointed %.1fs after the signal: requeue-held now", j,
                         self.clock() - self._signalled_at.get(j, self.clock()))
            self._requeue(done, requeued, result)
            for j in done:
                forget(records, j, view[j].restart_count)
                left.discard(j)
            if not left or self.clock() >= deadline or self.stop.is_set():
                return
            self.stop.wait(min(RECORD_POLL_S if records else self.poll_s, max(0.0, deadline - self.clock())))

    def _signal(self, ids: Sequence[str]) -> None:
        """The checkpoint signal to all of ``ids`` in one call. A job Slurm refuses has ended: the
        requeue-hold leaves it ended. Where the call failed as a whole, each job is signalled alone."""
        try:
            refused = self.backend.signal([int(j) for j in ids], self.cfg.preemption.signal, batch_only=True)
        except SlurmCommandError as exc:
            if len(ids) > 1:
                log.warning("batched signal failed (%s); signalling one by one", exc)
                for j in ids:
                    self._signal([j])
                return
            log.info("signal to job %s refused (%s): it has ended", ids[0], exc)
            return
        except SlurmError as exc:
            log.warning("could not signal job(s) %s: %s", ",".join(ids), exc)
            return
        now = self.clock()
        for j in ids:
            if int(j) in refused:  # it ended meanwhile: the requeue-hold below leaves it ended
                log.info("signal to job %s refused (%s): it has ended", j, refused[int(j)])
            else:
                self._signalled_at[j] = now
        failpoints.hit("after-signal")

    def _requeue(self, ids: Sequence[str], requeued: list[str], result: ApplyResult) -> None:
        """``requeuehold Incomplete`` of all of ``ids`` in one call: never brings an ended job back. Slurm
        tries every job of the list; where the call failed (a job it no longer knows), each is asked
        alone, which a job requeued already answers with success."""
        if not ids:
            return
        try:
            self.backend.requeue_hold([int(j) for j in ids])
            requeued.extend(ids)
            failpoints.hit("after-requeue")
            return
        except SlurmCommandError as exc:
            if len(ids) > 1:
                log.warning("batched requeue-hold failed (%s); requeue-holding one by one", exc)
                for j in ids:
                    self._requeue([j], requeued, result)
            elif "pending" in str(exc).lower():  # requeued already (by us before a crash, or by hand)
                requeued.append(ids[0])
            else:
                result.failed[ids[0]] = str(exc)
        except SlurmError as exc:
            result.failed.update({j: str(exc) for j in ids})

    # ---- phase 2: start ---------------------------------------------------------------------------
    def start_jobs(self, round_id: int, actions: Sequence[Action], occupied: Mapping[tuple[str, int], set[str]],
                   result: ApplyResult) -> None:
        ready: list[tuple[Action, Target]] = []  # with the target each one starts on
        skipped: dict[str, str] = {}
        for a in actions:
            t = a.target
            assert t is not None  # the plan gives every start and migration a target
            if a.job_id in result.ended:
                continue  # it ended while being stopped to move: recorded as ended, never started again
            if a.kind == "migrate" and a.job_id not in result.stopped:
                skipped[a.job_id] = "could not be stopped on its old GPUs"
                continue
            clash = sorted({j for n, idx in t.gpus.items() for g in idx
                            for j in occupied.get((n, g), set()) if j not in (t.partner, a.job_id)})
            if clash:
                skipped[a.job_id] = f"GPUs still held by job(s) {','.join(clash)}"
                continue
            ready.append((a, t))
        result.skipped.update(skipped)
        for job, why in skipped.items():
            log.warning("round %d: not starting job %s: %s", round_id, job, why)
            self.journal.event(self.clock(), "skipped", why, job, round_id)
        if not ready:
            return
        now = self.clock()
        pct = self.cfg.mps.thread_percentage
        fb = self.cfg.feedback  # where and how often the job reports its throughput (harness/report.py)
        extra = {REPORTS_KEY: fb.reports_dir, EVERY_KEY: f"{fb.report_every_s:g}"} if fb.enabled else {}
        if self.cfg.preemption.stop_records_dir:  # where the launcher records a checkpoint at a stop
            extra[STOPS_KEY] = self.cfg.preemption.stop_records_dir
        assignments = {a.job_id: a.assignment(round_id, pct, extra).encode() for a, _ in ready}
        intents = [Intent("start" if a.kind == "start" else "migrate-start", a.job_id,
                          {"gpus": format_gpus(t.gpus), "partner": t.partner, "strategy": t.strategy,
                           "assignment": assignments[a.job_id]},
                          JobUpdate(state=STARTING, assignment=assignments[a.job_id], assign_round=round_id,
                                    gpus=format_gpus(t.gpus), nodes=",".join(t.nodes), packed_with=t.partner,
                                    strategy=t.strategy, speed=t.speed, placed_at=now, reason=""))
                   for a, t in ready]
        action_ids = dict(zip((a.job_id for a, _ in ready), self.journal.record_intents(round_id, intents, now),
                              strict=True))
        failpoints.hit("after-intent")

        def place(item: tuple[Action, Target]) -> bool:
            a, t = item
            if self.stop.is_set():
                return False
            # the assignment travels with the node list: one Slurm call per started job
            self.backend.place(int(a.job_id), t.nodes, {"NumNodes": str(len(t.nodes)),
                                                        "AdminComment": assignments[a.job_id]})
            failpoints.hit("after-place")
            return True

        placed: list[Action] = []
        # each job's call its own (held jobs: none runs before the release), a few in flight at once
        for (a, _), out in zip(ready, fan_out(place, ready, self.cfg.slurm.parallel_starts), strict=True):
            if isinstance(out, SlurmError):
                result.failed[a.job_id] = str(out)
            elif out:
                placed.append(a)
            else:
                result.skipped[a.job_id] = "daemon stopping"
        recent = [self._stopped_at[a.job_id] for a in placed if a.job_id in self._stopped_at]
        if recent:
            wait = max(recent) + RELAUNCH_GAP_S - self.clock()
            if wait > 0:
                log.info("round %d: waiting %.1fs before relaunching requeued jobs (Slurm credential revocation)",
                         round_id, wait)
                self.sleep(wait)
        released = self._release([int(a.job_id) for a in placed], result)
        if released:
            failpoints.hit("after-release")

        now = self.clock()
        self.journal.finish_actions([action_ids[a.job_id] for a, _ in ready if a.job_id in released], "done", now)
        for a, _ in ready:
            aid = action_ids[a.job_id]
            if a.job_id in released:
                result.started.add(a.job_id)
            else:
                why = result.failed.get(a.job_id) or result.skipped.get(a.job_id, "not released")
                status = "skipped" if a.job_id in result.skipped else "failed"
                self.journal.finish_action(aid, status, now, why, job_id=a.job_id,
                                           job_update=JobUpdate(state=PENDING, reason=f"start failed: {why}").cleared())

    def _release(self, ids: list[int], result: ApplyResult) -> set[str]:
        if not ids:
            return set()
        try:
            self.backend.release(ids)
            return {str(i) for i in ids}
        except SlurmError as exc:
            log.warning("batched release failed (%s); releasing one by one", exc)
        done: set[str] = set()
        for i in ids:
            try:
                self.backend.release([i])
                done.add(str(i))
            except SlurmError as exc:
                result.failed[str(i)] = str(exc)
        return done
