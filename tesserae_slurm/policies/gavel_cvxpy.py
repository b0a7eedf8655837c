"""Gavel's packed max-min LP built the way Gavel builds it: cvxpy expressions, ECOS by default.

An independent re-implementation (not a copy) of ``MaxMinFairnessPolicyWithPacking.get_allocation``
in stanford-futuredata/gavel, ``scheduler/policies/max_min_fairness.py`` (with ``PolicyWithPacking``
in ``scheduler/policies/policy.py`` and ``ProportionalPolicy`` in ``scheduler/policies/proportional.py``).
It exists for two reasons: it is a second, independently written model of the LP that
``gavel_lp.solve_las`` hands to HiGHS (the tests compare the optima), and it is "the Gavel LP with
packing" that docs/performance.md times the engine against (``tesserae bench scale --baselines
gavel-cvxpy``).

Gavel's formulation, mirrored here:

* one cvxpy variable matrix ``x`` of shape (job combinations, worker types); combinations are every
  job alone plus every pair of jobs with the same scale factor (Gavel's scheduler skips pairs whose
  scale factors differ); ``x >= 0``;
* ``relevant_combinations``: for each job, the rows of ``x`` that contain it. The per-job constraint
  is ``sum(x[relevant]) <= 1`` and the objective is ``Maximize(min_j sum(coef_j * x[relevant_j]))``,
  coef = throughput of j in that combination x the combination's scale factor /
  (priority weight x proportional throughput) -- the proportional throughput being j's speed under
  an equal share of every worker type;
* per worker type, ``sum(scale_factor * x[:, w]) <= num_workers[w]``.

Gavel's vectorized code gathers ``x[idx]`` over the concatenated relevant lists and reshapes it to
(jobs, combinations per job), which assumes every job pairs with every other one; here the lists are
ragged (pairs only within a GPU count), so a constant (jobs x entries) 0/1 matrix sums each job's
entries instead -- the same expression tree size. Throughputs are looked up once per job kind and
the coefficient arrays are built with numpy (Gavel's ``flatten`` fills a dense jobs x combinations x
types tensor in Python loops); the time measured is therefore a lower bound of Gavel's own.

Differences from Gavel, kept deliberately: jobs whose proportional throughput is 0 (they run nowhere)
are left out of the min (Gavel would divide by zero), and no-pack jobs form no pairs (Gavel has no
such flag). A pair that cannot pack (``packed`` is None) keeps its variable with zero throughputs,
as in Gavel's throughput table; a job that needs more GPUs than a type has keeps its variable there
(only the capacity row limits it), also as in Gavel.
"""

from __future__ import annotations

import importlib.util
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..model import Cluster, InputError, Job, JobView
from .base import SchedulingInput, ThroughputLookup
from .gavel import FtfMemory, GavelLasPolicy, GavelState
from .gavel_lp import EPS, Allocation, capacity_of, class_pair_speeds, empty_allocation, isolated_speeds

log = logging.getLogger(__name__)

DEFAULT_SOLVER = "ECOS"  # Gavel's default (policies/policy.py: Policy(solver='ECOS'))


def cvxpy_available() -> bool:
    """Whether cvxpy can be imported (the optional ``bench`` extra)."""
    return importlib.util.find_spec("cvxpy") is not None


