"""Round-based simulator: the same engine calls the daemon makes, on a virtual clock.

Jobs arrive by trace time; every round the policy ranks active jobs, the engine decides, and each
placed job advances by (round - restart overhead) x its true normalized speed. Completion inside a
round is exact. With profile noise, decisions see the noisy table while the true one drives progress
(the paper's sensitivity study).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..engine import RoundRequest, decide
from ..model import Cluster, InputError, Job, JobView, Placement, RoundDecision
from ..policies.base import SchedulingInput
from ..policies.registry import make_policy
from ..profiles import ThroughputProfile
from .configs import SchedulerConfig
from .invariants import check_round
from .metrics import JobRecord, RoundRecord, SimResult
from .speeds import SpeedModel
from .traces.record import TraceJob

log = logging.getLogger(__name__)

LLM_MODELS = frozenset({"Bert-Large", "GPT2-Medium"})


@dataclass(frozen=True)
class RestartCost:
    """Seconds lost when a job resumes after preemption or migration (warm-up + checkpoint load)."""

    default_s: float = 30.0
    per_model: dict[str, float] = field(default_factory=lambda: {m: 90.0 for m in LLM_MODELS})

    def of(self, model: str) -> float:
        return self.per_model.get(model, self.default_s)


@dataclass
class _Live:
    """Mutable per-job bookkeeping of the simulator shell (never handed to the core)."""

    trace: TraceJob
    job: Job
    remaining: float  # seconds of isolated work left on the reference GPU
    attained: float = 0.0
    executed: float = 0.0
    rounds_run: int = 0
    start: float | None = None
    preemptions: int = 0
    migrations: int = 0
    rounds_packed: int = 0
    contention_sum: float = 0.0
    rounds_alive: int = 0
    ever_ran: bool = False
    finish: float | None = None


def _job_of(t: TraceJob) -> Job:
    return Job(t.job_id, t.num_gpus, t.model, t.batch_size, user=t.user, no_pack=t.no_pack)


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
    on_round: Callable[[float, int, int], None] | None = None,
) -> SimResult:
    restart = restart or RestartCost()
    rng = np.random.default_rng(seed)
    speeds = SpeedModel(profile, cluster)
    decision_profile = profile.with_noise(noise, rng) if noise > 0 else profile
    policy = make_policy(config.policy, **dict(config.policy_options))
    pstate = policy.initial_state()
    throughput = SpeedModel(decision_profile, cluster).lookup()

    capacity = max(sum(n.num_gpus for n in cluster.nodes if n.gpu_type == g) for g in cluster.gpu_types)
    for t in trace:
        if t.num_gpus > capacity:
            raise InputError(f"job {t.job_id} needs {t.num_gpus} GPUs but the cluster has at most {capacity} of one type")
        speeds.check_job(_job_of(t))

    arrivals = sorted(trace, key=lambda t: t.submit_time)
    next_arrival = 0
    live: dict[str, _Live] = {}
    done: list[JobRecord] = []
    rounds: list[RoundRecord] = []
    current = Placement.empty(cluster)
    now = arrivals[0].submit_time if arrivals else 0.0
    idle_rounds = 0

    while next_arrival < len(arrivals) or live:
        while next_arrival < len(arrivals) and arrivals[next_arrival].submit_time <= now:
            t = arrivals[next_arrival]
            live[t.job_id] = _Live(t, _job_of(t), remaining=t.duration)
            next_arrival += 1
        if not live:
            now = arrivals[next_arrival].submit_time
            continue

        running_before = current.jobs()
        views = tuple(
            JobView(s.job, s.trace.submit_time, s.attained, s.executed, s.rounds_run,
                    running=s.job.id in running_before, total_work=s.trace.duration,
                    remaining_work=s.remaining, priority_weight=s.trace.priority)
            for s in live.values()
        )
        t0 = time.perf_counter()
        ranking, pstate = policy.rank(SchedulingInput(now, round_s, views, cluster, throughput), pstate)
        sched_ms = (time.perf_counter() - t0) * 1e3
        ordered = tuple(live[j].job for j in ranking.order)
        decision = decide(RoundRequest(cluster, ordered, current, ranking.pairs, config.engine),
                          decision_profile, clock=time.perf_counter)
        if check_invariants:
            check_round(decision, {j.id: j for j in ordered}, current)

        finished = _advance(decision, live, speeds, restart, now, round_s, done)
        busy = sum(1 for gpus in decision.placement.nodes.values() for slot in gpus if slot)
        rounds.append(RoundRecord(
            time=now, active=len(views), running=len(decision.placement.jobs()),
            packed_pairs=len(decision.packed), migrations=len(decision.migrated),
            preemptions=len(decision.preempted), busy_gpus=busy, scheduling_ms=sched_ms,
            placement_ms=decision.timings.placement * 1e3, packing_ms=decision.timings.packing * 1e3,
            migration_ms=decision.timings.migration * 1e3,
        ))
        current = _without(decision.placement, finished)
        idle_rounds = 0 if decision.placement.jobs() else idle_rounds + 1
        if idle_rounds > 1000:
            raise RuntimeError(f"simulation stalled at t={now}: {len(live)} active jobs, none placed for 1000 rounds")
        now += round_s
        if on_round is not None:
            on_round(now, len(done), len(trace))

    return SimResult(
        policy=config.name, trace=trace_name, cluster=_cluster_spec(cluster), round_duration=round_s,
        seed=seed, jobs=tuple(sorted(done, key=lambda r: r.submit_time)), rounds=tuple(rounds),
        total_gpus=cluster.total_gpus,
        settings={"noise": noise, "restart_default_s": restart.default_s, "restart_per_model": restart.per_model,
                  "packing": config.engine.packing, "migration": config.engine.migration},
    )


def _advance(decision: RoundDecision, live: dict[str, _Live], speeds: SpeedModel, restart: RestartCost,
             now: float, round_s: float, done: list[JobRecord]) -> set[str]:
    """Move every active job forward by one round; returns the ids that finished."""
    gpus_of = decision.placement.job_gpus()
    partner = {p.placed: p for p in decision.packed} | {p.partner: p for p in decision.packed}
    migrated = set(decision.migrated)
    contention = len(live) / max(1, sum(len(g) for g in decision.placement.nodes.values()))
    finished: set[str] = set()
    for jid in decision.preempted:
        if jid in live:
            live[jid].preemptions += 1
    for jid, s in live.items():
        s.contention_sum += contention
        s.rounds_alive += 1
        refs = gpus_of.get(jid)
        if not refs:
            continue
        node = refs[0][0]
        speed = speeds.true_speed(s.job, node, decision, partner.get(jid))
        resumed = jid in migrated or (jid in decision.started and s.ever_ran)
        overhead = min(round_s, speeds.overhead(s.job, restart) if resumed else 0.0)
        if jid in migrated:
            s.migrations += 1
        if s.start is None:
            s.start = now
        s.ever_ran = True
        s.rounds_run += 1
        if jid in partner:
            s.rounds_packed += 1
        work = (round_s - overhead) * speed
        if speed > 0 and work >= s.remaining - 1e-9:
            ran = overhead + s.remaining / speed
            s.remaining = 0.0
            s.finish = now + ran
            finished.add(jid)
        else:
            ran = round_s
            s.remaining -= work
        s.executed += ran
        s.attained += ran * s.job.num_gpus
    for jid in finished:
        s = live.pop(jid)
        done.append(JobRecord(
            job_id=jid, num_gpus=s.job.num_gpus, model=s.job.model, submit_time=s.trace.submit_time,
            start_time=s.start if s.start is not None else now, finish_time=s.finish if s.finish is not None else now,
            duration=s.trace.duration, preemptions=s.preemptions, migrations=s.migrations,
            rounds_packed=s.rounds_packed, rounds_run=s.rounds_run,
            avg_contention=s.contention_sum / max(1, s.rounds_alive),
        ))
    return finished


def _without(p: Placement, gone: set[str]) -> Placement:
    if not gone:
        return p
    return Placement({n: tuple(slot - gone for slot in gpus) for n, gpus in p.nodes.items()})


def _cluster_spec(c: Cluster) -> str:
    parts: list[str] = []
    for n in c.nodes:
        spec = f"{n.num_gpus}:{n.gpu_type}"
        if parts and parts[-1].split("x", 1)[1] == spec:
            k = int(parts[-1].split("x", 1)[0]) + 1
            parts[-1] = f"{k}x{spec}"
        else:
            parts.append(f"1x{spec}")
    return ",".join(parts)
