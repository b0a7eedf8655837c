"""Round-based simulator: the same engine calls the daemon makes, on a virtual clock.

Every round (default 360 s) the jobs that have arrived are ranked by the policy, the engine decides
(``engine.decide``, exactly as the daemon calls it), and each placed job advances by its true speed
on its GPUs (alone or packed, chosen strategy, GPU type; ``speeds.py``) after any restart overhead
(``restart.py``), with completion inside the round computed exactly (``progress.py``). With profile
noise n, decisions see a profile whose measured values are multiplied by U[1-n, 1+n], while the true
profile drives progress (the paper's sensitivity study). Deterministic for a seed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..engine import RoundRequest, decide
from ..model import Cluster, InputError, Job, JobView, Placement, RoundDecision, StageTimings
from ..policies.base import SchedulingInput
from ..policies.registry import make_policy
from ..profiles import ThroughputProfile
from .configs import SchedulerConfig
from .invariants import InvariantError, check_progress, check_result, check_round
from .metrics import JobRecord, RoundRecord, SimResult
from .progress import Member, Outcome, run_alone, run_pair
from .restart import RestartCost
from .speeds import SpeedModel
from .strategies import check_mode, job_parallelism, restrict_packed
from .traces.record import TraceJob

log = logging.getLogger(__name__)

STALL_ROUNDS = 1000  # rounds without any progress (and no arrival to wait for) before giving up
ProgressCallback = Callable[[float, int, int], None]


@dataclass
class _Live:
    """Mutable per-job bookkeeping of the simulator shell (never handed to the core)."""

    trace: TraceJob
    job: Job
    remaining: float  # seconds of isolated work left on the reference GPU
    done_work: float = 0.0
    attained: float = 0.0  # GPU-seconds held
    executed: float = 0.0  # wall seconds held
    rounds_run: int = 0
    start: float | None = None
    preemptions: int = 0
    migrations: int = 0
    rounds_packed: int = 0
    packed_s: float = 0.0
    contention_at_arrival: float = 0.0  # the run's cumulative contention and round count at arrival:
    rounds_at_arrival: int = 0  # a job's averages are differences, not per-round additions to every job
    finish: float | None = None
    view: JobView | None = None  # last round's view; rebuilt only for jobs that ran (others are unchanged)


def job_of(t: TraceJob, parallelism: tuple[str, ...] = ()) -> Job:
    return Job(t.job_id, t.num_gpus, t.model, t.batch_size, user=t.user, parallelism=parallelism, no_pack=t.no_pack)


def simulate(
    trace: Sequence[TraceJob],
    cluster: Cluster,
    config: SchedulerConfig,
    profile: ThroughputProfile,
    *,
    round_s: float = 360.0,
    seed: int = 0,
    noise: float = 0.0,
    restart: RestartCost | None = None,
    check_invariants: bool = False,
    trace_name: str = "",
    on_round: ProgressCallback | None = None,
    decision_profile: ThroughputProfile | None = None,
    llm_strategy: str = "best",
    reuse_decisions: bool = True,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``config``; see the module docstring.

    ``profile`` is the truth (progress); ``decision_profile`` (default: ``profile``) is what the
    scheduler believes. It must know every job of the trace.

    ``reuse_decisions``: when no job arrived or finished and the policy ranks exactly as last round,
    the engine would return last round's placement unchanged (the same logical plan maps onto it at
    cost 0), so the simulator keeps it without calling the engine; with ``check_invariants`` it calls
    the engine anyway and checks that. Long quiet stretches of big traces then cost only the ranking."""
    if not (round_s > 0 and math.isfinite(round_s)):
        raise InputError(f"round length must be > 0 seconds, got {round_s}")
    if not 0.0 <= noise <= 1.0:
        raise InputError(f"profile noise must be in [0, 1], got {noise}")
    check_mode(llm_strategy)
    restart = restart or RestartCost()
    true_speeds = SpeedModel(profile, cluster)
    noise_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    believed = decision_profile if decision_profile is not None else profile
    believed = believed.with_noise(noise, noise_rng) if noise > 0 else believed
    believed = restrict_packed(believed, llm_strategy)
    decision_speeds = SpeedModel(believed, cluster, true_speeds.reference)
    lookup = decision_speeds.lookup()
    policy = make_policy(config.policy, **dict(config.policy_options))
    pstate = policy.initial_state()
    _check_trace(trace, cluster, true_speeds)
    if decision_profile is not None:
        _check_trace(trace, cluster, decision_speeds)
    parallelism = {t.job_id: job_parallelism(profile, t.model, t.batch_size, t.num_gpus, llm_strategy)
                   for t in trace} if llm_strategy == "default-pp-always" else {}

    arrivals = sorted(trace, key=lambda t: t.submit_time)
    nxt = 0
    live: dict[str, _Live] = {}
    done: list[JobRecord] = []
    rounds: list[RoundRecord] = []
    current = Placement.empty(cluster)
    now = arrivals[0].submit_time if arrivals else 0.0
    stalled = 0
    cum_contention, cum_rounds = 0.0, 0
    last: tuple[tuple[str, ...], tuple[tuple[str, str], ...], RoundDecision] | None = None
    while nxt < len(arrivals) or live:
        while nxt < len(arrivals) and arrivals[nxt].submit_time <= now:
            t = arrivals[nxt]
            live[t.job_id] = _Live(t, job_of(t, parallelism.get(t.job_id, ())), remaining=t.duration,
                                   contention_at_arrival=cum_contention, rounds_at_arrival=cum_rounds)
            nxt += 1
        if not live:  # idle cluster: jump to the next arrival
            now = arrivals[nxt].submit_time
            continue

        running_before = current.jobs()
        views = tuple(_view(s, jid in running_before) for jid, s in live.items())
        t0 = time.perf_counter()
        ranking, pstate = policy.rank(SchedulingInput(now, round_s, views, cluster, lookup, seed), pstate)
        sched_s = time.perf_counter() - t0
        ordered = tuple(live[j].job for j in ranking.order)
        if len(ordered) != len(live):
            raise RuntimeError(f"policy {config.policy} ranked {len(ordered)} of {len(live)} active jobs")
        reused = (reuse_decisions and last is not None and last[0] == ranking.order and last[1] == ranking.pairs
                  and last[2].placement is current)
        if reused:
            decision = _unchanged(last[2], ranking.order)  # type: ignore[index]
            if check_invariants:
                full = decide(RoundRequest(cluster, ordered, current, ranking.pairs, config.engine), believed)
                if full.placement != decision.placement or full.packed != decision.packed:
                    raise InvariantError(f"t={now:g}: reusing last round's decision differs from the engine's")
        else:
            decision = decide(RoundRequest(cluster, ordered, current, ranking.pairs, config.engine),
                              believed, clock=time.perf_counter)
        last = (ranking.order, ranking.pairs, decision)
        if check_invariants:
            check_round(decision, {j.id: j for j in ordered}, current)

        outcomes, infeasible = _advance(decision, live, true_speeds, restart, round_s)
        finished = {jid for jid, o in outcomes.items() if o.finish is not None}
        busy_gpu_s = _busy_gpu_seconds(decision, outcomes, round_s)
        _account(decision, live, outcomes, now, round_s)
        cum_contention += len(live) / cluster.total_gpus
        cum_rounds += 1
        if check_invariants:
            check_progress({jid: (s.trace.duration, s.done_work, s.remaining) for jid, s in live.items()},
                           {jid for jid, o in outcomes.items() if o.finish is not None}, {r.job_id for r in done})
        for jid in sorted(finished, key=lambda j: (outcomes[j].finish, j)):
            done.append(_record(live.pop(jid), now, cum_contention, cum_rounds))

        rounds.append(RoundRecord(
            time=now, active=len(views), running=len(decision.placement.jobs()),
            packed_pairs=len(decision.packed), migrations=len(decision.migrated),
            preemptions=len(decision.preempted), busy_gpus=decision.placement.busy_gpus(),
            busy_gpu_s=busy_gpu_s, finished=len(finished), scheduling_ms=sched_s * 1e3,
            placement_ms=decision.timings.placement * 1e3, packing_ms=decision.timings.packing * 1e3,
            migration_ms=decision.timings.migration * 1e3, infeasible_pairs=infeasible, reused=reused,
        ))
        current = _without(decision.placement, finished)
        progressed = any(o.work > 0 for o in outcomes.values())
        stalled = 0 if progressed or nxt < len(arrivals) else stalled + 1
        if stalled >= STALL_ROUNDS:
            raise RuntimeError(f"simulation stalled at t={now:g} s: {len(live)} active jobs made no progress "
                               f"for {STALL_ROUNDS} rounds (policy {config.policy})")
        now += round_s
        if on_round is not None:
            on_round(now, len(done), len(arrivals))

    result = SimResult(
        policy=config.name, trace=trace_name, cluster=cluster_spec(cluster), round_duration=round_s,
        seed=seed, jobs=tuple(sorted(done, key=lambda r: (r.submit_time, r.job_id))), rounds=tuple(rounds),
        total_gpus=cluster.total_gpus,
        settings={"noise": noise, "restart": restart.to_json(), "packing": config.engine.packing,
                  "migration": config.engine.migration, "policy": config.policy,
                  "policy_options": dict(config.policy_options), "reference_gpu": true_speeds.reference,
                  "profile": profile.name, "decision_profile": believed.name, "llm_strategy": llm_strategy},
    )
    if check_invariants:
        check_result(result, trace, true_speeds.max_factor)
    return result