@dataclass(frozen=True, eq=False)
class GavelLp:
    """Gavel's flattened inputs: combinations (rows of ``x``) and each job's relevant entries."""

    job_ids: tuple[str, ...]  # every job given, in input order
    gpu_types: tuple[str, ...]
    num_workers: np.ndarray  # (W,)
    included: np.ndarray  # (n,) bool: jobs in the LP (proportional throughput > 0)
    combo_a: np.ndarray  # (C,) job index
    combo_b: np.ndarray  # (C,) partner index, -1 for a job alone
    scale: np.ndarray  # (C,) the combination's scale factor (GPUs)
    entry_combo: np.ndarray  # (L,) relevant_combinations, concatenated: row of x
    entry_job: np.ndarray  # (L,) ... and the job it is relevant to
    coef: np.ndarray  # (L, W) that job's normalized, scaled throughput in that row

    @property
    def num_combos(self) -> int:
        return len(self.combo_a)

    def job_matrix(self) -> sp.csr_matrix:
        """(included jobs x entries) 0/1: row j sums job j's relevant entries."""
        rows = np.cumsum(self.included) - 1
        n_in = int(self.included.sum())
        ones = np.ones(len(self.entry_job))
        return sp.csr_matrix((ones, (rows[self.entry_job], np.arange(len(self.entry_job)))),
                             shape=(n_in, len(self.entry_job)))

    def shares(self, x: np.ndarray) -> np.ndarray:
        """(included jobs,) each job's normalized share under ``x`` (C, W): what the LP maximizes the min of."""
        out: np.ndarray = self.job_matrix() @ (self.coef * x[self.entry_combo]).sum(axis=1)
        return out


def build_gavel_lp(jobs: Sequence[Job | JobView], cluster: Cluster | Mapping[str, int],
                   throughput: ThroughputLookup, packing: bool = True) -> GavelLp:
    """Combinations, relevant lists and coefficients for ``jobs`` (same inputs as ``gavel_lp.build_problem``)."""
    views = [j if isinstance(j, JobView) else JobView(j, 0.0) for j in jobs]
    ids = tuple(v.id for v in views)
    if len(set(ids)) != len(ids):
        raise InputError("a job id appears twice in the allocation problem")
    cap_map = capacity_of(cluster)
    types = tuple(cap_map)
    cap = np.array([cap_map[t] for t in types], dtype=float)
    n, nw = len(views), len(types)
    reps, cls, iso = isolated_speeds(views, types, throughput)
    scale = np.array([v.num_gpus for v in views], dtype=np.int64)
    weight = np.array([v.priority_weight for v in views], dtype=float)
    if np.any(~(weight > 0)):
        raise InputError("priority weights must be > 0")
    total = float(cap.sum())
    # ProportionalPolicy: x[j, w] = N_w / sum(N); the job's throughput under that share
    tprop = (iso * cap[None, :]).sum(axis=1) / total if total > 0 else np.zeros(n)
    included = tprop > 0
    inc = np.flatnonzero(included)

    a_parts, b_parts = [inc], [np.full(len(inc), -1)]
    ta_parts, tb_parts = [iso[inc]], [np.zeros((len(inc), nw))]
    if packing:
        nopack = np.array([v.job.no_pack for v in views], dtype=bool)
        for g in np.unique(scale[inc]):
            idx = inc[(scale[inc] == g) & ~nopack[inc]]
            if len(idx) < 2:
                continue
            ii, jj = np.triu_indices(len(idx), 1)
            a, b = idx[ii], idx[jj]
            sa, sb = _pair_throughputs(reps, cls, a, b, types, throughput)
            a_parts.append(a)
            b_parts.append(b)
            ta_parts.append(sa)
            tb_parts.append(sb)
    combo_a = np.concatenate(a_parts).astype(np.int64)
    combo_b = np.concatenate(b_parts).astype(np.int64)
    t_a, t_b = np.concatenate(ta_parts), np.concatenate(tb_parts)
    order = np.lexsort((combo_b, combo_a))  # Gavel's sorted job-id pairs: (a, alone), (a, b1), (a, b2), ...
    combo_a, combo_b, t_a, t_b = combo_a[order], combo_b[order], t_a[order], t_b[order]
    c_scale = scale[combo_a].astype(float)  # pairs share one scale factor by construction

    pairs = np.flatnonzero(combo_b >= 0)
    entry_combo = np.concatenate([np.arange(len(combo_a)), pairs])
    entry_job = np.concatenate([combo_a, combo_b[pairs]])
    tput = np.concatenate([t_a, t_b[pairs]])
    by_job = np.argsort(entry_job, kind="stable")  # one relevant list after another
    entry_combo, entry_job, tput = entry_combo[by_job], entry_job[by_job], tput[by_job]
    norm = np.zeros(n)
    norm[inc] = 1.0 / (weight[inc] * tprop[inc])
    coef = tput * (c_scale[entry_combo] * norm[entry_job])[:, None]
    return GavelLp(ids, types, cap, included, combo_a, combo_b, c_scale, entry_combo, entry_job, coef)


