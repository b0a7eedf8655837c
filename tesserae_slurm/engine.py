"""The decision engine: one pure function from a round's inputs to a RoundDecision.

Flow (paper Listing 1): consolidated placement in policy order -> packing of pending jobs onto
placed ones -> migration minimization against the current physical placement. Operators' node rules
(`tesserae pin|keep-off`) hold in all three (placement/node_rules.py). Per-user and per-account GPU limits,
when given, act inside the first two steps (placement/limit_gate.py). No I/O, no Slurm;
the only clock is the one the shell passes in, used for stage timings alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, filterfalse
from operator import itemgetter
from typing import Literal, NamedTuple

import numpy as np

from .model import (
    Cluster,
    InputError,
    Job,
    MoveCosts,
    MoveReason,
    PackedPair,
    PendingJob,
    PendingReason,
    Placement,
    RoundDecision,
    StageTimings,
)
from .model.gpu_limits import GpuLimits
from .model.placement import GpuRef
from .placement.consolidate import ConsolidationResult, Unit, place_consolidated, place_kept, place_units
from .placement.limit_gate import LimitGate
from .placement.limit_gate import gate as limit_gate
from .placement.migrate import MigrationAlgorithm, migrate
from .placement.move_value import MoveValue, Plan
from .placement.node_rules import NodeRule, NodeRules, pack_by_rule, rule_masks, rule_types, rules_of, unit_rules
from .placement.pack import CROSS_USER, ONE, CrossUser, PackingMode, check_min_speed, pack
from .placement.pinned import place_beside
from .profiles import ThroughputProfile

Clock = Callable[[], float]
_SPEED = itemgetter(0)
_STRATEGY = itemgetter(1)  # of best_isolated's (speed, strategy)
_JOB_ID = itemgetter(0)  # of a PendingJob


HELD_DETAIL = "held by the policy this round (a backfill reservation or a job its rules keep waiting)"

PlacementMode = Literal["best-fit", "sticky", "sticky-fit", "pinned"]
PLACEMENTS: tuple[str, ...] = ("best-fit", "sticky", "sticky-fit", "pinned")


@dataclass(frozen=True)
class EngineConfig:
    packing: PackingMode = "on"
    migration: MigrationAlgorithm = "tesserae"
    objective: Literal["throughput", "paper-sum"] = "throughput"
    # sticky: a job returns to its node when it fits (fewer moves); sticky-fit: sticky, unless that leaves a
    # job waiting that best fit would place (then best fit, for that round; _unless_stranding); pinned: running
    # jobs keep their GPUs and new ones are placed on what is free, never relabeled (plain Slurm; placement/pinned.py)
    placement: PlacementMode = "best-fit"
    # packing without victims: a pair only if each member keeps this normalized speed (0 = off; pack.py)
    min_speed: float = 0.0
    # two users' jobs time-slice a GPU (one MPS server per GPU at a time): score their pairs with the
    # profile's time-sliced speeds ("timeslice"), or with the MPS speeds like one user's ("mps"; pack.py)
    cross_user: CrossUser = "timeslice"
    # form pairs whose normalized speeds sum below 1.0 (a site's choice; pack.py)
    pairs_below_one: bool = False
    # cost-aware decisions: running jobs keep their GPUs, and a job is moved or preempted only when that pays
    # for its cost (placement/move_value.py; the shells set the costs); None: the paper's plan, rebuilt from
    # nothing each round and relabeled
    moves: MoveCosts | None = field(default_factory=MoveCosts)

    def __post_init__(self) -> None:
        check_min_speed(self.min_speed)
        if self.cross_user not in CROSS_USER:
            raise InputError(f"cross_user must be one of {', '.join(CROSS_USER)}, got {self.cross_user!r}")
        if self.placement not in PLACEMENTS:
            raise InputError(f"placement must be one of {', '.join(PLACEMENTS)}, got {self.placement!r}")


@dataclass(frozen=True)
class RoundRequest:
    cluster: Cluster
    jobs: tuple[Job, ...]  # active jobs in the policy's priority order
    current: Placement | None = None  # physical placement now (None: empty cluster)
    pairs: tuple[tuple[str, str], ...] = ()  # co-locations decided by the policy itself (Gavel LPs)
    config: EngineConfig = field(default_factory=EngineConfig)
    rules: Mapping[str, NodeRule] = field(default_factory=dict)  # job -> operator's node rule
    limits: GpuLimits | None = None  # per-user/account GPU limits (site configuration), for every policy
    held: tuple[str, ...] = ()  # jobs the policy keeps waiting this round (Ranking.held): never placed
    # for cost-aware decisions (config.moves): seconds of work each job has left at its speed alone, where
    # the shell knows it, and each job's GPUs in the rounds before ``current``, newest first (kept by the shell)
    remaining: Mapping[str, float] = field(default_factory=dict)
    recent: Mapping[str, tuple[tuple[GpuRef, ...], ...]] = field(default_factory=dict)


def _no_clock() -> float:
    return 0.0


def _units(jobs: Sequence[Job], pairs: Sequence[tuple[str, str]], home: dict[str, int] | None = None,
           types: Callable[[Job], tuple[str, ...] | None] | None = None) -> list[Unit]:
    """Policy-chosen pairs are placed as one unit at the position of their first member.

    ``home``: job -> node index it ran on alone last round (sticky placement); ``types``: the GPU
    types a job should try, best first (mixed clusters).
    """
    home = home or {}
    prefer = types or (lambda _j: None)
    if not pairs:
        return [Unit((j,), home.get(j.id, -1), prefer(j)) for j in jobs]
    by_id = {j.id: j for j in jobs}
    partner: dict[str, str] = {}
    for a, b in pairs:
        if a not in by_id or b not in by_id:
            raise InputError(f"pair ({a!r}, {b!r}) names a job that is not active")
        if a in partner or b in partner or a == b:
            raise InputError(f"job in more than one pair: ({a!r}, {b!r})")
        if by_id[a].num_gpus != by_id[b].num_gpus:
            raise InputError(f"pair ({a!r}, {b!r}) has different GPU counts")
        partner[a], partner[b] = b, a
    units, seen = [], set()
    for j in jobs:
        if j.id in seen:
            continue
        seen.add(j.id)
        if j.id in partner:
            seen.add(partner[j.id])
            units.append(Unit((j, by_id[partner[j.id]]), home.get(j.id, -1), prefer(j)))
        else:
            units.append(Unit((j,), home.get(j.id, -1), prefer(j)))
    return units


def _with_partners(plan: Placement, pairs: Sequence[PackedPair]) -> Placement:
    """The consolidation plan with each packed partner beside its host on the host's GPUs."""
    partner_of = {p.placed: p.partner for p in pairs}
    if not partner_of:
        return plan
    rows = plan.rows()
    number = dict(zip(rows.ids, range(len(rows.ids))))
    partner = np.full(len(rows.ids) + 1, -1, dtype=np.int64)  # placed job number -> its partner's; -1 stays
    partner[[number[j] for j in partner_of]] = np.arange(len(rows.ids), len(rows.ids) + len(partner_of))
    table = rows.table.copy()
    lone = (table[:, 0] >= 0) != (table[:, 1] >= 0)  # hosts of policy pairs hold their partner already
    table[lone, 0] = table[lone].max(axis=1)  # the lone job in column 0, its partner (or none) in 1
    table[lone, 1] = partner[table[lone, 0]]
    return Placement.from_rows(rows._replace(ids=rows.ids + tuple(partner_of.values()), table=table))