def _unchanged(d: RoundDecision, order: Sequence[str]) -> RoundDecision:
    """Last round's decision as this round's: the same placement, every placed job kept, no action."""
    placed = d.placement.jobs()
    return RoundDecision(
        placement=d.placement, started=(), preempted=(), migrated=(),
        kept=tuple(j for j in order if j in placed), packed=d.packed, pending=d.pending,
        strategies=d.strategies, speeds=d.speeds, migration_cost=0.0, timings=StageTimings())


def _check_trace(trace: Sequence[TraceJob], cluster: Cluster, speeds: SpeedModel) -> None:
    capacity = max(sum(n.num_gpus for n in cluster.nodes if n.gpu_type == g) for g in cluster.gpu_types)
    seen: set[str] = set()
    for t in trace:
        if t.job_id in seen:
            raise InputError(f"trace: duplicate job id {t.job_id!r}")
        seen.add(t.job_id)
        if t.num_gpus > capacity:
            raise InputError(f"job {t.job_id} needs {t.num_gpus} GPUs but the cluster has at most {capacity} "
                             "GPUs of one type")
        speeds.check_job(job_of(t))


def _advance(decision: RoundDecision, live: dict[str, _Live], speeds: SpeedModel, restart: RestartCost,
             round_s: float) -> tuple[dict[str, Outcome], int]:
    """Each placed job's exact progress this round, group by group (a job alone or a packed pair), and
    how many pairs make no progress because they do not fit in truth (a wrong decision profile)."""
    gpus_of = decision.placement.job_gpus()
    migrated, started = set(decision.migrated), set(decision.started)
    outcomes: dict[str, Outcome] = {}

    def member(jid: str, gpu_type: str, packed_speed: float | None) -> Member:
        s = live[jid]
        resumed = jid in migrated or (jid in started and s.rounds_run > 0)
        overhead = min(round_s, speeds.overhead(s.job, restart)) if resumed else 0.0
        solo = speeds.solo(s.job, gpu_type, decision.strategies.get(jid))
        return Member(s.remaining, overhead, solo, solo if packed_speed is None else packed_speed)

    paired: set[str] = set()
    infeasible = 0
    for p in decision.packed:
        if p.placed not in gpus_of or p.partner not in gpus_of:
            continue
        g = speeds.node_type[gpus_of[p.placed][0][0]]
        a, b = live[p.placed].job, live[p.partner].job
        sa, sb = speeds.packed(a, b, g, decision.strategies.get(a.id), decision.strategies.get(b.id))
        infeasible += sa == 0.0 and sb == 0.0
        oa, ob = run_pair(member(a.id, g, sa), member(b.id, g, sb), round_s)
        outcomes[a.id], outcomes[b.id] = oa, ob
        paired.update((a.id, b.id))
    for jid, refs in gpus_of.items():
        if jid not in paired:
            outcomes[jid] = run_alone(member(jid, speeds.node_type[refs[0][0]], None), round_s)
    return outcomes, infeasible