def _pair_throughputs(reps: Sequence[Job], cls: np.ndarray, a: np.ndarray, b: np.ndarray,
                      types: Sequence[str], throughput: ThroughputLookup) -> tuple[np.ndarray, np.ndarray]:
    """(P, W) packed speeds of a and b per pair; 0 where the pair cannot pack. One lookup per kind pair."""
    present = np.unique(np.concatenate([cls[a], cls[b]]))
    local = np.full(int(cls.max()) + 1, -1)
    local[present] = np.arange(len(present))
    la, lb = local[cls[a]], local[cls[b]]
    sa = np.zeros((len(a), len(types)))
    sb = np.zeros_like(sa)
    for w, t in enumerate(types):
        ma, mb = class_pair_speeds(reps, present, t, throughput)
        sa[:, w], sb[:, w] = ma[la, lb], mb[la, lb]
    return sa, sb


@dataclass(frozen=True)
class CvxpyResult:
    """A cvxpy solve: the allocation, which solver ran, and where the time went (seconds)."""

    allocation: Allocation
    solver: str  # the solver cvxpy ran (ECOS, or cvxpy's default when ECOS is not installed)
    cvxpy_status: str
    build_s: float  # our numpy inputs + the cvxpy expression tree
    compile_s: float  # cvxpy's canonicalization into the solver's matrices
    solve_s: float  # the solver itself
    num_variables: int


def solve_gavel_lp(lp: GavelLp, solver: str | None = DEFAULT_SOLVER, **solver_options: object) -> CvxpyResult:
    """Build the cvxpy problem for ``lp`` and solve it; ECOS falls back to cvxpy's default if absent."""
    import cvxpy as cp  # optional dependency (the bench extra): imported only when asked for

    t0 = time.perf_counter()
    if solver is not None and solver not in cp.installed_solvers():
        log.warning("cvxpy solver %s is not installed; using cvxpy's default", solver)
        solver = None
    n_in = int(lp.included.sum())
    nw = len(lp.gpu_types)
    if n_in == 0 or nw == 0:
        return CvxpyResult(empty_allocation(lp.gpu_types, lp.job_ids), solver or "", "empty", 0.0, 0.0, 0.0, 0)
    x = cp.Variable((lp.num_combos, nw))
    per_job = lp.job_matrix()
    gathered = x[lp.entry_combo]  # the relevant combinations of every job, one list after another
    objective = cp.Maximize(cp.min(per_job @ cp.sum(cp.multiply(lp.coef, gathered), axis=1)))
    scale_array = np.repeat(lp.scale[:, None], nw, axis=1)
    constraints = [
        x >= 0,
        cp.sum(cp.multiply(scale_array, x), axis=0) <= lp.num_workers,
        per_job @ cp.sum(gathered, axis=1) <= 1,
    ]
    prob = cp.Problem(objective, constraints)
    t1 = time.perf_counter()
    with warnings.catch_warnings():  # "Solution may be inaccurate": logged below with the status
        warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
        prob.solve(solver=solver, **solver_options)
    t2 = time.perf_counter()
    stats = prob.solver_stats
    ran = str(getattr(stats, "solver_name", None) or solver or "")
    solve_s = float(getattr(stats, "solve_time", None) or 0.0)
    compile_s = float(getattr(prob, "compilation_time", None) or max(0.0, t2 - t1 - solve_s))
    status = str(prob.status)
    if x.value is None or status not in ("optimal", "optimal_inaccurate"):
        log.warning("gavel-cvxpy: %s returned %s; equal-share fallback", ran, status)
        xv = _equal_share(lp)
        label = "fallback"
    else:
        if status != "optimal":
            log.warning("gavel-cvxpy: %s returned %s", ran, status)
        xv = np.clip(np.asarray(x.value, dtype=float), 0.0, 1.0)
        label = "optimal"
    alloc = to_allocation(lp, xv, label)
    return CvxpyResult(alloc, ran, status, t1 - t0, compile_s, solve_s, int(x.size))