def decide(req: RoundRequest, profile: ThroughputProfile, clock: Clock | None = None) -> RoundDecision:
    now = clock or _no_clock
    cluster, cfg = req.cluster, req.config
    ids = [j.id for j in req.jobs]
    by_id = dict(zip(ids, req.jobs))
    if len(by_id) != len(ids):
        raise InputError("a job id appears twice in the job list")
    node_type = cluster.node_types
    if req.current is not None:
        req.current.check_fits(cluster)
    held = frozenset(req.held)
    jobs = tuple([j for j in req.jobs if j.id not in held]) if held else req.jobs

    t0 = now()
    homes = _homes(req, cluster) if cfg.placement in ("sticky", "sticky-fit") else None
    types = _type_preference(profile, cluster)
    rules = rule_masks(req.jobs, req.rules, cluster) if req.rules else None  # once a round
    if rules is not None and cfg.placement == "pinned":
        raise InputError("operators' node rules (pin, keep-off) need a placement that may move jobs, "
                         "not 'pinned' (slurm-backfill)")

    def sub_rules(js: Sequence[Job]) -> NodeRules | None:
        return rules if rules is None or len(js) == len(ids) else rules_of(rules, js, ids)

    def place(js: Sequence[Job], pairs: Sequence[tuple[str, str]]) -> ConsolidationResult:
        if cfg.placement == "pinned":
            return place_beside(cluster, req.current, js)
        sub = sub_rules(js)
        if pairs or homes is not None or types is not None:
            def walk(with_homes: dict[str, int] | None) -> ConsolidationResult:
                units = _units(js, pairs, with_homes, types)
                return place_units(cluster, units, sub and unit_rules(sub, [u.jobs for u in units], [j.id for j in js]))
            res = walk(homes)
            if cfg.placement == "sticky-fit" and homes:
                res = _unless_stranding(res, js, lambda: walk(None))
            return res
        return place_consolidated(cluster, js, sub)  # one unit per job, no hints: the common case

    def consolidate(walk: Callable[[Sequence[Job], Sequence[tuple[str, str]]], ConsolidationResult],
                    homed: frozenset[str] = frozenset()
                    ) -> tuple[ConsolidationResult, Sequence[tuple[str, str]], LimitGate | None]:
        """``walk`` under the limits; ``homed``: the jobs whose homes it reserves (a keep-first walk's)."""
        gate = limit_gate(req.limits, jobs) if req.limits is not None else None
        if gate is None:
            return walk(jobs, req.pairs), req.pairs, None
        placed, kept = gate.place_within(jobs, req.pairs, walk, homed)
        return placed, kept, gate

    spent = [0.0, 0.0, 0.0]  # placement, packing, migration

    def finish(placed: ConsolidationResult, pairs_kept: Sequence[tuple[str, str]], gate: LimitGate | None,
               value: MoveValue | None) -> _Outcome:
        """Packing and migration of one consolidation (``value``: of the keep-first walk)."""
        t1 = now()
        out = _pack_stage(req, profile, by_id, ids, held, placed, pairs_kept, gate, rules, value)
        t2 = now()
        final, migrated, cost = out.logical, tuple[str, ...](), 0.0
        if req.current is not None and cfg.placement != "pinned":  # pinned: the plan is physical already
            # the keep-first plan is physical already; relabeling it still undoes a swap of equal jobs
            types_now = node_type if rules is None else rule_types(node_type, cluster.shape[0], rules, ids, out.logical)
            res = migrate(req.current, out.logical, algorithm=cfg.migration, node_types=types_now)
            final, migrated, cost = res.placement, res.migrated, res.cost
        spent[1] += t2 - t1
        spent[2] += now() - t2
        return out._replace(final=final, migrated=migrated, cost=cost)

    value = None
    cost_bound = False
    current = req.current
    if cfg.moves is not None and current is not None and cfg.placement != "pinned" and not req.pairs:
        value = MoveValue(cluster, current, req.jobs, cfg.moves, profile, req.remaining, req.recent, held,
                          frozenset(req.rules), cfg.cross_user)

    if value is None or current is None:
        placed, pairs_kept, gate = consolidate(place)
        spent[0] += now() - t0
        chosen = finish(placed, pairs_kept, gate, None)
    else:
        mv = value

        def keep_first(js: Sequence[Job], _pairs: Sequence[tuple[str, str]]) -> ConsolidationResult:
            u = mv.units(js, types)
            sub = sub_rules(js)
            return place_kept(cluster, u.ids, u.need, u.width, u.types, u.homes,
                              sub and unit_rules(sub, u.jobs, [j.id for j in js]))

        placed, _, gate = consolidate(keep_first, frozenset(current.jobs()) if req.limits is not None else frozenset())
        # it would run if running jobs moved: maybe the paper's plan pays (a job its limit stops would not)
        stranded = [j for j in placed.movable if gate is None or j not in gate.limited]
        paper = None
        cost_bound = placed.cost_bound or bool(value.kept_pairs)
        # no keep-first walk settles the limits (skipping a running job moves the jobs ranked ahead of it so
        # that it fits again): the paper's plan, whose walk places each job by the jobs ahead alone
        unsettled = gate is not None and not gate.settled
        if stranded or unsettled:  # the paper's plan (best fit from nothing) places it: if that pays for its moves
            paper, paper_pairs, paper_gate = consolidate(place)
        spent[0] += now() - t0
        if unsettled and paper is not None:
            cost_bound = True
            chosen = finish(paper, paper_pairs, paper_gate, None)
        else:
            chosen = finish(placed, (), gate, value)
            if paper is not None and stranded[0] in paper.placed:
                cost_bound = True
                other = finish(paper, paper_pairs, paper_gate, None)
                if value.net_gain(_plan_of(chosen, current), _plan_of(other, current)) is not None:
                    chosen = other
        settled = value.settle(chosen.final, chosen.migrated)
        if settled is not chosen.final:
            res = migrate(current, settled, algorithm="gavel")
            chosen = chosen._replace(final=settled, migrated=res.migrated, cost=res.cost)

    final, pairs, migrated, pending = chosen.final, chosen.pairs, chosen.migrated, chosen.pending
    strategies, speeds = _speeds(final, pairs, by_id, profile, node_type,
                                 cluster.gpu_types[0] if len(cluster.gpu_types) == 1 else None)
    before: set[str] = req.current.jobs() if req.current is not None else set()
    after = final.jobs()
    migrated_set = set(migrated)
    started, kept = after - before, (after & before) - migrated_set
    preempted = before - after  # may name jobs the policy no longer lists: those go last, by id
    if preempted:
        order = {j: i for i, j in enumerate(ids)}
        preempted_sorted = tuple(sorted(preempted, key=lambda j: (order.get(j, len(order)), j)))
    else:
        preempted_sorted = ()
    migrated_sorted = tuple([j for j in ids if j in migrated_set]) if migrated_set else ()
    moves: tuple[MoveReason, ...] = ()
    if value is not None:
        limited = {p.job_id: p.detail for p in pending if p.reason is PendingReason.LIMIT} if preempted_sorted else {}
        moves = value.reasons(final, migrated_sorted, preempted_sorted, pairs, speeds, limited)
    return RoundDecision(
        placement=final,
        started=tuple([j for j in ids if j in started]) if started else (),
        preempted=preempted_sorted,
        migrated=migrated_sorted,
        kept=tuple([j for j in ids if j in kept]),
        packed=tuple(pairs),
        pending=tuple(pending),
        strategies=strategies,
        speeds=speeds,
        migration_cost=chosen.cost,
        timings=StageTimings(placement=spent[0], packing=spent[1], migration=spent[2]),
        moves=moves,
        cost_bound=value is not None and (cost_bound or _may_split(final, pairs)),
    )


