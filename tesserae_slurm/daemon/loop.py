"""The daemon: its lifecycle (start, the loop of rounds, the checks between rounds, reload, pruning) and
the skeleton of one round, whose steps live in ``round/``, one module each.

A thin imperative shell around the same calls the simulator makes (``policy.rank`` then
``engine.decide``); everything it knows between rounds is in the state database, so a restarted
daemon continues where the last one stopped. Slurm being unreachable skips the round (logged,
recorded, counted) and the loop carries on. docs/architecture.md draws the round; docs/daemon.md
says what each step does to jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..model import InputError
from ..site.config import SiteConfig
from ..site.partition import scheduling_profile
from ..site.scheduler import engine_config, policy_options, site_policy
from ..slurm import SlurmBackend, SlurmError
from .feedback import stop_records
from .feedback.online import OnlineFeedback
from .operators import admin
from .round.apply import apply_plan, occupied
from .round.carry_out import carry_out
from .round.decide import decide_round
from .round.guard import Guard
from .round.inputs import InputBuilder
from .round.observe import Snapshot, observe
from .round.outcome import RoundResult, applied, finish_round, skip_round
from .round.reconcile import Followups, reconcile
from .round.record import record_decision, record_dry_run
from .round.start_between import Watch, carried_out, free_starts
from .round.stop_start import Applier, ApplyResult
from .round.throughput import take_reports
from .service.calls import RecordingBackend
from .service.metrics import Metrics, Phases
from .state.journal import Journal
from .state.store import PLACED_STATES, Store, acquire_lock

log = logging.getLogger(__name__)


class Daemon:
    def __init__(self, cfg: SiteConfig, backend: SlurmBackend, store: Store, *, dry_run: bool = False,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.backend = RecordingBackend(backend, clock)
        self.journal = Journal(store)
        self.metrics = Metrics(slurm_calls=self.backend.calls, slurm_errors=self.backend.errors)
        self.phases = Phases()  # where the last round's time went
        self.dry_run, self.clock, self.sleep = dry_run, clock, sleep
        # systemd watchdog (service/sdnotify.py): pinged in the pause between rounds, every heartbeat_s at most
        self.heartbeat: Callable[[], None] = lambda: None
        self.heartbeat_s = 1e9
        self.admin = admin.Standing({}, {}, [])  # operators' holds, drains and rules in force
        self.guard = Guard(self.backend, self.journal, clock)
        self.inputs = InputBuilder(self.journal)
        self.watch = Watch()  # the partition's jobs as last seen: a new one or one gone starts a pass
        self.stop_event = threading.Event()
        self.reload_event = threading.Event()
        self.configure(cfg)

    def configure(self, cfg: SiteConfig) -> None:
        self.cfg = cfg
        self.engine_config = engine_config(cfg)
        self.policy = site_policy(cfg)
        self.policy_key = f"{cfg.scheduler.policy}:{sorted(policy_options(cfg).items())!r}" + \
            (":shadow" if self.dry_run else "")
        stored = self.journal.load_policy_state(self.policy_key)
        self.pstate = stored if stored is not None else self.policy.initial_state()
        self.profile = scheduling_profile(cfg.scheduler.profile)
        self.feedback = OnlineFeedback(cfg, self.journal.store, self.profile)
        self.applier = Applier(self.backend, self.journal, cfg, self.stop_event, self.clock, self.sleep)
        if not self.dry_run:
            stop_records.ensure_dir(cfg.preemption.stop_records_dir)

    def request_stop(self) -> None:
        self.stop_event.set()

    # ---- the round ----------------------------------------------------------------------------------
    def run_round(self) -> RoundResult:
        t_round = time.perf_counter()
        self.phases.reset()
        rid = self.journal.begin_round(self.clock(), self.cfg.scheduler.policy, self.dry_run)
        try:
            return self._round(rid, t_round)
        except SlurmError as exc:
            return self._skip(rid, f"Slurm unavailable: {exc}")
        except InputError as exc:  # e.g. the configured profile does not know the cluster's GPU type
            return self._skip(rid, str(exc), status="failed")
        except Exception as exc:
            self._skip(rid, f"internal error: {exc!r}", status="failed")
            raise
        finally:
            self.journal.record_calls(rid, self.backend.drain())

    def _round(self, rid: int, t_round: float) -> RoundResult:
        # operators' requests since the last round, and what they keep in force
        with self.phases("reconcile"):
            self.admin = admin.take_requests(self.journal.store, self.cfg, rid)
        # 1-2. observe Slurm, reconcile every job's row with it; 3. operators' requeue and cancel
        snap, followups = self.look(rid)
        if self.admin.once and not self.dry_run and carry_out(
                self.admin.once, snap, self.applier, self.backend, self.journal.store, rid):
            snap, followups = self.look(rid)  # requeued or cancelled: decide on what Slurm says now
        # 4. guard: users cannot bypass the daemon; stops carried over from earlier rounds finish
        if not self.dry_run:
            with self.phases("reconcile"):
                failed = self.guard.enforce(rid, snap, followups, self.applier)
            if failed:
                return self._skip(rid, "reconciliation could not finish: " + failed)
            if followups:
                snap, _ = self.look(rid)
                with self.phases("reconcile"):
                    self.guard.secure(rid, snap, Followups(), ApplyResult())
        # 5. feedback: throughput reports of running jobs into the table the engine decides with
        if self.cfg.feedback.enabled and not self.dry_run:
            with self.phases("reconcile"):
                take_reports(self.feedback, self.journal, snap.time, rid)
        self.watch.saw(snap)  # the round decides on this: what it shows needs no start between rounds
        self.journal.update_round(rid, status="deciding", observe_ms=(time.perf_counter() - t_round) * 1e3)
        with self.phases("decide"):
            # 6. inputs: the schedulable jobs and the GPUs the placed ones hold
            inp = self.inputs.build(snap, self.cfg, self.profile, self.admin, self.dry_run)
            # 7. decide: rank, place, plan the Slurm actions
            rules = admin.node_rules(self.admin, inp.jobs) if self.admin.rules else {}
            profile, _ = self.feedback.decision_profile()
            decided = decide_round(self.policy, self.pstate, inp, snap, profile, self.cfg, self.engine_config, rules)
            self.pstate = decided.policy_state
        with self.phases("record"):
            self.journal.save_policy_state(self.policy_key, decided.policy_state)
            # 8. record the decision before anything reaches Slurm
            sources = self.feedback.sources(decided.decision, inp.jobs, inp.cluster)
            record_decision(self.journal, rid, inp, decided, sources, self.dry_run,
                            self.cfg.scheduler.profile if self.cfg.state.record_inputs else "")
            if self.dry_run:
                record_dry_run(self.journal, rid, decided.plan, decided.decision.placement, snap.time, self.clock())
                return finish_round(self.journal, self.metrics, rid, "dry-run", decided, "", t_round, self.clock)
        with self.phases("apply"):
            # 9. apply: stops, then starts, through Slurm
            result = apply_plan(rid, decided.plan, snap, inp.actual, self.applier, self.guard, self.journal,
                                self.metrics, self.stop_event)
            # 10. outcome
            status, error = applied(self.journal, decided.plan, result)
            return finish_round(self.journal, self.metrics, rid, status, decided, error, t_round, self.clock)

    def start_between(self) -> RoundResult | None:
        """Between rounds: start what the decision starts on GPUs that are free now, nothing else
        (round/start_between.py); recorded as a round of kind ``start`` when it starts anything."""
        t_pass = time.perf_counter()
        rid: int | None = None
        try:
            admin.ingest(self.journal.store, self.cfg, None)  # operators' holds, pins and drains count at once
            self.admin = admin.standing(self.journal.store)
            snap, followups = self.look(None)
            self.guard.secure(None, snap, followups, ApplyResult())  # finishing stops waits for the round
            if followups.evict or followups.hold:
                snap, _ = self.look(None)
            self.watch.saw(snap)
            inp = self.inputs.build(snap, self.cfg, self.profile, self.admin, False)
            rules = admin.node_rules(self.admin, inp.jobs) if self.admin.rules else {}
            profile, _ = self.feedback.decision_profile()
            decided = decide_round(self.policy, self.pstate, inp, snap, profile, self.cfg, self.engine_config, rules)
            chosen = free_starts(decided.plan, occupied(self.journal, inp.actual, set()))
            if not chosen:
                return None
            done = carried_out(decided, inp, chosen, {r.job_id: r for r in self.journal.rows(PLACED_STATES)})
            rid = self.journal.begin_round(snap.time, self.cfg.scheduler.policy, False, kind="start")
            self.journal.update_round(rid, status="applying", observe_ms=(time.perf_counter() - t_pass) * 1e3)
            record_decision(self.journal, rid, inp, done, self.feedback.sources(done.decision, inp.jobs, inp.cluster),
                            False)
            result = apply_plan(rid, done.plan, snap, inp.actual, self.applier, self.guard, self.journal,
                                self.metrics, self.stop_event)
            status, error = applied(self.journal, done.plan, result, count_rounds=False)
            return finish_round(self.journal, self.metrics, rid, status, done, error, t_pass, self.clock, kind="start")
        except (SlurmError, InputError) as exc:  # the round that follows says so (and records it)
            self.watch.forget()  # the next poll tries again
            if rid is not None:
                return self._skip(rid, f"Slurm unavailable: {exc}" if isinstance(exc, SlurmError) else str(exc),
                                  status="skipped" if isinstance(exc, SlurmError) else "failed")
            log.debug("start between rounds skipped: %s", exc)
            return None
        except Exception as exc:
            self.watch.forget()
            if rid is not None:
                self._skip(rid, f"internal error: {exc!r}", status="failed")
            raise
        finally:
            self.journal.record_calls(rid, self.backend.drain())

    def look(self, rid: int | None) -> tuple[Snapshot, Followups]:
        """Observe, then reconcile every job's row with what Slurm shows."""
        with self.phases("observe"):
            snap = observe(self.backend, self.cfg, self.clock(), admin.drain_reasons(self.admin))
        self.metrics.saw(sum(n.gpus for n in snap.nodes), {j: mj.slurm.account for j, mj in snap.jobs.items()})
        with self.phases("reconcile"):
            return snap, reconcile(self.journal, snap, self.guard.own_holds(snap), self.cfg.slurm.start_timeout_s,
                                   rid)

    def poll_between(self) -> None:
        """The cheap look between rounds (one squeue; on 24.11 and later, the lighter listing of every
        job's state first, and the partition's only when something moved); a start pass when a job of the
        partition came or went."""
        try:
            states = self.backend.job_states()
            if states is not None and not self.watch.moved(states):
                return
            news = self.watch.news(self.backend.poll_jobs(self.cfg.slurm.partition))
        except SlurmError as exc:
            self.watch.forget()  # what moved meanwhile is news at the next poll that works
            log.debug("poll between rounds failed: %s", exc)
            return
        if news:
            log.debug("between rounds: %s", news)
            self.start_between()

    def _skip(self, rid: int, why: str, status: str = "skipped") -> RoundResult:
        return skip_round(self.journal, self.metrics, rid, why, status, self.clock)

    # ---- running -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Take the state's lock (refused while another daemon runs), then settle what a dead one left."""
        acquire_lock(self.cfg.state.database)
        now = self.clock()
        for a in self.journal.interrupt_stale_intents(now):
            self.journal.event(now, "recovery", f"{a.kind} of job {a.job_id} in round {a.round_id} was interrupted",
                               a.job_id, a.round_id)
        self.journal.event(now, "daemon", f"started (policy {self.cfg.scheduler.policy}"
                                          f"{', dry run' if self.dry_run else ''})")

    def run_forever(self, max_rounds: int | None = None, reload: Callable[[], SiteConfig] | None = None) -> None:
        self.start()
        done = 0
        while not self.stop_event.is_set():
            if self.reload_event.is_set() and reload is not None:
                self.reload_event.clear()
                self._reload(reload)
            t0 = self.clock()
            try:
                self.run_round()
            except Exception:  # a bug in one round must not stop the scheduler of a whole partition
                log.exception("round failed")
            done += 1
            if max_rounds is not None and done >= max_rounds:
                break
            self._prune(t0 + self.cfg.scheduler.round_seconds)  # retention: only in the pause
            self._between_rounds(t0 + self.cfg.scheduler.round_seconds)
        self.journal.event(self.clock(), "daemon", "stopped")

    def guard_check(self) -> None:
        """The light check between rounds: a job started by hand is stopped within ``guard_seconds``."""
        if self.dry_run:
            return
        try:
            snap, followups = self.look(None)
            self.guard.secure(None, snap, followups, ApplyResult())
        except SlurmError as exc:
            log.debug("guard check skipped: %s", exc)
        finally:
            self.journal.record_calls(None, self.backend.drain())

    def _between_rounds(self, next_round: float) -> None:
        """Wait for the next round, polling the partition every ``slurm.poll_seconds`` (starts between
        rounds) and running the guard check every ``slurm.guard_seconds`` meanwhile, and pinging the
        systemd watchdog (service/sdnotify.py) at least every ``heartbeat_s``."""
        every, poll = self.cfg.slurm.guard_seconds, 0.0 if self.dry_run else self.cfg.slurm.poll_seconds
        next_guard = self.clock() + every if every > 0 else float("inf")
        next_poll = self.clock() + poll if poll > 0 else float("inf")
        while not self.stop_event.is_set():
            self.heartbeat()
            left = next_round - self.clock()
            if left <= 0:
                return
            if self.stop_event.wait(max(0.0, min(left, next_guard - self.clock(), next_poll - self.clock(),
                                                 self.heartbeat_s))) or self.clock() >= next_round:
                return
            if self.clock() >= next_poll:
                next_poll = self.clock() + poll
                try:
                    self.poll_between()
                except Exception:  # noqa: BLE001 - the next round decides anyway
                    log.exception("start between rounds failed")
            if self.clock() >= next_guard:
                next_guard = self.clock() + every
                try:
                    self.guard_check()
                except Exception:  # noqa: BLE001 - the next round reconciles anyway
                    log.exception("guard check failed")

    def _prune(self, next_round: float) -> None:
        from .state.retention import prune
        try:
            done = prune(self.journal.store, self.cfg.retention, self.clock(), until=next_round, clock=self.clock)
        except Exception:  # retention must never stop scheduling
            log.exception("retention: pruning failed; trying again after the next round")
            return
        if done.rounds or done.jobs:
            log.info("retention: pruned %d rounds and %d ended jobs", done.rounds, done.jobs)

    def _reload(self, load: Callable[[], SiteConfig]) -> None:
        try:
            cfg = load()
            if cfg.state.database != self.cfg.state.database or cfg.metrics.listen != self.cfg.metrics.listen:
                log.warning("state.database and metrics.listen take effect only after a restart")
            self.configure(cfg)
        except (InputError, OSError) as exc:
            log.error("configuration not reloaded, keeping the running one: %s", exc)
            self.journal.event(self.clock(), "config", f"reload failed: {exc}")
            return
        log.info("configuration reloaded (policy %s, round %gs)", cfg.scheduler.policy, cfg.scheduler.round_seconds)
        self.journal.event(self.clock(), "config", "reloaded")
