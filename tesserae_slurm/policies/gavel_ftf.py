"""Gavel's finish-time-fairness allocation (``finish_time_fairness[_packed]``, policies.md §6).

Minimize over X the maximum over jobs of

    rho_j(X) = (t_j + R_j / tput_j(X)) / (C_j + R_j / I_j)

with t_j the time since arrival, R_j the remaining work (isolated seconds on the reference GPU
type), tput_j(X) the job's speed under X (summed over every combination containing it), I_j its
speed under Gavel's isolated allocation (1/m of each GPU type, divided by its GPUs) and C_j the
isolated time it has accumulated so far. The objective is not linear (Gavel uses cvxpy's
``inv_pos``), but it is quasi-convex: for a fixed rho every job's condition is the linear
``tput_j(X) >= R_j / (rho (C_j + R_j / I_j) - t_j)``. So we bisect on rho with one HiGHS
feasibility LP per step; each feasible point also tightens the upper bound to its own max rho.

Among the allocations that meet a rho, the LP takes the one with the largest total normalized
throughput (sum over jobs of speed / best speed), so spare capacity is used rather than left to a
solver's arbitrary vertex. Priority weights scale the remaining work (R_j -> w_j R_j), which is what
Gavel's packed variant does by dividing throughputs by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..model import InputError
from .gavel_lp import _INFEASIBLE, _LIMIT, _OPTIMAL, METHODS, Allocation, Problem, solve_lp

DEFAULT_REL_TOL = 1e-4


@dataclass(frozen=True, eq=False)
class FtfTerms:
    """Per-job inputs of rho, in the problem's job order."""

    elapsed: np.ndarray  # t_j: seconds since arrival
    remaining: np.ndarray  # R_j: isolated seconds of work left (reference GPU type)
    cumulative_isolated: np.ndarray  # C_j: isolated seconds accumulated so far


@dataclass(frozen=True, eq=False)
class FtfResult:
    allocation: Allocation  # objective = the max rho it reaches
    isolated: np.ndarray  # (n,) I_j / w_j, the speed under the isolated allocation (weighted)
    lp_solves: int


def isolated_throughput(prob: Problem) -> np.ndarray:
    """(n,) speed of each job under Gavel's isolated allocation, divided by its priority weight."""
    out: np.ndarray = prob.throughput(prob.isolated_share()) / prob.weight
    return out


def rho_of(prob: Problem, terms: FtfTerms, x: np.ndarray) -> np.ndarray:
    """(n,) rho_j under ``x`` (inf where the job gets no throughput, nan where rho is undefined).

    Weights enter as Gavel's packed variant has them: both speeds divided by w_j, i.e. R_j -> w_j R_j.
    """
    rem = terms.remaining * prob.weight
    iso = prob.throughput(prob.isolated_share())
    tput = prob.throughput(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        shared = terms.elapsed + np.where(rem > 0, rem / tput, 0.0)
        ideal = terms.cumulative_isolated + np.where(rem > 0, rem / iso, 0.0)
        out: np.ndarray = shared / ideal
        return out


def _feasibility_lp(prob: Problem, need: np.ndarray, active: np.ndarray,
                    score: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
    """A_ub, b_ub, c for: tput_j(x) >= need_j on active jobs, base constraints, max normalized work."""
    rows_of = np.where(active, np.cumsum(active) - 1, -1)
    na = int(active.sum())
    v = np.arange(prob.num_vars)
    ina = active[prob.var_a]
    pb = prob.var_b >= 0
    inb = pb & active[np.where(pb, prob.var_b, 0)]
    req = sp.coo_matrix(
        (np.concatenate([-prob.speed_a[ina], -prob.speed_b[inb]]),
         (np.concatenate([rows_of[prob.var_a[ina]], rows_of[prob.var_b[inb]]]), np.concatenate([v[ina], v[inb]]))),
        shape=(na, prob.num_vars))
    base, b_base = prob.base_rows(np.arange(prob.n))
    a_ub = sp.vstack([req, base])
    b_ub = np.concatenate([-need[active], b_base])
    c = -(prob.speed_a * score[prob.var_a] + np.where(pb, prob.speed_b * score[np.where(pb, prob.var_b, 0)], 0.0))
    return a_ub, b_ub, c


def solve_ftf(prob: Problem, terms: FtfTerms, time_limit_s: float | None = None, method: str = METHODS[0],
              rel_tol: float = DEFAULT_REL_TOL, max_iter: int = 60) -> FtfResult:
    """Min-max rho by bisection; ``time_limit_s`` applies to each LP (HiGHS' own clock)."""
    if not 0 < rel_tol < 1:
        raise InputError(f"ftf: rel_tol must be in (0, 1), got {rel_tol}")
    for name, arr in (("elapsed", terms.elapsed), ("remaining", terms.remaining),
                      ("cumulative_isolated", terms.cumulative_isolated)):
        if arr.shape != (prob.n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise InputError(f"ftf: {name} must be {prob.n} finite values >= 0")
    x_best = prob.isolated_share()
    iso = prob.throughput(x_best)  # unweighted; rem carries the weight
    if prob.num_vars == 0:
        return FtfResult(prob.to_allocation(x_best, "empty", 0.0), iso / prob.weight, 0)
    rem = terms.remaining * prob.weight
    best = prob.max_speed()
    active = prob.runnable() & (rem > 0) & (iso > 0)
    if not active.any():
        return FtfResult(prob.to_allocation(x_best, "optimal", 0.0), iso / prob.weight, 0)
    safe = lambda a: np.where(a > 0, a, 1.0)  # noqa: E731 - divisor guard; masked entries are unused
    t, ideal = terms.elapsed, terms.cumulative_isolated + np.where(iso > 0, rem / safe(iso), 0.0)
    lo = float(np.max((t[active] + rem[active] / best[active]) / ideal[active]))
    hi = float(np.max(rho_of(prob, terms, x_best)[active]))
    score = np.where(best > 0, 1.0 / safe(best), 0.0)
    bounds = np.column_stack([np.zeros(prob.num_vars), np.ones(prob.num_vars)])
    status_label, solves = "optimal", 0
    while hi - lo > rel_tol * hi and solves < max_iter:
        mid = 0.5 * (lo + hi)
        slack = mid * ideal - t
        if np.any(slack[active] <= 0):
            lo = mid
            continue
        need = np.where(active, rem / safe(slack), 0.0)
        a_ub, b_ub, c = _feasibility_lp(prob, need, active, score)
        status, x = solve_lp(c, a_ub, b_ub, bounds, time_limit_s, method)
        solves += 1
        if status == _OPTIMAL and x is not None and prob.check(x):
            x = np.clip(x, 0.0, 1.0)
            got = float(np.max(rho_of(prob, terms, x)[active]))
            if got <= hi:
                x_best, hi = x, got
            if hi > mid:  # met mid only within the solver's tolerance
                hi = mid
        elif status == _INFEASIBLE:
            lo = mid
        elif status == _LIMIT:
            status_label = "time_limit"
            break
        else:  # numerical trouble: treat as infeasible, keep the best point found so far
            lo = mid
    obj = float(np.max(rho_of(prob, terms, x_best)[active]))
    return FtfResult(prob.to_allocation(x_best, status_label, obj), iso / prob.weight, solves)
