"""Round-based simulator: the same round call the daemon makes, on a virtual clock.

Every round (default 360 s) the jobs that have arrived are ranked by the policy and the engine decides
(``rank_and_decide``, the call the daemon makes), and each placed job advances by its true speed
on its GPUs (alone or packed, chosen strategy, GPU type; ``speeds.py``) after any restart overhead
(``restart.py``), with completion inside the round computed exactly (``progress.py``). With profile
noise n, decisions see a profile whose measured values are multiplied by U[1-n, 1+n], while the true
profile drives progress (the paper's sensitivity study). Deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ..engine import decide
from ..model import Cluster, InputError, JobView, MoveCosts, PackedPair, Placement, RoundDecision
from ..model.gpu_limits import GpuLimits
from ..model.moves import OSCILLATION_ROUNDS, RecentPlacements, is_return, is_shift, partners
from ..policies.base import QuietRounds, Ranking, SchedulingInput
from ..policies.registry import make_policy
from ..presets import SchedulerConfig
from ..profiles import ThroughputProfile
from ..profiles.speeds import SpeedModel
from ..rank_decide import RankedRound, rank_and_decide
from .invariants import InvariantError, check_kept, check_limits, check_progress, check_result, check_round
from .jobstate import JobColumns, LiveJob
from .metrics import JobRecord, RoundRecord, SimResult
from .overheads import Overheads, free_after
from .quiet import apply_rounds, quiet_rounds, stretch_of, upper_bound
from .restart import RestartCost
from .rounds import (
    RoundResult,
    SteadyOutcomes,
    busy_gpu_seconds,
    job_of,
    record_of,
    run_round,
    running_views,
    unchanged,
    view_of,
    without,
)
from .strategies import check_mode, job_parallelism, restrict_packed
from .traces.record import TraceJob

__all__ = ["ProgressCallback", "simulate", "cluster_spec"]

log = logging.getLogger(__name__)

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
    limits: GpuLimits | None = None,
    group_by_user: bool = False,
    overheads: Overheads | None = None,
    move_costs: MoveCosts | None = None,
    remaining_known: bool = True,
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
    skipped; every round the fast-forward promised quiet is checked to be so instead.

    ``limits``: per-user and per-account GPU limits (the trace's ``user`` and ``account`` columns),
    applied by the engine as in the daemon.

    ``overheads``: what a real run adds to a start and a stop (``overheads.py``; none by default).
    ``move_costs``: what the engine believes a move costs, when that is not the simulator's restarts (a
    replay predicts a daemon that planned with its site's ``moves`` section). ``remaining_known``: whether
    those move costs see each job's remaining work (never displacing a job about to finish, counting a
    gain only over what is left), as a simulator can; the daemon cannot (its jobs declare no duration),
    so a replay's prediction of a daemon run turns it off.

    Two users' jobs time-slice a GPU (``SpeedModel.packed``): the truth gives such pairs the profile's
    time-sliced speeds. The engine scores them as ``config.engine.cross_user`` says, and with
    ``group_by_user`` packs only one user's jobs together (the daemon's ``mps.cross_user: never``)."""
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
    _check_trace(trace, cluster, true_speeds)
    if decision_profile is not None:
        _check_trace(trace, cluster, decision_speeds)
    parallelism = {t.job_id: job_parallelism(profile, t.model, t.batch_size, t.num_gpus, llm_strategy)
                   for t in trace} if llm_strategy == "default-pp-always" else {}
    if config.engine.moves is not None:  # the engine's move costs are the simulator's restarts
        config = dataclasses.replace(config, engine=dataclasses.replace(
            config.engine, moves=move_costs or restart.move_costs(config.engine.moves, round_s)))
    run = _Run(trace, cluster, config, believed, decision_speeds, true_speeds, restart, round_s, seed, parallelism,
               check_invariants, reuse_decisions, fast_forward, limits, group_by_user, overheads, remaining_known)

    while run.jobs_left():
        arrived = run.admit_arrivals()  # 1. arrivals join (or jump to the next one on an idle cluster)
        if not run.live:
            continue
        inp, ranked = run.rank_and_decide()  # 2. the policy ranks, the engine decides (or last round's is kept)
        step = run.act(ranked.decision)  # 3. every placed job advances by its true speed
        run.account(ranked.decision, step, ranked.rank_s, ranked.reused, arrived)  # 4. records; finished jobs leave
        run.fast_forward(inp, ranked.ranking, ranked.decision, step)  # 5. certainly quiet rounds applied at once
        if on_round is not None:
            on_round(run.now, len(run.done), len(run.arrivals))

    result = SimResult(
        policy=config.name, trace=trace_name, cluster=cluster_spec(cluster), round_duration=round_s,
        seed=seed, jobs=tuple(sorted(run.done, key=lambda r: (r.submit_time, r.job_id))), rounds=tuple(run.rounds),
        total_gpus=cluster.total_gpus,
        settings={"noise": noise, "restart": restart.to_json(), "packing": config.engine.packing,
                  "migration": config.engine.migration, "policy": config.policy,
                  "policy_options": dict(config.policy_options), "reference_gpu": true_speeds.reference,
                  "profile": profile.name, "decision_profile": believed.name, "llm_strategy": llm_strategy,
                  "fast_forwarded_rounds": run.skipped,
                  "moves": None if config.engine.moves is None else dataclasses.asdict(config.engine.moves),
                  **({"min_speed": config.engine.min_speed} if config.engine.min_speed else {}),
                  **_cross_user_settings(trace, config, group_by_user),
                  **({"limits": dataclasses.asdict(limits)} if limits is not None else {}),
                  **({"overheads": dict(overheads.to_json())} if overheads is not None else {})},
    )
    if check_invariants:
        check_result(result, trace, true_speeds.max_factor)
    return result


