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
from operator import attrgetter
from collections.abc import Callable, Sequence, Set as AbstractSet

import numpy as np

from ..engine import RoundRequest, decide
from ..model import Cluster, InputError, JobView, Placement, RoundDecision
from ..policies.base import QuietRounds, SchedulingInput
from ..policies.registry import make_policy
from ..profiles import ThroughputProfile
from ..configs import SchedulerConfig
from .invariants import InvariantError, check_progress, check_result, check_round
from .metrics import JobRecord, RoundRecord, SimResult
from .quiet import apply_rounds, quiet_rounds, stretch_of, upper_bound
from .jobstate import JobColumns
from .restart import RestartCost
from .rounds import (SteadyOutcomes, busy_gpu_seconds, LiveJob, record_of, unchanged, view_of, run_round, running_views,
                     without, job_of)
from ..profiles.speeds import SpeedModel
from .strategies import check_mode, job_parallelism, restrict_packed
from .traces.record import TraceJob

__all__ = ["ProgressCallback", "simulate", "cluster_spec", "job_of", "LiveJob"]

log = logging.getLogger(__name__)

_JOB = attrgetter("job")
STALL_ROUNDS = 1000  # rounds without any progress (and no arrival to wait for) before giving up
ProgressCallback = Callable[[float, int, int], None]


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
    fast_forward: bool = True,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``config``; see the module docstring.

    ``profile`` is the truth (progress); ``decision_profile`` (default: ``profile``) is what the
    scheduler believes. It must know every job of the trace.

    ``reuse_decisions``: when no job arrived or finished and the policy ranks exactly as last round,
    the engine would return last round's placement unchanged (the same logical plan maps onto it at
    cost 0), so the simulator keeps it without calling the engine; with ``check_invariants`` it calls
    the engine anyway and checks that. Long quiet stretches of big traces then cost only the ranking.

    ``fast_forward`` (with ``reuse_decisions``, for policies with the ``QuietRounds`` hook): after a
    round that kept the running set, the rounds that are certainly quiet (no arrival, no finish, the
    same ranking) are applied in one tight loop without ranking them, with the same float operations
    per round (``sim/quiet.py``): the results are identical. With ``check_invariants`` nothing is
    skipped; every round the fast-forward promised quiet is checked to be so instead."""
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
    live: dict[str, LiveJob] = {}
    cols = JobColumns(len(arrivals))  # the jobs' numbers; slot = arrival order
    done: list[JobRecord] = []
    rounds: list[RoundRecord] = []
    current = Placement.empty(cluster)
    running: AbstractSet[str] = frozenset()  # placed in the round that just ended
    views_of: dict[str, JobView] = {}  # what the policy sees; rebuilt only for jobs that ran or stopped
    now = arrivals[0].submit_time if arrivals else 0.0
    stalled = 0
    cum_contention, cum_rounds = 0.0, 0
    last: tuple[tuple[str, ...], tuple[tuple[str, str], ...], RoundDecision] | None = None
    quiet = policy if fast_forward and reuse_decisions and isinstance(policy, QuietRounds) else None
    steady = SteadyOutcomes(round_s)
    skipped = promised = 0  # rounds fast-forwarded; under check_invariants, promised quiet and checked
    while nxt < len(arrivals) or live:
        arrived = False
        while nxt < len(arrivals) and arrivals[nxt].submit_time <= now:
            t = arrivals[nxt]
            s = live[t.job_id] = LiveJob(t, job_of(t, parallelism.get(t.job_id, ())), remaining=t.duration,
                                       contention_at_arrival=cum_contention, rounds_at_arrival=cum_rounds,
                                       cols=cols, k=nxt)
            views_of[t.job_id] = view_of(s, False)
            nxt += 1
            arrived = True
        if not live:  # idle cluster: jump to the next arrival
            now = arrivals[nxt].submit_time
            continue

        views = tuple(views_of.values())
        inp = SchedulingInput(now, round_s, views, cluster, lookup, seed)
        t0 = time.perf_counter()
        ranking, pstate = policy.rank(inp, pstate)
        sched_s = time.perf_counter() - t0
        ordered = tuple(map(_JOB, map(views_of.__getitem__, ranking.order)))  # C-level: every active job
        if len(ordered) != len(live):
            raise RuntimeError(f"policy {config.policy} ranked {len(ordered)} of {len(live)} active jobs")
        reused = (reuse_decisions and last is not None and last[0] == ranking.order and last[1] == ranking.pairs
                  and last[2].placement is current)
        if reused:
            decision = unchanged(last[2], ranking.order)  # type: ignore[index]
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

        # progress and accounting; also refreshes the views of jobs that ran on
        finished, outcomes, infeasible, progressed = run_round(decision, live, cols, true_speeds, restart, round_s,
                                                               now, views_of, steady)
        node_of = decision.placement.job_nodes()  # placed jobs, once per round (memoized by the placement)
        busy_gpu_s = busy_gpu_seconds(decision, outcomes, round_s, finished)
        cum_contention += len(live) / cluster.total_gpus
        cum_rounds += 1
        if check_invariants:
            check_progress({jid: (s.trace.duration, s.done_work, s.remaining) for jid, s in live.items()},
                           finished, {r.job_id for r in done})
        for jid in sorted(finished, key=lambda j: (outcomes[j].finish, j)):
            done.append(record_of(live.pop(jid), now, cum_contention, cum_rounds))
            del views_of[jid]
        for jid in running - node_of.keys():  # stopped (preempted): the running flag changes, nothing else
            if jid in live:
                views_of[jid] = view_of(live[jid], False)

        rounds.append(RoundRecord(
            time=now, active=len(views), running=len(node_of),
            packed_pairs=len(decision.packed), migrations=len(decision.migrated),
            preemptions=len(decision.preempted), busy_gpus=decision.placement.busy_gpus(),
            busy_gpu_s=busy_gpu_s, finished=len(finished), scheduling_ms=sched_s * 1e3,
            placement_ms=decision.timings.placement * 1e3, packing_ms=decision.timings.packing * 1e3,
            migration_ms=decision.timings.migration * 1e3, infeasible_pairs=infeasible, reused=reused,
        ))
        current = without(decision.placement, finished)
        stalled = 0 if progressed or nxt < len(arrivals) else stalled + 1
        if stalled >= STALL_ROUNDS:
            raise RuntimeError(f"simulation stalled at t={now:g} s: {len(live)} active jobs made no progress "
                               f"for {STALL_ROUNDS} rounds (policy {config.policy})")
        if promised:
            if arrived or not reused or finished:
                raise InvariantError(f"t={now:g}: fast-forward would have skipped this round, but it is not quiet "
                                     f"(arrival {arrived}, reused {reused}, finished {len(finished)})")
            promised -= 1
        keeps_running = not finished and node_of.keys() == running
        now += round_s
        if quiet is not None and keeps_running and not promised:
            st = stretch_of(decision, live, cols, true_speeds, round_s, infeasible, len(live))
            if st is not None:
                next_arrival = arrivals[nxt].submit_time if nxt < len(arrivals) else math.inf
                bound = upper_bound(st, now, round_s, next_arrival)
                k = quiet.stable_rounds(inp, pstate, ranking, bound) if bound > 0 else 0
                k = quiet_rounds(st, now, round_s, next_arrival, k) if k > 0 else 0
                if check_invariants:
                    promised = k
                elif k > 0:
                    pstate = quiet.skip_rounds(inp, pstate, ranking, k)
                    now = apply_rounds(st, k, now, round_s, rounds)
                    views_of.update(running_views(cols, st.ids, st.slots))
                    share = len(live) / cluster.total_gpus
                    for _ in range(k):
                        cum_contention += share
                    cum_rounds += k
                    stalled = 0
                    skipped += k
        running = node_of.keys() - finished if finished else node_of.keys()
        if on_round is not None:
            on_round(now, len(done), len(arrivals))

    result = SimResult(
        policy=config.name, trace=trace_name, cluster=cluster_spec(cluster), round_duration=round_s,
        seed=seed, jobs=tuple(sorted(done, key=lambda r: (r.submit_time, r.job_id))), rounds=tuple(rounds),
        total_gpus=cluster.total_gpus,
        settings={"noise": noise, "restart": restart.to_json(), "packing": config.engine.packing,
                  "migration": config.engine.migration, "policy": config.policy,
                  "policy_options": dict(config.policy_options), "reference_gpu": true_speeds.reference,
                  "profile": profile.name, "decision_profile": believed.name, "llm_strategy": llm_strategy,
                  "fast_forwarded_rounds": skipped},
    )
    if check_invariants:
        check_result(result, trace, true_speeds.max_factor)
    return result


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


def cluster_spec(c: Cluster) -> str:
    """``20x4:a100`` style text for a cluster (runs of equal nodes collapsed)."""
    parts: list[tuple[int, int, str]] = []
    for n in c.nodes:
        if parts and parts[-1][1:] == (n.num_gpus, n.gpu_type):
            parts[-1] = (parts[-1][0] + 1, n.num_gpus, n.gpu_type)
        else:
            parts.append((1, n.num_gpus, n.gpu_type))
    return ",".join(f"{k}x{g}:{t}" for k, g, t in parts)