def _may_split(final: Placement, pairs: Sequence[PackedPair]) -> bool:
    """A pair runs where a node has the GPUs idle to run one of its jobs alone: whether that split pays
    for its move turns on the horizon left and on past moves, so the next round may split it."""
    if not pairs:
        return False
    rows = final.rows()
    idle = (rows.table[:, 0] < 0) & (rows.table[:, 1] < 0)
    if not idle.any():
        return False
    most = int(np.bincount(rows.layout.node_of[idle], minlength=len(rows.names)).max())
    gpus = final.job_gpus()
    return any(len(gpus[p.placed]) <= most for p in pairs if p.placed in gpus)


def _plan_of(o: _Outcome, current: Placement) -> Plan:
    return Plan(o.final, tuple(o.pairs), o.migrated, frozenset(current.jobs() - o.final.jobs()))


class _Outcome(NamedTuple):
    """One consolidation carried through packing and migration."""

    logical: Placement  # the plan with packed partners, before relabeling
    pairs: list[PackedPair]
    pending: list[PendingJob]
    final: Placement
    migrated: tuple[str, ...] = ()
    cost: float = 0.0


def _pack_stage(req: RoundRequest, profile: ThroughputProfile, by_id: dict[str, Job], ids: list[str],
                held: frozenset[str], placed: ConsolidationResult, policy_pairs_kept: Sequence[tuple[str, str]],
                gate: LimitGate | None, rules: NodeRules | None, value: MoveValue | None) -> _Outcome:
    """Packing (paper Algorithm 3) onto one consolidation, and the waiting jobs with their reasons.
    With ``value`` (cost-aware decisions), the pairs the walk kept as units are pairs already, and a
    partner whose host the walk placed stays with it."""
    cluster, cfg = req.cluster, req.config
    node_type = cluster.node_types
    only = cluster.gpu_types[0] if len(cluster.gpu_types) == 1 else None  # one GPU type: no lookups per job
    gpu_type_of = (dict.fromkeys(placed.placed, only) if only is not None else
                   {j: node_type[refs[0][0]] for j, refs in placed.placement.job_gpus().items()})
    fixed = list(policy_pairs_kept) + (value.kept_pair_list(placed.placed) if value is not None else [])
    policy_pairs = [_policy_pair(by_id[a], by_id[b], profile, gpu_type_of[a], cfg.cross_user)
                    for a, b in fixed if a in gpu_type_of]
    pairs: list[PackedPair] = list(policy_pairs)
    pending: list[PendingJob] = list(placed.pending)
    if gate is not None:
        gate.hold_over(map(by_id.__getitem__, map(_JOB_ID, placed.pending)))
    if held:  # in policy order among the others
        pending += [PendingJob(j, PendingReason.PRIORITY, HELD_DETAIL) for j in ids if j in held]
        pos = dict(zip(ids, range(len(ids))))
        pending.sort(key=lambda p: pos[p.job_id])
    if cfg.packing != "off" and not req.pairs:
        paired = {j for pair in fixed for j in pair}
        placed_jobs = [by_id[j] for j in placed.placed if j not in paired] if paired else \
            list(map(by_id.__getitem__, placed.placed))
        waiting = list(map(by_id.__getitem__, map(_JOB_ID, placed.pending)))
        if gate is not None:
            waiting = [j for j in waiting if j.id not in gate.limited]
        sticky: list[PackedPair] = []
        if value is not None:  # a partner stays with its host while both run
            for h, g in value.sticky_pairs(placed_jobs, waiting):
                if g in req.rules:  # an operator's rule: packing decides where it may go
                    continue
                pair = _sticky_pair(by_id[h], by_id[g], value, gpu_type_of[h], cfg.min_speed, cfg.pairs_below_one)
                if pair is not None:
                    sticky.append(pair)
            if sticky:
                hosts = {p.placed for p in sticky}
                guests = {p.partner for p in sticky}
                placed_jobs = [j for j in placed_jobs if j.id not in hosts]
                waiting = [j for j in waiting if j.id not in guests]
        if rules is None:
            packed_now: Sequence[PackedPair] = pack(
                placed_jobs, waiting, profile, gpu_type_of, mode=cfg.packing, objective=cfg.objective,
                min_speed=cfg.min_speed, cross_user=cfg.cross_user, below_one=cfg.pairs_below_one).pairs
        else:
            packed_now = pack_by_rule(placed_jobs, waiting, profile, gpu_type_of, rules, ids, placed.placement,
                                      cluster, mode=cfg.packing, objective=cfg.objective, min_speed=cfg.min_speed,
                                      cross_user=cfg.cross_user, below_one=cfg.pairs_below_one)
        packed_now = [*sticky, *packed_now]
        if gate is not None:
            packed_now = gate.accept_pairs(packed_now, dict(zip(ids, range(len(ids)))), by_id)
        pairs.extend(packed_now)
        if packed_now:  # most rounds of big traces pack nobody new
            packed_ids = {p.partner for p in packed_now}
            pending = [p for p in pending if p.job_id not in packed_ids]
    if gate is not None and gate.limited:
        at = dict(zip(ids, range(len(ids))))
        limited = gate.pending()
        gone = {p.job_id for p in limited}
        pending = sorted([p for p in pending if p.job_id not in gone] + limited, key=lambda p: at[p.job_id])
    kept = set(policy_pairs)  # a set: thousands of kept pairs at a big site
    logical = _with_partners(placed.placement, [p for p in pairs if p not in kept])
    return _Outcome(logical, pairs, pending, logical)


