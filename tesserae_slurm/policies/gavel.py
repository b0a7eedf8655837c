"""Gavel baselines as policies: allocation LP + Gavel's round mechanism (docs/policies-lp.md).

* ``gavel`` (:class:`GavelLasPolicy`): LAS (``max_min_fairness_packed``) with pair variables;
  the policy picks the pairs and the engine places each as one unit (its own packing is off).
* ``gavel-ftf`` (:class:`GavelFtfPolicy`): finish-time fairness (``finish_time_fairness_packed``).
* ``ftf-lp`` (:class:`GavelFtfPriorityPolicy`, the priorities of Tesserae-FTF): the *non-packed*
  FTF LP and Gavel's priorities give the order; Tesserae's engine packs (policies.md §10).

Every round: account run times, reset + re-solve when due (gavel_rounds.py), compute priorities,
run Gavel's greedy selection. Gavel-style policies return the chosen combinations first, largest
GPU count first (Gavel assigns workers in that order to limit fragmentation), then the rest by
priority; ``ftf-lp`` returns the chosen jobs in priority order, then the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from ..model import InputError, JobView
from .base import Ranking, SchedulingInput
from .gavel_ftf import DEFAULT_REL_TOL, FtfTerms, solve_ftf
from .gavel_lp import (
    METHODS,
    Allocation,
    Problem,
    build_problem,
    capacity_of,
    check_solver_options,
    isolated_speeds,
    solve_las,
)
from .gavel_rounds import Entry, RoundState, needs_reset, observe, priorities, reset, select

log = logging.getLogger(__name__)

DEFAULT_RESET_INTERVAL_S = 1920.0  # Gavel's minimum_time_between_allocation_resets


@dataclass(frozen=True, slots=True)
class FtfMemory:
    """What Gavel's FTF policy remembers per job between solves (C_j and last solve's R_j, I_j)."""

    cumulative_isolated: float = 0.0
    remaining: float = 0.0
    isolated: float = 0.0


@dataclass(frozen=True)
class GavelState:
    rounds: RoundState = field(default_factory=RoundState)
    ftf: Mapping[str, FtfMemory] = field(default_factory=lambda: MappingProxyType({}))
    last_status: str = ""  # status of the latest allocation solve
    solves: int = 0
    time_limit_hits: int = 0


def remaining_estimate(view: JobView, round_s: float) -> float:
    """Remaining isolated work: the shell's figure, else total - executed, else as much as it has run
    (at least one round) -- the usual guess when durations are unknown."""
    if view.remaining_work is not None:
        return max(0.0, view.remaining_work)
    if view.total_work is not None:
        return max(0.0, view.total_work - view.executed_time)
    return max(view.executed_time, round_s)


@dataclass(frozen=True)
class GavelPolicyBase:
    packing: bool = True
    reset_interval_s: float = DEFAULT_RESET_INTERVAL_S
    time_limit_s: float | None = None
    lp_method: str = METHODS[0]
    name: str = "gavel"
    places_pairs = True  # Gavel-style Ranking (chosen combinations first, largest first)

    def __post_init__(self) -> None:
        if not isinstance(self.packing, bool):
            raise InputError(f"{self.name}: packing must be true or false, got {self.packing!r}")
        r = self.reset_interval_s
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not r >= 0:
            raise InputError(f"{self.name}: reset_interval_s must be a number >= 0, got {r!r}")
        try:
            check_solver_options(self.time_limit_s, self.lp_method)
        except InputError as exc:
            raise InputError(f"{self.name}: {exc}") from None

    def initial_state(self) -> GavelState:
        return GavelState()

    # ---- the allocation: overridden per objective --------------------------------------------
    def allocate(self, inp: SchedulingInput, state: GavelState) -> tuple[Allocation, Mapping[str, FtfMemory]]:
        prob = build_problem(inp.jobs, inp.cluster, inp.throughput, self.packing)
        return solve_las(prob, self.time_limit_s, self.lp_method), state.ftf

    # ---- one round ------------------------------------------------------------------------------
    def rank(self, inp: SchedulingInput, state: GavelState) -> tuple[Ranking, GavelState]:
        cap = capacity_of(inp.cluster)
        types = tuple(cap)
        rs = observe(state.rounds, inp.jobs, types, inp.round_s)
        ftf, status = state.ftf, state.last_status
        solves, hits = state.solves, state.time_limit_hits
        if inp.jobs and needs_reset(rs, inp.now, self.reset_interval_s):
            alloc, ftf = self.allocate(inp, replace(state, rounds=rs))
            status, solves = alloc.status, solves + 1
            if alloc.hit_time_limit:
                hits += 1
                log.warning("%s: LP stopped at its %ss time limit (%d jobs, %d variables)",
                            self.name, self.time_limit_s, len(inp.jobs), alloc.num_variables)
            rs = reset(rs, inp.now, inp.round_s, alloc.entries(), [v.id for v in inp.jobs])
        ranking, chosen = self._choose(inp, rs, types, cap)
        rs = replace(rs, scheduled=tuple(chosen))
        return ranking, GavelState(rs, ftf, status, solves, hits)

    def _choose(self, inp: SchedulingInput, rs: RoundState, types: tuple[str, ...],
                cap: Mapping[str, int]) -> tuple[Ranking, list[tuple[Entry, int]]]:
        _, _, iso = isolated_speeds(inp.jobs, types, inp.throughput)
        index = {v.id: i for i, v in enumerate(inp.jobs)}
        gpus = {v.id: v.num_gpus for v in inp.jobs}
        capacity = [cap[t] for t in types]
        mean_speed = iso.mean(axis=0) if len(iso) else np.zeros(len(types))
        type_order = sorted(range(len(types)), key=lambda w: (-mean_speed[w], types[w]))

        def can_run(jid: str, w: int) -> bool:
            return bool(iso[index[jid], w] > 0) and gpus[jid] <= capacity[w]

        prios = priorities(rs)
        chosen = select(rs, prios, gpus, capacity, type_order, can_run)
        picked = {m for e, _ in chosen for m in e}
        rest = sorted((v.id for v in inp.jobs if v.id not in picked),
                      key=lambda j: (-max(prios.get((j,), (0.0,)), default=0.0), index[j]))
        if self.places_pairs:
            units = sorted(enumerate(chosen), key=lambda iu: (-gpus[iu[1][0][0]], iu[0]))
            order = [m for _, (e, _) in units for m in e]
            pairs = tuple((e[0], e[1]) for e, _ in chosen if len(e) == 2)
        else:
            order, pairs = [m for e, _ in chosen for m in e], ()
        return Ranking(tuple(order + rest), pairs), chosen


@dataclass(frozen=True)
class GavelLasPolicy(GavelPolicyBase):
    """Gavel LAS: max-min normalized share LP, pair variables when ``packing``."""

    name: str = "gavel"


@dataclass(frozen=True)
class GavelFtfPolicy(GavelPolicyBase):
    """Gavel finish-time fairness: min-max rho (bisection over HiGHS LPs), pair variables when ``packing``."""

    rel_tol: float = DEFAULT_REL_TOL
    name: str = "gavel-ftf"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_rel_tol(self.name, self.rel_tol)

    def allocate(self, inp: SchedulingInput, state: GavelState) -> tuple[Allocation, Mapping[str, FtfMemory]]:
        prob = build_problem(inp.jobs, inp.cluster, inp.throughput, self.packing)
        return ftf_allocation(prob, inp, state.ftf, self.time_limit_s, self.lp_method, self.rel_tol)


def ftf_allocation(prob: Problem, inp: SchedulingInput, memory: Mapping[str, FtfMemory],
                   time_limit_s: float | None, method: str,
                   rel_tol: float) -> tuple[Allocation, dict[str, FtfMemory]]:
    """Solve FTF for ``prob``'s jobs, first growing each job's accumulated isolated time C_j by
    (R_prev - R_now) / I_prev, as Gavel does at every solve."""
    views = {v.id: v for v in inp.jobs}
    rem = np.array([remaining_estimate(views[j], inp.round_s) for j in prob.job_ids])
    cum = np.zeros(prob.n)
    for i, j in enumerate(prob.job_ids):
        m = memory.get(j)
        if m is not None:
            grown = (m.remaining - rem[i]) / m.isolated if m.isolated > 0 else 0.0
            cum[i] = m.cumulative_isolated + max(0.0, grown)
    elapsed = np.array([max(0.0, inp.now - views[j].submit_time) for j in prob.job_ids])
    res = solve_ftf(prob, FtfTerms(elapsed, rem, cum), time_limit_s, method, rel_tol)
    new = {j: FtfMemory(float(cum[i]), float(rem[i]), float(res.isolated[i])) for i, j in enumerate(prob.job_ids)}
    return res.allocation, new


def check_rel_tol(name: str, rel_tol: object) -> None:
    if isinstance(rel_tol, bool) or not isinstance(rel_tol, (int, float)) or not 0 < rel_tol < 1:
        raise InputError(f"{name}: rel_tol must be in (0, 1), got {rel_tol!r}")


@dataclass(frozen=True)
class GavelFtfPriorityPolicy(GavelFtfPolicy):
    """Tesserae-FTF's order: Gavel's non-packed FTF LP and round priorities; the engine packs."""

    packing: bool = False
    name: str = "ftf-lp"
    places_pairs = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.packing:
            raise InputError(f"{self.name}: the FTF priority LP is the non-packed one; packing must be false")
