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
from typing import Literal

import numpy as np

from .model import (
    Cluster,
    InputError,
    Job,
    PackedPair,
    PendingJob,
    PendingReason,
    Placement,
    RoundDecision,
    StageTimings,
)
from .model.gpu_limits import GpuLimits
from .placement.consolidate import ConsolidationResult, Unit, place_consolidated, place_units
from .placement.limit_gate import gate as limit_gate
from .placement.migrate import MigrationAlgorithm, migrate
from .placement.node_rules import NodeRule, pack_by_rule, rule_masks, rule_types, rules_of, unit_rules
from .placement.pack import CROSS_USER, CrossUser, PackingMode, check_min_speed, pack
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

    def place(js: Sequence[Job], pairs: Sequence[tuple[str, str]]) -> ConsolidationResult:
        if cfg.placement == "pinned":
            return place_beside(cluster, req.current, js)
        sub = rules if rules is None or len(js) == len(ids) else rules_of(rules, js, ids)
        if pairs or homes is not None or types is not None:
            def walk(with_homes: dict[str, int] | None) -> ConsolidationResult:
                units = _units(js, pairs, with_homes, types)
                return place_units(cluster, units, sub and unit_rules(sub, [u.jobs for u in units], [j.id for j in js]))
            res = walk(homes)
            if cfg.placement == "sticky-fit" and homes:
                res = _unless_stranding(res, js, lambda: walk(None))
            return res
        return place_consolidated(cluster, js, sub)  # one unit per job, no hints: the common case

    gate = limit_gate(req.limits, jobs) if req.limits is not None else None
    if gate is None:
        placed, policy_pairs_kept = place(jobs, req.pairs), req.pairs
    else:
        placed, policy_pairs_kept = gate.place_within(jobs, req.pairs, place)
    t1 = now()

    only = cluster.gpu_types[0] if len(cluster.gpu_types) == 1 else None  # one GPU type: no lookups per job
    gpu_type_of = (dict.fromkeys(placed.placed, only) if only is not None else
                   {j: node_type[refs[0][0]] for j, refs in placed.placement.job_gpus().items()})
    policy_pairs = [_policy_pair(by_id[a], by_id[b], profile, gpu_type_of[a], cfg.cross_user)
                    for a, b in policy_pairs_kept if a in gpu_type_of]
    pairs: list[PackedPair] = list(policy_pairs)
    pending: list[PendingJob] = list(placed.pending)
    if gate is not None:
        gate.hold_over(map(by_id.__getitem__, map(_JOB_ID, placed.pending)))
    if held:  # in policy order among the others
        pending += [PendingJob(j, PendingReason.PRIORITY, HELD_DETAIL) for j in ids if j in held]
        pos = dict(zip(ids, range(len(ids))))
        pending.sort(key=lambda p: pos[p.job_id])
    if cfg.packing != "off" and not req.pairs:
        placed_jobs = list(map(by_id.__getitem__, placed.placed))
        waiting = list(map(by_id.__getitem__, map(_JOB_ID, placed.pending)))
        if gate is not None:
            waiting = [j for j in waiting if j.id not in gate.limited]
        if rules is None:
            packed_now: Sequence[PackedPair] = pack(
                placed_jobs, waiting, profile, gpu_type_of, mode=cfg.packing, objective=cfg.objective,
                min_speed=cfg.min_speed, cross_user=cfg.cross_user, below_one=cfg.pairs_below_one).pairs
        else:
            packed_now = pack_by_rule(placed_jobs, waiting, profile, gpu_type_of, rules, ids, placed.placement,
                                      cluster, mode=cfg.packing, objective=cfg.objective, min_speed=cfg.min_speed,
                                      cross_user=cfg.cross_user, below_one=cfg.pairs_below_one)
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
    logical = _with_partners(placed.placement, [p for p in pairs if p not in policy_pairs])
    t2 = now()

    migrated: tuple[str, ...] = ()
    cost = 0.0
    final = logical
    if req.current is not None and cfg.placement != "pinned":  # pinned: the plan is physical already
        types_now = node_type if rules is None else rule_types(node_type, cluster.shape[0], rules, ids, logical)
        res = migrate(req.current, logical, algorithm=cfg.migration, node_types=types_now)
        final, migrated, cost = res.placement, res.migrated, res.cost
    t3 = now()

    strategies, speeds = _speeds(final, pairs, by_id, profile, node_type, only)
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
    return RoundDecision(
        placement=final,
        started=tuple([j for j in ids if j in started]) if started else (),
        preempted=preempted_sorted,
        migrated=tuple([j for j in ids if j in migrated_set]) if migrated_set else (),
        kept=tuple([j for j in ids if j in kept]),
        packed=tuple(pairs),
        pending=tuple(pending),
        strategies=strategies,
        speeds=speeds,
        migration_cost=cost,
        timings=StageTimings(placement=t1 - t0, packing=t2 - t1, migration=t3 - t2),
    )


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
