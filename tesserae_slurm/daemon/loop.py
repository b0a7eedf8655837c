"""The daemon's round: observe -> reconcile -> decide (pure) -> persist intent -> apply -> record outcome.

A thin imperative shell around the same calls the simulator makes (``policy.rank`` then
``engine.decide``); everything it knows between rounds is in the state database, so a restarted
daemon continues where the last one stopped. Slurm being unreachable skips the round (logged,
recorded, counted) and the loop carries on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ..configs import get_config
from ..engine import RoundRequest, decide
from ..model import Cluster, InputError, Job, JobView, Placement, RoundDecision
from ..model.meta import JobMeta
from ..policies.base import SchedulingInput
from ..policies.registry import make_policy
from ..profiles.speeds import SpeedModel
from ..site.config import DaemonConfig, engine_config
from ..site.partition import scheduling_profile
from ..slurm import SlurmBackend, SlurmError
from ..slurm.types import SlurmJob
from ..tsbatch.options import check_meta
from ..tsbatch.submit import shape_from_nodes
from .feedback.online import OnlineFeedback
from .operators import admin
from .round.actions import RoundPlan, plan_round
from .round.applier import Applier, ApplyResult, StopItem
from .round.guard import load_holds, save_holds, still_held, to_secure
from .round.observe import Snapshot, build_snapshot, in_slurm_indices
from .round.transitions import JobFacts, account, transition
from .service.calls import RecordingBackend
from .service.metrics import Metrics
from .state.gpuset import GpuMap, format_gpus, parse_gpus
from .state.journal import Intent, Journal, RoundCounts
from .state.store import PENDING, PLACED_STATES, PREEMPTING, RUNNING, STARTING, JobUpdate, Store, acquire_lock

log = logging.getLogger(__name__)
SCHEDULABLE = (PENDING, STARTING, RUNNING)


@dataclass(frozen=True)
class RoundResult:
    round_id: int
    status: str  # applied | partial | dry-run | skipped | failed
    error: str = ""
    decision: RoundDecision | None = None
    plan: RoundPlan | None = None


@dataclass(frozen=True)
class RoundInputs:
    cluster: Cluster
    jobs: Mapping[str, Job]
    views: tuple[JobView, ...]  # arrival order
    actual: Mapping[str, GpuMap]  # GPUs each placed job holds (daemon accounting or shadow)
    current: Placement
    excluded: Mapping[str, str] = field(default_factory=dict)  # job -> why it is not scheduled
    gpu_index: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # see Snapshot.gpu_index
    held_by_others: tuple[str, ...] = ()  # GPUs of the managed nodes that foreign jobs hold


def current_placement(cluster: Cluster, actual: Mapping[str, GpuMap],
                      gpu_index: Mapping[str, tuple[int, ...]] | None = None) -> tuple[Placement, list[str]]:
    """The accounting as a Placement over the schedulable nodes; returns problems found (never silent).

    ``gpu_index`` maps the engine's GPU indices to Slurm's on nodes where foreign jobs hold some GPUs;
    a job on a GPU a foreign job holds now is left out, so the plan moves or stops it."""
    slots: dict[str, list[set[str]]] = {n.name: [set() for _ in range(n.num_gpus)] for n in cluster.nodes}
    engine = {n: {real: k for k, real in enumerate(idx)} for n, idx in (gpu_index or {}).items()}
    problems: list[str] = []
    for job, gpus in sorted(actual.items()):
        for node, idx in gpus.items():
            for real in idx:
                g = engine[node].get(real, -1) if node in engine else real
                if node not in slots or g < 0 or g >= len(slots[node]):
                    continue  # its node is not schedulable now: the plan moves or stops the job
                if len(slots[node][g]) >= 2:
                    problems.append(f"{node} GPU {g} would hold {sorted(slots[node][g] | {job})}")
                    continue
                slots[node][g].add(job)
    return Placement({n: tuple(frozenset(s) for s in gs) for n, gs in slots.items()}), problems


class Daemon:
    def __init__(self, cfg: DaemonConfig, backend: SlurmBackend, store: Store, *, dry_run: bool = False,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.backend = RecordingBackend(backend, clock)
        self.journal = Journal(store)
        self.metrics = Metrics(slurm_calls=self.backend.calls, slurm_errors=self.backend.errors)
        self.dry_run, self.clock, self.sleep = dry_run, clock, sleep
        # systemd watchdog (daemon/sdnotify.py): pinged in the pause between rounds, every heartbeat_s at most
        self.heartbeat: Callable[[], None] = lambda: None
        self.heartbeat_s = 1e9
        self.admin = admin.Standing({}, {}, [])  # operators' holds and drains in force (daemon/admin.py)
        self.slurm_priority: dict[str, int] = {}  # job -> last priority Slurm gave it unheld (site_priority)
        self.stop_event = threading.Event()
        self.reload_event = threading.Event()
        self.configure(cfg)

    # ---- configuration ------------------------------------------------------------------------------
    def configure(self, cfg: DaemonConfig) -> None:
        named = get_config(cfg.scheduler.policy)
        options = {**dict(named.policy_options), **dict(cfg.scheduler.policy_options)}
        self.cfg = cfg
        self.engine_config = engine_config(cfg)
        self.policy = make_policy(named.policy, **options)
        self.policy_key = f"{cfg.scheduler.policy}:{sorted(options.items())!r}" + (":shadow" if self.dry_run else "")
        stored = self.journal.load_policy_state(self.policy_key)
        self.pstate = stored if stored is not None else self.policy.initial_state()
        self.profile = scheduling_profile(cfg.scheduler.profile)
        self.feedback = OnlineFeedback(cfg, self.journal.store, self.profile)
        self.applier = Applier(self.backend, self.journal, cfg, self.stop_event, self.clock, self.sleep)

    def request_stop(self) -> None:
        self.stop_event.set()

    # ---- 1. observe ---------------------------------------------------------------------------------
    def observe(self) -> Snapshot:
        jobs = self.backend.list_jobs()  # every partition: foreign jobs may share the managed nodes
        nodes = self.backend.list_nodes(self.cfg.slurm.partition)
        return admin.drain_snapshot(build_snapshot(self.clock(), jobs, nodes, self.cfg), self.admin, self.cfg)

    # ---- 2. reconcile -------------------------------------------------------------------------------
    def reconcile(self, snap: Snapshot, round_id: int | None) -> tuple[list[StopItem], list[str], list[str]]:
        """Bring every job row in line with Slurm; returns the preemptions to finish, the jobs to hold
        and the jobs to requeue-hold at once (running without the daemon's assignment)."""
        holds = self._own_holds(snap)
        facts = self.journal.facts(snap.jobs)
        for job_id, seen in snap.jobs.items():
            if job_id not in facts and seen.slurm.state.is_finished:
                continue  # finished before the daemon ever saw it: nothing to schedule or account
            if job_id not in facts:
                self.journal.insert_job(seen, snap.time)
                facts[job_id] = JobFacts(job_id, num_gpus=seen.meta.num_gpus if seen.meta else 1)
        requeue: list[StopItem] = []
        hold: list[str] = []
        evict: list[str] = []
        updates: dict[str, JobUpdate] = {}
        for job_id, f in facts.items():
            mj = snap.jobs.get(job_id)
            t = transition(f, mj, snap.time, self.cfg.slurm.start_timeout_s, own_hold=job_id in holds)
            up = JobUpdate(state=t.state, last_seen=snap.time)
            if t.reason or t.state != f.state:
                up = replace(up, reason=t.reason)
            if mj is not None:
                sj = mj.slurm
                up = replace(account(f, sj, snap.time).onto(up, f.num_gpus), slurm_state=sj.state.value,
                             restarts=sj.restart_count, name=sj.name)
                ran = sj.state.is_active or (sj.end_time is not None and sj.start_time is not None
                                             and sj.end_time > sj.start_time)
                if sj.start_time is not None and ran:
                    up = replace(up, first_start=float(sj.start_time))  # written only if none yet
                if sj.state.is_finished:
                    up = replace(up, exit_code=sj.exit_code, finished_at=float(sj.end_time or snap.time))
                if t.adopt and mj.assignment is not None:
                    a = mj.assignment
                    up = replace(up, assignment=sj.admin_comment, assign_round=a.round_id, gpus=format_gpus(a.gpus),
                                 nodes=",".join(sorted(a.gpus)), packed_with=a.partner, strategy=a.strategy)
            if t.clear_placement:
                up = up.cleared()
                if t.state == PENDING and f.run_start is not None and (mj is None or mj.slurm.start_time is None):
                    up = replace(up, run_start=None, run_counted=0.0)
            updates[job_id] = up
            if t.event:
                log.warning("job %s: %s", job_id, t.event)
                self.journal.event(snap.time, "reconcile", t.event, job_id, round_id)
            if t.followup == "requeue":
                requeue.append(StopItem("requeue", job_id, parse_gpus_safe(f.assignment)))
            elif t.followup == "hold":
                hold.append(job_id)
            elif t.followup == "evict":
                evict.append(job_id)
        self.journal.update_jobs(updates)
        return requeue, hold, evict

    # ---- users cannot bypass the daemon (guard.py) --------------------------------------------------
    def _own_holds(self, snap: Snapshot) -> set[str]:
        """The jobs the daemon itself holds as an administrator, as far as Slurm still shows them."""
        holds = load_holds(self.journal.store)
        kept = still_held(holds, snap.jobs)
        if kept != holds:
            save_holds(self.journal.store, kept)
        return kept

    def _admin_hold(self, rid: int | None, ids: list[str], kind: str, result: ApplyResult) -> None:
        """Hold jobs so that only an operator can release them; recorded as the daemon's before the call."""
        if not ids:
            return
        now = self.clock()
        save_holds(self.journal.store, load_holds(self.journal.store) | set(ids))
        intents = [Intent(kind, j, {}) for j in ids]
        actions = self.journal.record_intents(rid, intents, now) if rid is not None else []
        try:
            self.backend.admin_hold([int(j) for j in ids])
            status, error = "done", ""
        except SlurmError as exc:  # e.g. one of them started or finished meanwhile: the next look decides
            status, error = "failed", str(exc)
            result.failed.update({j: error for j in ids})
        for aid in actions:
            self.journal.finish_action(aid, status, self.clock(), error)

    def _evict(self, rid: int | None, ids: list[str], result: ApplyResult) -> None:
        """Requeue-hold jobs that run without the daemon's assignment, at once (no grace: it never placed them)."""
        if not ids:
            return
        now = self.clock()
        actions = dict(zip(ids, self.journal.record_intents(rid, [Intent("evict", j, {}, JobUpdate(state=PENDING))
                                                                 for j in ids], now))) if rid is not None else {}
        stopped: list[str] = []
        for j in ids:
            try:
                self.backend.evict(int(j))
                stopped.append(j)
                status, error = "done", ""
            except SlurmError as exc:
                status, error = "failed", str(exc)
                result.failed[j] = error
            if j in actions:
                self.journal.finish_action(actions[j], status, self.clock(), error)
        self._admin_hold(rid, stopped, "hold", ApplyResult())  # may race the requeue: the next look retries

    def _secure(self, rid: int | None, snap: Snapshot, hold: list[str], evict: list[str],
                result: ApplyResult) -> None:
        """Evict hand-started jobs, hold hand-released ones, and turn user holds into administrator holds."""
        self._evict(rid, evict, result)
        self._admin_hold(rid, hold, "hold", result)
        self._admin_hold(rid, to_secure(snap.jobs, skip=[*hold, *evict]), "secure", ApplyResult())

    def guard(self) -> None:
        """The light check between rounds: a job started by hand is stopped within ``guard_seconds``."""
        if self.dry_run:
            return
        try:
            snap = self.observe()
            _, hold, evict = self.reconcile(snap, None)
            self._secure(None, snap, hold, evict, ApplyResult())
        except SlurmError as exc:
            log.debug("guard check skipped: %s", exc)
        finally:
            self.journal.record_calls(None, self.backend.drain())

    # ---- 3. inputs of the decision ------------------------------------------------------------------
    def inputs(self, snap: Snapshot) -> RoundInputs:
        jobs: dict[str, Job] = {}
        views: list[JobView] = []
        actual: dict[str, GpuMap] = {}
        excluded: dict[str, str] = {}
        rows = sorted(self.journal.rows(SCHEDULABLE), key=lambda r: (r.submit_time, int(r.job_id)))
        holds = load_holds(self.journal.store)
        shape = shape_from_nodes(snap.nodes, self.cfg)
        for r in rows:
            placed = r.state in PLACED_STATES
            if placed and r.gpus:  # accounted even when it cannot be scheduled: the plan then stops it
                actual[r.job_id] = parse_gpus(r.gpus)
            mj = snap.jobs.get(r.job_id)
            if mj is not None and mj.meta is None:  # reconcile holds it, with the reason
                log.warning("job %s not scheduled: invalid tesserae metadata: %s", r.job_id, mj.meta_error)
            if mj is None or mj.meta is None:
                continue
            if mj.slurm.admin_held and r.job_id not in holds:
                excluded[r.job_id] = "held by an administrator"
                continue
            if r.job_id in self.admin.holds:  # `tesserae hold`: never placed until released
                excluded[r.job_id] = admin.hold_reason(self.admin.holds[r.job_id])
                continue
            try:  # tsbatch's own rules: a hand-written Comment is never placed unchecked
                meta = JobMeta.decode(r.meta)
                check_meta(meta, shape, self.profile)
            except InputError as exc:
                excluded[r.job_id] = f"invalid tesserae metadata: {exc}"
                log.warning("job %s not scheduled: invalid tesserae metadata: %s", r.job_id, exc)
                continue
            try:
                job = meta.job(r.job_id, r.user, group=r.user if self.cfg.mps.cross_user == "never" else "")
                self.profile.job_class(job)
            except InputError as exc:
                excluded[r.job_id] = f"Unschedulable: {exc}"
                continue
            if mj.slurm.account:  # per-account GPU limits
                job = replace(job, account=mj.slurm.account)
            jobs[r.job_id] = job
            prio = site_priority(self.slurm_priority, r.job_id, mj.slurm)
            views.append(JobView(job, r.submit_time, r.attained_service, r.executed_time, r.rounds_run,
                                 running=placed, site_priority=prio, nice=mj.slurm.nice, work_done=r.work_done))
        self.slurm_priority = {j: p for j, p in self.slurm_priority.items() if j in jobs}
        if self.dry_run:
            shadow = self.journal.load_shadow()
            actual = {j: g for j, g in _gpu_maps(shadow).items() if j in jobs} if shadow is not None else {}
        current, problems = current_placement(snap.cluster, actual, snap.gpu_index)
        for p in problems:
            log.error("accounting inconsistency: %s", p)
            self.journal.event(snap.time, "error", f"accounting inconsistency: {p}")
        return RoundInputs(snap.cluster, jobs, tuple(views), actual, current, excluded, snap.gpu_index,
                           snap.held_by_others)

    # ---- the round ----------------------------------------------------------------------------------
    def run_round(self) -> RoundResult:
        t_round = time.perf_counter()
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

    def _skip(self, rid: int, why: str, status: str = "skipped") -> RoundResult:
        log.error("round %d %s: %s", rid, status, why)
        self.journal.update_round(rid, status=status, error=why, finished_at=self.clock())
        self.journal.event(self.clock(), "round-" + status, why, round_id=rid)
        self.metrics.round_done(status, None)
        return RoundResult(rid, status, why)

    def _round(self, rid: int, t_round: float) -> RoundResult:
        admin.ingest(self.journal.store, self.cfg, rid)  # operators' requests since the last round
        self.admin = admin.standing(self.journal.store)
        snap = self.observe()
        requeue, hold, evict = self.reconcile(snap, rid)
        if self.admin.once and not self.dry_run and admin.carry_out(
                self.admin.once, snap, self.applier, self.backend, self.journal.store, rid):
            snap = self.observe()  # requeued or cancelled: decide on what Slurm says now
            requeue, hold, evict = self.reconcile(snap, rid)
        if not self.dry_run:
            fixed = ApplyResult()
            self._secure(rid, snap, hold, evict, fixed)
            self.applier.stop_jobs(rid, requeue, {j: m.slurm for j, m in snap.jobs.items()}, fixed)
            if fixed.failed:
                return self._skip(rid, "reconciliation could not finish: " +
                                  "; ".join(f"job {j}: {e}" for j, e in sorted(fixed.failed.items())))
            if requeue or hold or evict:
                snap = self.observe()
                self.reconcile(snap, rid)
                self._secure(rid, snap, [], [], ApplyResult())
        if self.cfg.feedback.enabled and not self.dry_run:
            self._collect_feedback(snap.time, rid)
        observe_ms = (time.perf_counter() - t_round) * 1e3
        self.journal.update_round(rid, status="deciding", observe_ms=observe_ms)

        inp = self.inputs(snap)
        profile, _ = self.feedback.decision_profile()  # the table, with online measurements laid over it
        t0 = time.perf_counter()
        throughput = SpeedModel(profile, inp.cluster).lookup()
        ranking, pstate = self.policy.rank(
            SchedulingInput(snap.time, self.cfg.scheduler.round_seconds, inp.views, inp.cluster, throughput,
                            self.cfg.scheduler.seed, inp.current),
            self.pstate)
        t1 = time.perf_counter()
        ordered = tuple(inp.jobs[j] for j in ranking.order)
        rules = admin.node_rules(self.admin, inp.jobs) if self.admin.rules else {}  # `tesserae pin|keep-off`
        decision = decide(RoundRequest(inp.cluster, ordered, inp.current, ranking.pairs, self.engine_config, rules,
                                       limits=self.cfg.limits, held=ranking.held), profile, clock=time.perf_counter)
        decision_s = time.perf_counter() - t0
        plan = plan_round(decision, inp.actual, ranking.order, inp.gpu_index)
        if inp.held_by_others:  # say which foreign jobs take GPUs, where a job waits (explain, round show)
            note = "GPUs held by jobs tesserae does not manage: " + "; ".join(inp.held_by_others)
            decision = replace(decision, placement=in_slurm_indices(decision.placement, snap), pending=tuple(
                p._replace(detail=f"{p.detail}; {note}" if p.detail else note) for p in decision.pending))
        self.pstate = pstate
        self.journal.save_policy_state(self.policy_key, pstate)
        self._record_decision(rid, inp, decision, plan, (t1 - t0) * 1e3, ranking.order)

        if self.dry_run:
            self.journal.record_intents(rid, [Intent(a.kind, a.job_id, {
                "gpus": format_gpus(a.target.gpus) if a.target else "",
                "from": format_gpus(a.previous) if a.previous else ""}) for a in plan.actions], snap.time)
            self._finish_dry_run(rid)
            self.journal.save_shadow(decision.placement)
            return self._done(rid, "dry-run", decision, plan, decision_s, t_round, "")

        self.journal.update_round(rid, status="applying")
        t_apply = time.perf_counter()
        result = ApplyResult()
        stops = [StopItem(a.kind, a.job_id, a.previous, a.target.gpus if a.target else None) for a in plan.stops]
        stopping = self.applier.begin_stops(rid, stops, {j: m.slurm for j, m in snap.jobs.items()}, result)
        # Starts that need no GPU of a stopping job go ahead now, while the stopping jobs checkpoint.
        busy = {(n, g) for a in plan.stops for n, idx in (a.previous or {}).items() for g in idx}
        now_starts = [a for a in plan.starts if a.kind == "start" and a.target is not None
                      and not any((n, g) in busy for n, idx in a.target.gpus.items() for g in idx)]
        later = [a for a in plan.starts if a not in now_starts]
        if now_starts and not self.stop_event.is_set():
            self.applier.start_jobs(rid, now_starts, self._occupied(inp.actual, set()), result)
        self.applier.finish_stops(stopping, result)
        for a in plan.stops:
            if a.job_id in result.stopped:
                self.metrics.action(a.kind)
        pending_starts = later if not self.stop_event.is_set() else []
        if self.stop_event.is_set():
            result.skipped.update({a.job_id: "daemon stopping" for a in plan.starts
                                   if a.job_id not in result.skipped and a.job_id not in result.started})
        if pending_starts:
            self.applier.start_jobs(rid, pending_starts, self._occupied(inp.actual, result.stopped), result)
        for a in plan.starts:
            if a.kind == "start" and a.job_id in result.started:
                self.metrics.action("start")
        self._record_outcome(plan, result)
        # a requeue-hold is a user hold its owner could lift: make the preempted ones the daemon's at once
        self._admin_hold(rid, [a.job_id for a in plan.stops if a.kind == "preempt" and a.job_id in result.stopped],
                         "secure", ApplyResult())
        failures = {**result.failed, **result.skipped}
        self.journal.update_round(rid, apply_ms=(time.perf_counter() - t_apply) * 1e3)
        error = "; ".join(f"job {j}: {e}" for j, e in sorted(failures.items()))
        return self._done(rid, "partial" if failures else "applied", decision, plan, decision_s, t_round, error)

    def _occupied(self, actual: Mapping[str, GpuMap], stopped: set[str]) -> dict[tuple[str, int], set[str]]:
        """Who holds each GPU now: placed jobs not stopped yet, and stops carried over from an earlier
        round (PREEMPTING, still running: their GPUs stay booked until Slurm has them pending)."""
        held = dict(actual)
        for r in self.journal.rows((PREEMPTING,)):
            if r.gpus and r.job_id not in held:
                held[r.job_id] = parse_gpus(r.gpus)
        occupied: dict[tuple[str, int], set[str]] = {}
        for job, gpus in held.items():
            if job in stopped:
                continue
            for node, idx in gpus.items():
                for g in idx:
                    occupied.setdefault((node, g), set()).add(job)
        return occupied

    def _collect_feedback(self, now: float, rid: int) -> None:
        """Fold the throughput reports of running jobs; a problem here never costs the round."""
        try:
            got = self.feedback.collect(now)
        except Exception as exc:  # noqa: BLE001 - feedback is an optimization; scheduling goes on without it
            log.exception("online feedback failed")
            self.journal.event(now, "feedback", f"reading throughput reports failed: {exc!r}", round_id=rid)
            return
        if got.folded or got.refused:
            log.info("round %d: folded %d throughput report(s); refused reports of %d job(s)%s", rid, got.folded,
                     len(got.refused), "".join(f"; job {j}: {w}" for j, w in sorted(got.refused.items())[:3]))
        for job, why in sorted(self.feedback.suspicious_news(got).items()):
            self.journal.event(now, "feedback", f"throughput reports ignored: {why}", job, rid)

    def _done(self, rid: int, status: str, decision: RoundDecision, plan: RoundPlan, decision_s: float,
              t_round: float, error: str) -> RoundResult:
        self.journal.update_round(rid, status=status, error=error, finished_at=self.clock())
        self.metrics.round_done(status, decision_s)
        self.metrics.set_jobs(self.journal.count_by_state(), len(decision.packed))
        log.info("round %d %s: %d started, %d preempted, %d migrated, %d kept, %d packed pairs, %d pending "
                 "(%.1f ms decision, %.2f s round)%s", rid, status, sum(a.kind == "start" for a in plan.actions),
                 sum(a.kind == "preempt" for a in plan.actions), sum(a.kind == "migrate" for a in plan.actions),
                 len(plan.kept), len(decision.packed), len(decision.pending), decision_s * 1e3,
                 time.perf_counter() - t_round, f"; problems: {error}" if error else "")
        return RoundResult(rid, status, error, decision, plan)

    def _finish_dry_run(self, rid: int) -> None:
        now = self.clock()
        for a in self.journal.store.actions(round_id=rid, status="intent"):
            self.journal.finish_action(a.id, "skipped", now, "dry run: nothing sent to Slurm")

    def _record_decision(self, rid: int, inp: RoundInputs, decision: RoundDecision, plan: RoundPlan,
                         scheduling_ms: float, order: tuple[str, ...]) -> None:
        counts = RoundCounts(
            scheduling_ms=scheduling_ms, placement_ms=decision.timings.placement * 1e3,
            packing_ms=decision.timings.packing * 1e3, migration_ms=decision.timings.migration * 1e3,
            jobs_active=len(inp.jobs), running=len(plan.targets), kept=len(plan.kept),
            started=sum(a.kind == "start" for a in plan.actions),
            preempted=sum(a.kind == "preempt" for a in plan.actions),
            migrated=sum(a.kind == "migrate" for a in plan.actions), packed_pairs=len(decision.packed),
            pending=len(decision.pending),
        )
        sources = self.feedback.sources(decision, inp.jobs, inp.cluster)
        self.journal.record_decision(rid, decision, plan.targets, counts, order, sources)
        if self.dry_run:
            return
        reasons = {j: JobUpdate(reason=why) for j, why in inp.excluded.items()}
        for p in decision.pending:
            reasons[p.job_id] = JobUpdate(reason=p.reason.value + (f": {p.detail}" if p.detail else ""))
        for j in plan.kept:  # no Slurm call; only the record of who shares its GPUs (and its speed) changes
            reasons[j] = JobUpdate(packed_with=plan.targets[j].partner, speed=plan.targets[j].speed, reason="")
        self.journal.update_jobs(reasons)

    def _record_outcome(self, plan: RoundPlan, result: ApplyResult) -> None:
        self.journal.count_rounds_run([j for j in plan.targets if j in plan.kept or j in result.started])

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

    def run_forever(self, max_rounds: int | None = None, reload: Callable[[], DaemonConfig] | None = None) -> None:
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

    def _between_rounds(self, next_round: float) -> None:
        """Wait for the next round, running the guard check every ``slurm.guard_seconds`` meanwhile and
        pinging the systemd watchdog (daemon/sdnotify.py) at least every ``heartbeat_s``."""
        every = self.cfg.slurm.guard_seconds
        next_guard = self.clock() + every if every > 0 else float("inf")
        while not self.stop_event.is_set():
            self.heartbeat()
            left = next_round - self.clock()
            if left <= 0:
                return
            if self.stop_event.wait(max(0.0, min(left, next_guard - self.clock(), self.heartbeat_s))) \
                    or self.clock() >= next_round:
                return
            if self.clock() >= next_guard:
                next_guard = self.clock() + every
                try:
                    self.guard()
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

    def _reload(self, load: Callable[[], DaemonConfig]) -> None:
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


def site_priority(memory: dict[str, int], job_id: str, sj: SlurmJob) -> float:
    """Slurm's priority for the slurm-priority order. Slurm computes none for a held job (squeue and
    sprio give 0), and the daemon holds every job it has not started: such a job keeps the last
    priority Slurm gave it while not held (``memory``, this daemon's), else 0; ties then go to the
    lower nice, which Slurm shows on held jobs too, then to arrival."""
    if sj.priority > 0 and not sj.held:
        memory[job_id] = sj.priority
    return float(memory.get(job_id, 0))


def parse_gpus_safe(text_or_assignment: str) -> GpuMap | None:
    from ..harness.assignment import Assignment
    if not text_or_assignment:
        return None
    try:
        return dict(Assignment.decode(text_or_assignment).gpus)
    except InputError:
        return None


def _gpu_maps(p: Placement) -> dict[str, dict[str, tuple[int, ...]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for job, refs in p.job_gpus().items():
        for node, g in refs:
            out.setdefault(job, {}).setdefault(node, []).append(g)
    return {j: {n: tuple(sorted(v)) for n, v in m.items()} for j, m in out.items()}
