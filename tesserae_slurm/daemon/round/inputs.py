"""The decision's inputs: the schedulable jobs as the policy and the engine see them, the GPUs each
placed job holds, and that accounting as the current Placement.

A job is scheduled only when Slurm still shows it, its metadata keeps the site's job rules
(``site/job_rules.py``: a hand-written Comment is never placed unchecked), the profile knows it, and
neither an administrator nor an operator holds it; every job left out gets the reason it is shown
(docs/daemon.md, "The round"). A placed job counts where it is even when it cannot be scheduled: the
plan then stops it. In a dry run the accounting is the shadow placement of the last dry round.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...model import Cluster, GpuRef, InputError, Job, JobView, Placement
from ...model.meta import JobMeta
from ...profiles import ThroughputProfile
from ...site.config import SiteConfig
from ...site.job_rules import check_meta
from ...site.partition import PartitionShape, shape_from_nodes
from ...slurm import SlurmJob
from ..operators.admin import Standing, hold_reason
from ..state.gpuset import GpuMap, parse_gpus
from ..state.journal import Journal
from ..state.store import PENDING, PLACED_STATES, RUNNING, STARTING
from .guard import load_holds
from .observe import Snapshot
from .transitions import ADMIN_HOLD

log = logging.getLogger(__name__)
SCHEDULABLE = (PENDING, STARTING, RUNNING)
# the columns the round's inputs need of every schedulable job, and those the record may write (RoundInputs.rows)
_READ = ("job_id", "state", "gpus", "meta", "user", "submit_time", "attained_service", "executed_time",
         "rounds_run", "work_done", "reason", "packed_with", "speed")


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
    # each placed job's GPUs in the last rounds' decisions, newest first (cost-aware decisions' hysteresis)
    recent: Mapping[str, tuple[tuple[GpuRef, ...], ...]] = field(default_factory=dict)
    nodes_out: Mapping[str, tuple[int, str]] = field(default_factory=dict)  # node left out -> (GPUs, why)
    # jobs an administrator holds in Slurm (JobHeldAdmin, not the daemon's own hold), running ones too:
    # `scontrol hold` of a running job leaves it running, and pending once it stops
    held_in_slurm: tuple[str, ...] = ()
    rows: Mapping[str, Any] = field(default_factory=dict)  # each schedulable job's row as read (its columns)


class InputBuilder:
    """Builds each round's inputs; remembers the priority Slurm last gave each job (``site_priority``)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.slurm_priority: dict[str, int] = {}

    def build(self, snap: Snapshot, cfg: SiteConfig, profile: ThroughputProfile, operators: Standing,
              dry_run: bool) -> RoundInputs:
        jobs: dict[str, Job] = {}
        views: list[JobView] = []
        actual: dict[str, GpuMap] = {}
        excluded: dict[str, str] = {}
        rows = sorted(self.journal.store.job_columns(_READ, SCHEDULABLE), key=lambda r: (r.submit_time, int(r.job_id)))
        holds = load_holds(self.journal.store)
        shape = shape_from_nodes(snap.nodes, cfg)
        broken: dict[JobMeta, str] = {}  # metadata checked this round -> what is wrong ("": nothing); few distinct
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
            if r.job_id in operators.holds:  # `tesserae hold`: never placed until released
                excluded[r.job_id] = hold_reason(operators.holds[r.job_id])
                continue
            try:
                meta = JobMeta.decode(r.meta)
                if meta not in broken:
                    broken[meta] = _broken(meta, shape, profile)
                if broken[meta]:
                    raise InputError(broken[meta])
            except InputError as exc:
                excluded[r.job_id] = f"invalid tesserae metadata: {exc}"
                log.warning("job %s not scheduled: invalid tesserae metadata: %s", r.job_id, exc)
                continue
            try:
                job = meta.job(r.job_id, r.user, group=r.user if cfg.mps.cross_user == "never" else "",
                               account=mj.slurm.account)  # per-account GPU limits
                profile.job_class(job)
            except InputError as exc:
                excluded[r.job_id] = f"Unschedulable: {exc}"
                continue
            jobs[r.job_id] = job
            prio = site_priority(self.slurm_priority, r.job_id, mj.slurm)
            views.append(JobView(job, r.submit_time, r.attained_service, r.executed_time, r.rounds_run,
                                 running=placed, site_priority=prio, nice=mj.slurm.nice, work_done=r.work_done))
        self.slurm_priority = {j: p for j, p in self.slurm_priority.items() if j in jobs}
        if dry_run:
            shadow = self.journal.load_shadow()
            actual = {j: g for j, g in _gpu_maps(shadow).items() if j in jobs} if shadow is not None else {}
        current, problems = current_placement(snap.cluster, actual, snap.gpu_index)
        for p in problems:
            log.error("accounting inconsistency: %s", p)
            self.journal.event(snap.time, "error", f"accounting inconsistency: {p}")
        recent = recent_placements(self.journal, sorted(actual), cfg.moves.recent_rounds, snap.gpu_index) \
            if cfg.moves.enabled and cfg.moves.recent_rounds else {}
        nodes_out = {n.name: (n.gpus, snap.excluded[n.name]) for n in snap.nodes if n.name in snap.excluded}
        held = tuple(sorted(j for j, mj in snap.jobs.items() if mj.slurm.state_reason == ADMIN_HOLD and j not in holds))
        return RoundInputs(snap.cluster, jobs, tuple(views), actual, current, excluded, snap.gpu_index,
                           snap.held_by_others, recent, nodes_out, held, {r.job_id: r for r in rows})