def _cross_user_settings(trace: Sequence[TraceJob], config: SchedulerConfig, group_by_user: bool) -> dict[str, Any]:
    """How two users' pairs were scored, for traces of several users (single-user records keep their shape)."""
    if len({t.user for t in trace}) <= 1:
        return {}
    return {"cross_user": "never" if group_by_user else config.engine.cross_user,
            "pairs_below_one": config.engine.pairs_below_one}


class _Run:
    """What a simulation carries from round to round, and one method per step of a round."""

    def __init__(self, trace: Sequence[TraceJob], cluster: Cluster, config: SchedulerConfig,
                 believed: ThroughputProfile, decision_speeds: SpeedModel, true_speeds: SpeedModel,
                 restart: RestartCost, round_s: float, seed: int, parallelism: Mapping[str, tuple[str, ...]],
                 check_invariants: bool, reuse_decisions: bool, fast_forward: bool,
                 limits: GpuLimits | None = None, group_by_user: bool = False,
                 overheads: Overheads | None = None, remaining_known: bool = True) -> None:
        self.cluster, self.config, self.believed, self.limits = cluster, config, believed, limits
        self.overheads, self.remaining_known = overheads, remaining_known
        self.gpu_refs = [(n.name, i) for n in cluster.nodes for i in range(n.num_gpus)]
        self.free_since: dict[tuple[str, int], float] = dict.fromkeys(self.gpu_refs, -math.inf)
        self.group_by_user = group_by_user
        self.lookup = decision_speeds.lookup()
        self.true_speeds, self.restart, self.round_s, self.seed = true_speeds, restart, round_s, seed
        self.parallelism, self.check, self.reuse = parallelism, check_invariants, reuse_decisions
        self.policy = make_policy(config.policy, **dict(config.policy_options))
        self.pstate: Any = self.policy.initial_state()
        self.quiet: QuietRounds | None = None
        if fast_forward and reuse_decisions and isinstance(self.policy, QuietRounds):
            self.quiet = self.policy
        self.arrivals = sorted(trace, key=lambda t: t.submit_time)
        self.nxt = 0  # the next arrival
        self.live: dict[str, LiveJob] = {}
        self.cols = JobColumns(len(self.arrivals))  # the jobs' numbers; slot = arrival order
        self.views_of: dict[str, JobView] = {}  # what the policy sees; rebuilt only for jobs that ran or stopped
        self.done: list[JobRecord] = []
        self.rounds: list[RoundRecord] = []
        self.current = Placement.empty(cluster)
        moves = config.engine.moves
        # the plans before ``current``, newest first: the history cost-aware decisions read
        self.history: deque[Placement] = deque(maxlen=max(OSCILLATION_ROUNDS - 1, moves.recent_rounds if moves else 0))
        self.recent_rounds = moves.recent_rounds if moves is not None else 0
        self.running: AbstractSet[str] = frozenset()  # placed in the round that just ended
        self.now = self.arrivals[0].submit_time if self.arrivals else 0.0
        self.stalled = 0
        self.cum_contention, self.cum_rounds = 0.0, 0
        self.last: tuple[Ranking, RoundDecision] | None = None
        self.steady = SteadyOutcomes(round_s)
        self.skipped = self.promised = 0  # rounds fast-forwarded; under check, promised quiet and checked

    def jobs_left(self) -> bool:
        return self.nxt < len(self.arrivals) or bool(self.live)

    def admit_arrivals(self) -> bool:
        """1. The jobs submitted by now become active; on an idle cluster the clock jumps to the next."""
        arrived = False
        while self.nxt < len(self.arrivals) and self.arrivals[self.nxt].submit_time <= self.now:
            t = self.arrivals[self.nxt]
            job = job_of(t, self.parallelism.get(t.job_id, ()), self.group_by_user)
            s = self.live[t.job_id] = LiveJob(t, job, remaining=t.duration,
                                              contention_at_arrival=self.cum_contention,
                                              rounds_at_arrival=self.cum_rounds, cols=self.cols, k=self.nxt)
            self.views_of[t.job_id] = view_of(s, False)
            self.nxt += 1
            arrived = True
        if not self.live:
            self.now = self.arrivals[self.nxt].submit_time
        return arrived

    def rank_and_decide(self) -> tuple[SchedulingInput, RankedRound]:
        """2. The policy's order over every active job (and its pairs, for policies that pack), and the
        engine's decision, exactly as the daemon asks for it; last round's when nothing changed."""
        inp = SchedulingInput(self.now, self.round_s, tuple(self.views_of.values()), self.cluster, self.lookup,
                              self.seed, self.current)
        ranked = rank_and_decide(self.policy, inp, self.pstate, self.believed, self.config.engine, limits=self.limits,
                                 clock=time.perf_counter, keep=self._unchanged if self.reuse else None,
                                 recent=RecentPlacements(list(self.history)[:self.recent_rounds])
                                 if self.recent_rounds else None, remaining_known=self.remaining_known)
        ranking, decision, request = ranked.ranking, ranked.decision, ranked.request
        self.pstate = ranked.policy_state
        if ranked.reused and self.check:
            full = decide(request, self.believed)
            if full.placement != decision.placement or _pairs(full.packed) != _pairs(decision.packed):
                raise InvariantError(f"t={self.now:g}: reusing last round's decision differs from the engine's")
        self.last = (ranking, decision)
        if self.check:
            check_round(decision, {j.id: j for j in request.jobs}, self.current)
            if self.limits is not None:
                check_limits(decision, request.jobs, self.limits)
            if self.config.keeps_running:
                check_kept(decision, self.current, ranking.held)
        return inp, ranked

    def _unchanged(self, ranking: Ranking) -> RoundDecision | None:
        """Last round's decision when the ranking and the plan are last round's: no job arrived or
        finished, so the engine would map the same logical plan onto it at cost 0."""
        last = self.last
        if last is None or last[0] != ranking or last[1].placement is not self.current or self._may_change(last[1]):
            return None
        return unchanged(last[1], ranking.order)

    def _may_change(self, decision: RoundDecision) -> bool:
        """What moves cost decided something (a stop refused, a pair kept, a plan that moves jobs turned
        down): that changes with time (remaining work, recent moves), so a round that changes nothing
        else is decided again."""
        return decision.cost_bound

    def act(self, decision: RoundDecision) -> RoundResult:
        """3. Progress (restart overheads, packed speeds, finishes inside the round) and counters; also
        refreshes the views of the jobs that ran on."""
        delays = None
        if self.overheads is not None and (decision.started or decision.migrated):
            submitted = {j: self.live[j].trace.submit_time for j in decision.started}
            delays = self.overheads.delays(decision, self.current, self.now, self.round_s, self.free_since, submitted)
        return run_round(decision, self.live, self.cols, self.true_speeds, self.restart, self.round_s, self.now,
                         self.views_of, self.steady, delays)

    def account(self, decision: RoundDecision, step: RoundResult, sched_s: float, reused: bool,
                arrived: bool) -> None:
        """4. The round's record; finished jobs leave with theirs; the plan loses them; the clock moves."""
        finished, outcomes = step.finished, step.outcomes
        if decision.migrated:
            self._count_kinds(decision)
        node_of = decision.placement.job_nodes()
        busy_gpu_s = busy_gpu_seconds(decision, outcomes, self.round_s, finished)
        active = len(self.live)
        self.cum_contention += active / self.cluster.total_gpus
        self.cum_rounds += 1
        if self.check:
            check_progress({jid: (s.trace.duration, s.done_work, s.remaining) for jid, s in self.live.items()},
                           finished, {r.job_id for r in self.done})
        for jid in sorted(finished, key=lambda j: (outcomes[j].held, j)):
            self.done.append(record_of(self.live.pop(jid), self.now, self.cum_contention, self.cum_rounds))
            del self.views_of[jid]
        for jid in self.running - node_of.keys():  # stopped (preempted): the running flag changes, nothing else
            if jid in self.live:
                self.views_of[jid] = view_of(self.live[jid], False)
        timings = decision.timings
        self.rounds.append(RoundRecord(
            time=self.now, active=active, running=len(node_of),
            packed_pairs=len(decision.packed), migrations=len(decision.migrated),
            preemptions=len(decision.preempted), busy_gpus=decision.placement.busy_gpus(),
            busy_gpu_s=busy_gpu_s, finished=len(finished), scheduling_ms=sched_s * 1e3,
            placement_ms=timings.placement * 1e3, packing_ms=timings.packing * 1e3,
            migration_ms=timings.migration * 1e3, infeasible_pairs=step.infeasible, reused=reused,
        ))
        self.history.appendleft(self.current)
        self.current = without(decision.placement, finished)
        if self.overheads is not None and self.overheads.between_s is not None:
            self._track_free(decision, finished, outcomes)
        self.stalled = 0 if step.progressed or self.nxt < len(self.arrivals) else self.stalled + 1
        if self.stalled >= STALL_ROUNDS:
            raise RuntimeError(f"simulation stalled at t={self.now:g} s: {len(self.live)} active jobs made no "
                               f"progress for {STALL_ROUNDS} rounds (policy {self.config.policy})")
        if self.promised:
            if arrived or not reused or finished:
                raise InvariantError(f"t={self.now:g}: fast-forward would have skipped this round, but it is not "
                                     f"quiet (arrival {arrived}, reused {reused}, finished {len(finished)})")
            self.promised -= 1
        self.now += self.round_s

    def _track_free(self, decision: RoundDecision, finished: set[str], outcomes: Mapping[str, Any]) -> None:
        """When each GPU free after this round came free (starts between rounds, ``overheads.py``)."""
        held: dict[tuple[str, int], float] = {}
        gpus = decision.placement.job_gpus()
        for j in finished:
            t = self.now + min(self.round_s, outcomes[j].held)
            for g in gpus.get(j, ()):
                held[g] = max(held.get(g, -math.inf), t)
        busy = {g for gs in self.current.job_gpus().values() for g in gs}
        self.free_since = free_after(self.free_since, held, busy, self.gpu_refs, self.now)

    def _count_kinds(self, decision: RoundDecision) -> None:
        """Each migration that stays within the job's nodes (a shift) or goes back to GPUs it left
        lately (an oscillation), counted on the job (model/moves.py)."""
        before, after = self.current.job_gpus(), decision.placement.job_gpus()
        was, now = partners(self.current), partners(decision.placement)
        earlier = [p.job_gpus() for p in self.history]
        for j in decision.migrated:
            s = self.live[j]
            s.shifts += is_shift(before[j], after[j], was.get(j, ""), now.get(j, ""))
            s.returns += is_return(before[j], after[j], [e.get(j, ()) for e in earlier])

    def fast_forward(self, inp: SchedulingInput, ranking: Ranking, decision: RoundDecision,
                     step: RoundResult) -> None:
        """5. After a round that kept the running set: the rounds that are certainly quiet (no arrival,
        no finish, the same ranking) at once, without ranking them (under check: only promised)."""
        node_of = decision.placement.job_nodes()
        kept_running = not step.finished and node_of.keys() == self.running
        self.running = node_of.keys() - step.finished if step.finished else node_of.keys()
        if self.quiet is None or not kept_running or self.promised or self._may_change(decision):
            return
        st = stretch_of(decision, self.live, self.cols, self.true_speeds, self.round_s, step.infeasible,
                        len(self.live))
        if st is None:
            return
        next_arrival = self.arrivals[self.nxt].submit_time if self.nxt < len(self.arrivals) else math.inf
        bound = upper_bound(st, self.now, self.round_s, next_arrival)
        k = self.quiet.stable_rounds(inp, self.pstate, ranking, bound) if bound > 0 else 0
        k = quiet_rounds(st, self.now, self.round_s, next_arrival, k) if k > 0 else 0
        if self.check:
            self.promised = k
            return
        if k == 0:
            return
        self.pstate = self.quiet.skip_rounds(inp, self.pstate, ranking, k)
        self.now = apply_rounds(st, k, self.now, self.round_s, self.rounds)
        self.history.extendleft([self.current] * min(k, self.history.maxlen or 0))  # nothing moved
        self.views_of.update(running_views(self.cols, st.ids, st.slots))
        share = len(self.live) / self.cluster.total_gpus
        for _ in range(k):  # one addition per round, as the rounds would
            self.cum_contention += share
        self.cum_rounds += k
        self.stalled = 0
        self.skipped += k


def _pairs(packed: Sequence[PackedPair]) -> list[tuple[tuple[str, float, str | None], ...]]:
    """Packed pairs as the same decision may list them: in any order, either job as the host."""
    return sorted(tuple(sorted(((p.placed, p.placed_speed, p.placed_strategy),
                                (p.partner, p.partner_speed, p.partner_strategy)))) for p in packed)


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