def _equal_share(lp: GavelLp) -> np.ndarray:
    """Gavel's proportional share as x: each job alone gets N_w / sum(N) of every type."""
    xv = np.zeros((lp.num_combos, len(lp.gpu_types)))
    alone = lp.combo_b < 0
    xv[alone] = lp.num_workers / max(1.0, float(lp.num_workers.sum()))
    return xv


def to_allocation(lp: GavelLp, xv: np.ndarray, status: str) -> Allocation:
    """The solution in ``gavel_lp``'s Allocation form (the round mechanism and the tests read it)."""
    xv = np.where(xv < EPS, 0.0, xv)
    n, nw = len(lp.job_ids), len(lp.gpu_types)
    single = np.zeros((n, nw))
    alone = lp.combo_b < 0
    single[lp.combo_a[alone]] = xv[alone]
    keep = ~alone & (xv.max(axis=1, initial=0.0) > 0)
    pairs = tuple(tuple(sorted((lp.job_ids[a], lp.job_ids[b]))) for a, b in zip(lp.combo_a[keep], lp.combo_b[keep]))
    shares = lp.shares(xv)
    objective = float(shares.min()) if len(shares) else 0.0
    pair_x = xv[keep].reshape(-1, nw)
    return Allocation(lp.job_ids, lp.gpu_types, single, pairs, pair_x, status, objective,
                      lp.num_combos * nw)


def solve_las_cvxpy(jobs: Sequence[Job | JobView], cluster: Cluster | Mapping[str, int],
                    throughput: ThroughputLookup, packing: bool = True,
                    solver: str | None = DEFAULT_SOLVER) -> CvxpyResult:
    """Build and solve one Gavel LAS allocation through cvxpy (``max_min_fairness_packed`` when ``packing``)."""
    t0 = time.perf_counter()
    lp = build_gavel_lp(jobs, cluster, throughput, packing)
    t1 = time.perf_counter()
    res = solve_gavel_lp(lp, solver)
    return CvxpyResult(res.allocation, res.solver, res.cvxpy_status, res.build_s + (t1 - t0), res.compile_s,
                       res.solve_s, res.num_variables)


@dataclass(frozen=True)
class GavelCvxpyPolicy(GavelLasPolicy):
    """Gavel LAS with its allocation solved through cvxpy, as Gavel does; the round mechanism is ours.

    cvxpy gives ECOS no time limit, so ``time_limit_s`` is refused: a caller that needs a cap runs
    the policy in a child process and kills it (``bench/capped.py``). ``on_solve`` sees each solve's
    ``CvxpyResult`` (benchmarks read the solver and the phase times from it).
    """

    solver: str | None = DEFAULT_SOLVER
    on_solve: Callable[[CvxpyResult], None] | None = field(default=None, compare=False, repr=False)
    name: str = "gavel-cvxpy"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.time_limit_s is not None:
            raise InputError(f"{self.name}: cvxpy/ECOS has no time limit; cap the call from outside")
        if self.solver is not None and (not isinstance(self.solver, str) or not self.solver):
            raise InputError(f"{self.name}: solver must be a cvxpy solver name, got {self.solver!r}")

    def allocate(self, inp: SchedulingInput, state: GavelState) -> tuple[Allocation, Mapping[str, FtfMemory]]:
        res = solve_las_cvxpy(inp.jobs, inp.cluster, inp.throughput, self.packing, self.solver)
        if self.on_solve is not None:
            self.on_solve(res)
        return res.allocation, state.ftf


__all__ = ["DEFAULT_SOLVER", "CvxpyResult", "GavelCvxpyPolicy", "GavelLp", "build_gavel_lp", "cvxpy_available",
           "solve_gavel_lp", "solve_las_cvxpy", "to_allocation"]