def _broken(meta: JobMeta, shape: PartitionShape, profile: ThroughputProfile) -> str:
    """What ``check_meta`` finds wrong with ``meta``, "" where nothing."""
    try:
        check_meta(meta, shape, profile)
    except InputError as exc:
        return str(exc)
    return ""


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


def recent_placements(journal: Journal, jobs: Sequence[str], rounds: int,
                      gpu_index: Mapping[str, tuple[int, ...]] | None = None
                      ) -> dict[str, tuple[tuple[GpuRef, ...], ...]]:
    """Each of ``jobs``' GPUs in the last ``rounds`` decided rounds, newest first (``()`` in a round that
    did not place it), in the engine's indices (``gpu_index`` as for ``current_placement``)."""
    decided = [r.round_id for r in journal.store.rounds(limit=rounds + 2)
               if r.decision_json not in ("", "{}") and r.status not in ("skipped", "failed")][:rounds]
    if not decided or not jobs:
        return {}
    engine = {n: {real: k for k, real in enumerate(idx)} for n, idx in (gpu_index or {}).items()}
    where: dict[tuple[int, str], tuple[GpuRef, ...]] = {}
    for row in journal.store.placements_of(decided, list(jobs)):
        refs = [(n, engine[n].get(g, -1) if n in engine else g) for n, idx in parse_gpus(row.gpus).items() for g in idx]
        where[(row.round_id, row.job_id)] = tuple(sorted(r for r in refs if r[1] >= 0))
    return {j: seen for j in jobs if any(seen := tuple(where.get((r, j), ()) for r in decided))}


def site_priority(memory: dict[str, int], job_id: str, sj: SlurmJob) -> float:
    """Slurm's priority for the slurm-priority order. Slurm computes none for a held job (squeue and
    sprio give 0), and the daemon holds every job it has not started: such a job keeps the last
    priority Slurm gave it while not held (``memory``, this daemon's), else 0; ties then go to the
    lower nice, which Slurm shows on held jobs too, then to arrival."""
    if sj.priority > 0 and not sj.held:
        memory[job_id] = sj.priority
    return float(memory.get(job_id, 0))


def _gpu_maps(p: Placement) -> dict[str, dict[str, tuple[int, ...]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for job, refs in p.job_gpus().items():
        for node, g in refs:
            out.setdefault(job, {}).setdefault(node, []).append(g)
    return {j: {n: tuple(sorted(v)) for n, v in m.items()} for j, m in out.items()}