def _sticky_pair(host: Job, guest: Job, value: MoveValue, gpu_type: str, min_speed: float,
                 below_one: bool) -> PackedPair | None:
    """The pair running now, if packing would still form it: both packable, in one group, with a gain
    over the host alone, each member at least ``min_speed``, and a speed sum of one unless pairs below
    one are allowed."""
    if host.no_pack or guest.no_pack or host.group != guest.group or host.num_gpus != guest.num_gpus:
        return None
    best = value.pair(host, guest, gpu_type)
    if best is None or min(best.a_speed, best.b_speed) < max(min_speed, 1e-9):
        return None
    if best.a_speed + best.b_speed <= value.alone(host, gpu_type) + 1e-6:
        return None
    if not below_one and best.a_speed + best.b_speed < ONE:
        return None
    return PackedPair(host.id, guest.id, best.a_speed, best.b_speed, best.a_strategy, best.b_strategy)


_STRANDED = (PendingReason.CONSOLIDATION, PendingReason.NODES)


def _unless_stranding(sticky: ConsolidationResult, order: Sequence[Job],
                      best_fit: Callable[[], ConsolidationResult]) -> ConsolidationResult:
    """``sticky``, unless returning jobs to their nodes left a job waiting that best fit places: the
    first job in policy ``order`` that one plan places and the other does not decides (both walks
    placed the same jobs before it, so the same GPUs were free at its turn). Only a job that waits
    with enough GPUs free, spread over too many nodes (``Consolidation``, or ``Nodes`` under an
    operator's rule), can be that job, so best fit is walked only when ``sticky`` has one."""
    if not any(p.reason in _STRANDED for p in sticky.pending):
        return sticky
    alt = best_fit()
    a, b = set(sticky.placed), set(alt.placed)
    for j in order:
        if (j.id in a) != (j.id in b):
            return alt if j.id in b else sticky
    return sticky