def _view(s: _Live, running: bool) -> JobView:
    """What the policy sees of a job; a waiting job's view does not change, so it is reused."""
    v = s.view
    if v is None or v.running != running:
        v = s.view = JobView(s.job, s.trace.submit_time, s.attained, s.executed, s.rounds_run, running=running,
                             total_work=s.trace.duration, remaining_work=s.remaining,
                             priority_weight=s.trace.priority)
    return v


def _account(decision: RoundDecision, live: dict[str, _Live], outcomes: dict[str, Outcome], now: float,
             round_s: float) -> None:
    for jid in decision.preempted:
        if jid in live:
            live[jid].preemptions += 1
    for jid in decision.migrated:
        live[jid].migrations += 1
    for jid, o in outcomes.items():
        s = live[jid]
        s.view = None  # it ran: attained service, remaining work ... changed
        held = min(round_s, o.held)
        s.remaining = 0.0 if o.finish is not None else s.remaining - o.work
        s.done_work += o.work
        s.executed += held
        s.attained += held * s.job.num_gpus
        s.rounds_run += 1
        s.packed_s += o.packed_s
        if o.packed_s > 0:
            s.rounds_packed += 1
        if s.start is None:
            s.start = now
        if o.finish is not None:
            s.finish = now + o.finish


def _record(s: _Live, now: float, cum_contention: float, cum_rounds: int) -> JobRecord:
    return JobRecord(
        job_id=s.job.id, num_gpus=s.job.num_gpus, model=s.job.model, submit_time=s.trace.submit_time,
        start_time=s.start if s.start is not None else now,
        finish_time=s.finish if s.finish is not None else now, duration=s.trace.duration,
        preemptions=s.preemptions, migrations=s.migrations, rounds_packed=s.rounds_packed,
        rounds_run=s.rounds_run, avg_contention=(cum_contention - s.contention_at_arrival) / max(1, cum_rounds - s.rounds_at_arrival),
        packed_s=s.packed_s, work_done=s.done_work,
    )


def _busy_gpu_seconds(decision: RoundDecision, outcomes: dict[str, Outcome], round_s: float) -> float:
    """GPU-seconds during which a GPU held at least one unfinished job this round."""
    if all(o.finish is None for o in outcomes.values()):  # every placed job held its GPUs all round
        return decision.placement.busy_gpus() * round_s
    total = 0.0
    for gpus in decision.placement.nodes.values():
        for slot in gpus:
            if slot:
                total += max(min(round_s, outcomes[j].held) for j in slot)
    return total


def _without(p: Placement, gone: set[str]) -> Placement:
    if not gone:
        return p
    return Placement({n: tuple(slot - gone for slot in gpus) for n, gpus in p.nodes.items()})


def cluster_spec(c: Cluster) -> str:
    """``20x4:a100`` style text for a cluster (runs of equal nodes collapsed)."""
    parts: list[tuple[int, int, str]] = []
    for n in c.nodes:
        if parts and parts[-1][1:] == (n.num_gpus, n.gpu_type):
            parts[-1] = (parts[-1][0] + 1, n.num_gpus, n.gpu_type)
        else:
            parts.append((1, n.num_gpus, n.gpu_type))
    return ",".join(f"{k}x{g}:{t}" for k, g, t in parts)