def _homes(req: RoundRequest, cluster: Cluster) -> dict[str, int]:
    """Node index of every job that ran on a single node last round."""
    if req.current is None:
        return {}
    index = {n.name: i for i, n in enumerate(cluster.nodes)}
    return {j: index[refs[0][0]] for j, refs in req.current.job_gpus().items()
            if all(node == refs[0][0] for node, _ in refs)}


def _type_preference(profile: ThroughputProfile, cluster: Cluster) -> Callable[[Job], tuple[str, ...] | None] | None:
    """On a mixed cluster, a job tries the GPU type it runs fastest on first (absolute throughput
    where the profile measured it, e.g. Gavel's table; unmeasured types after, in name order)."""
    types = cluster.gpu_types
    if len(types) < 2:
        return None
    memo: dict[tuple[str, str, int], tuple[str, ...]] = {}

    def prefer(job: Job) -> tuple[str, ...]:
        k = (job.model, job.batch_size, job.num_gpus)
        if k not in memo:
            speed = {}
            for t in types:
                try:
                    speed[t] = profile.isolated_throughput(profile.job_class(job).key, t)
                except InputError:
                    speed[t] = None
            memo[k] = tuple(sorted(types, key=lambda t: (speed[t] is None, -(speed[t] or 0.0), t)))
        return memo[k]

    return prefer


def _policy_pair(a: Job, b: Job, profile: ThroughputProfile, gpu_type: str, cross_user: CrossUser) -> PackedPair:
    """A pair the policy chose, with its speeds: time-sliced ones for two users' jobs (``cross_user``)."""
    best = profile.best_pair(a, b, gpu_type, "timeslice" if cross_user == "timeslice" and a.user != b.user else "mps")
    if best is None:  # the policy packed a pair the profile cannot run together: record it as 0 speed
        return PackedPair(a.id, b.id, 0.0, 0.0)
    return PackedPair(a.id, b.id, best.a_speed, best.b_speed, best.a_strategy, best.b_strategy)


def _speeds(final: Placement, pairs: Sequence[PackedPair], by_id: dict[str, Job],
            profile: ThroughputProfile, node_type: Mapping[str, str],
            only: str | None = None) -> tuple[dict[str, str], dict[str, float]]:
    """Each placed job's speed and strategy; ``only``: the cluster's one GPU type, if it has one."""
    strategies: dict[str, str] = {}
    speeds: dict[str, float] = {}
    for p in pairs:
        speeds[p.placed], speeds[p.partner] = p.placed_speed, p.partner_speed
        if p.placed_strategy:
            strategies[p.placed] = p.placed_strategy
        if p.partner_strategy:
            strategies[p.partner] = p.partner_strategy
    node_of = final.job_nodes()
    alone = list(filterfalse(speeds.__contains__, node_of))  # unpacked jobs, in placement order
    if not by_id.keys() >= set(alone):
        alone = [j for j in alone if j in by_id]
    best = profile.best_isolated_many(list(map(by_id.__getitem__, alone)),
                                      [only] * len(alone) if only is not None else
                                      [node_type[node_of[j]] for j in alone])
    speeds.update(zip(alone, map(_SPEED, best)))
    chosen = list(map(_STRATEGY, best))
    strategies.update(compress(zip(alone, chosen), chosen))  # only the jobs that have a strategy
    return strategies, speeds
