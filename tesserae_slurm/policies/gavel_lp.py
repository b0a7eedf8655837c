"""Gavel's allocation problem: variables, constraints and the LAS (max-min) LP, solved by HiGHS.

Variables X[c, w] in [0, 1] are the fraction of time combination ``c`` runs on GPU type ``w``; a
combination is one job, or (with packing) a pair of jobs with the *same* GPU count whose packed
speeds on ``w`` are both positive (policies.md §5). Constraints: per job, the time of every
combination containing it sums to <= 1; per type, sum_c s_c X[c, w] <= N_w (a pair occupies its
``s`` GPUs once). A variable exists only where the combination can run: positive speed and
``s <= N_w`` (Gavel keeps the others and forces them to 0).

LAS (``max_min_fairness_packed``) maximizes min_j sum_{c,w} T_j(c, w) s_j X[c, w] / (w_j T_prop_j),
T_prop_j = sum_w T_j(w) N_w / sum_w N_w: equal GPU share per job, scaled by how fast it runs. Jobs
that can run nowhere are left out of the min (Gavel would pin the optimum to 0). Matrices are built
vectorized in COO form: with packing there are O(n^2) pair variables, which is why Gavel is slow.

Throughputs are looked up once per *job kind* (model, batch, GPU count, strategies, no-pack): the
lookup must not depend on a job's id. FTF lives in ``gavel_ftf.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from ..model import Cluster, InputError, Job, JobView
from .base import ThroughputLookup

EPS = 1e-9  # allocations below this are zero
METHODS = ("highs-ipm", "highs-ds", "highs")  # HiGHS interior point (with crossover) is ~2x faster here
# linprog/HiGHS status codes (scipy.optimize.linprog): 0 optimal, 1 iteration or time limit, 2 infeasible
_OPTIMAL, _LIMIT, _INFEASIBLE = 0, 1, 2


@dataclass(frozen=True, eq=False)
class Allocation:
    """A solved allocation: time fractions per job alone and per packed pair, per GPU type.

    ``status``: "optimal"; "time_limit" (HiGHS stopped early: the best feasible point it had, or the
    equal-share fallback when it had none); "fallback" (the solver failed; equal share);
    "empty" (no job could run anywhere). ``objective`` is the LAS min share or the FTF rho.
    """

    job_ids: tuple[str, ...]
    gpu_types: tuple[str, ...]
    single: np.ndarray  # (n, W)
    pairs: tuple[tuple[str, str], ...]  # pairs with a positive fraction somewhere; ids sorted
    pair_x: np.ndarray  # (len(pairs), W)
    status: str
    objective: float
    num_variables: int

    @property
    def hit_time_limit(self) -> bool:
        return self.status == "time_limit"

    def entries(self) -> dict[tuple[str, ...], tuple[float, ...]]:
        """Combination -> X per GPU type, for combinations with a positive fraction somewhere."""
        out: dict[tuple[str, ...], tuple[float, ...]] = {}
        for i, j in enumerate(self.job_ids):
            row = self.single[i]
            if row.max(initial=0.0) > EPS:
                out[(j,)] = tuple(float(v) for v in row)
        for p, row in zip(self.pairs, self.pair_x):
            out[p] = tuple(float(v) for v in row)
        return out

    def job_totals(self) -> dict[str, float]:
        """Sum of every fraction that involves each job (<= 1 when feasible)."""
        tot = {j: float(self.single[i].sum()) for i, j in enumerate(self.job_ids)}
        for (a, b), row in zip(self.pairs, self.pair_x):
            tot[a] += float(row.sum())
            tot[b] += float(row.sum())
        return tot


def empty_allocation(gpu_types: Sequence[str], job_ids: Sequence[str] = ()) -> Allocation:
    w = len(gpu_types)
    return Allocation(tuple(job_ids), tuple(gpu_types), np.zeros((len(job_ids), w)), (),
                      np.zeros((0, w)), "empty", 0.0, 0)


def capacity_of(cluster: Cluster | Mapping[str, int]) -> dict[str, int]:
    """GPUs per type, types sorted by name."""
    if isinstance(cluster, Cluster):
        cap: dict[str, int] = {}
        for n in cluster.nodes:
            cap[n.gpu_type] = cap.get(n.gpu_type, 0) + n.num_gpus
    else:
        cap = {str(k): int(v) for k, v in cluster.items()}
        if any(v < 0 for v in cap.values()):
            raise InputError(f"GPU counts must be >= 0, got {cap}")
    return dict(sorted(cap.items()))


def _kind(job: Job) -> tuple[object, ...]:
    return (job.model, job.batch_size, job.num_gpus, job.parallelism, job.no_pack)


@dataclass(frozen=True, eq=False)
class Problem:
    """The variables of one allocation problem, as flat arrays (one entry per variable)."""

    job_ids: tuple[str, ...]
    gpu_types: tuple[str, ...]
    capacity: np.ndarray  # (W,) GPUs per type
    scale: np.ndarray  # (n,) GPUs per job
    weight: np.ndarray  # (n,) priority weights
    iso: np.ndarray  # (n, W) isolated speed per type
    var_a: np.ndarray  # (V,) job index
    var_b: np.ndarray  # (V,) partner index, -1 for a job alone
    var_w: np.ndarray  # (V,) GPU type index
    speed_a: np.ndarray  # (V,) speed of job a in this combination
    speed_b: np.ndarray  # (V,) speed of job b (0 alone)
    num_single: int  # variables [0, num_single) are jobs alone

    @property
    def n(self) -> int:
        return len(self.job_ids)

    @property
    def num_vars(self) -> int:
        return len(self.var_a)

    def runnable(self) -> np.ndarray:
        """(n,) jobs with at least one variable."""
        r = np.zeros(self.n, dtype=bool)
        r[self.var_a] = True
        r[self.var_b[self.var_b >= 0]] = True
        return r

    def max_speed(self) -> np.ndarray:
        """(n,) the fastest any single variable runs each job."""
        m = np.zeros(self.n)
        np.maximum.at(m, self.var_a, self.speed_a)
        pb = self.var_b >= 0
        np.maximum.at(m, self.var_b[pb], self.speed_b[pb])
        return m

    def throughput(self, x: np.ndarray) -> np.ndarray:
        """(n,) sum_v speed_j(v) x_v: each job's speed under allocation ``x``."""
        t = np.bincount(self.var_a, weights=self.speed_a * x, minlength=self.n)
        pb = self.var_b >= 0
        return t + np.bincount(self.var_b[pb], weights=(self.speed_b * x)[pb], minlength=self.n)

    def base_rows(self, rows_of: np.ndarray) -> tuple[sp.coo_matrix, np.ndarray]:
        """Per-job time (<= 1, row ``rows_of[j]``) and, after those, per-type capacity rows."""
        v = np.arange(self.num_vars)
        pb = self.var_b >= 0
        nj = int(rows_of.max(initial=-1)) + 1
        r = np.concatenate([rows_of[self.var_a], rows_of[self.var_b[pb]], nj + self.var_w])
        c = np.concatenate([v, v[pb], v])
        d = np.concatenate([np.ones(self.num_vars), np.ones(int(pb.sum())), self.scale[self.var_a]])
        shape = (nj + len(self.gpu_types), self.num_vars)
        b = np.concatenate([np.ones(nj), self.capacity.astype(float)])
        return sp.coo_matrix((d, (r, c)), shape=shape), b

    def isolated_share(self) -> np.ndarray:
        """Gavel's isolated allocation as variables: 1/m of each type per job, divided by its GPUs,
        each row scaled to sum <= 1; only where the job can run alone (policies.md §6)."""
        m = max(1, self.n)
        x = (self.capacity[None, :] / m) / self.scale[:, None]
        x = np.where((self.iso > 0) & (self.scale[:, None] <= self.capacity[None, :]), x, 0.0)
        x = x / np.maximum(1.0, x.sum(axis=1, keepdims=True))
        out = np.zeros(self.num_vars)
        out[: self.num_single] = x[self.var_a[: self.num_single], self.var_w[: self.num_single]]
        return out

    def check(self, x: np.ndarray, tol: float = 1e-6) -> bool:
        """Whether ``x`` satisfies every constraint within ``tol``."""
        if x.shape != (self.num_vars,) or not np.all(np.isfinite(x)):
            return False
        if x.min(initial=0.0) < -tol or x.max(initial=0.0) > 1 + tol:
            return False
        a, b = self.base_rows(np.arange(self.n))
        return bool(np.all(a.tocsr() @ x <= b + tol))

    def to_allocation(self, x: np.ndarray, status: str, objective: float) -> Allocation:
        x = np.clip(np.where(x < EPS, 0.0, x), 0.0, 1.0)
        w = len(self.gpu_types)
        single = np.zeros((self.n, w))
        k = self.num_single
        single[self.var_a[:k], self.var_w[:k]] = x[:k]
        pa, pb, pw, px = self.var_a[k:], self.var_b[k:], self.var_w[k:], x[k:]
        keep = px > 0
        pa, pb, pw, px = pa[keep], pb[keep], pw[keep], px[keep]
        pairs: list[tuple[str, str]] = []
        rows: list[np.ndarray] = []
        if len(pa):
            key = pa.astype(np.int64) * self.n + pb
            uniq, inv = np.unique(key, return_inverse=True)
            mat = np.zeros((len(uniq), w))
            np.add.at(mat, (inv, pw), px)
            for u, row in zip(uniq, mat):
                a, b = self.job_ids[int(u // self.n)], self.job_ids[int(u % self.n)]
                pairs.append((a, b) if a < b else (b, a))
                rows.append(row)
        pair_x = np.array(rows) if rows else np.zeros((0, w))
        return Allocation(self.job_ids, self.gpu_types, single, tuple(pairs), pair_x, status,
                          float(objective), self.num_vars)


def _views(jobs: Sequence[Job | JobView]) -> list[JobView]:
    return [j if isinstance(j, JobView) else JobView(j, 0.0) for j in jobs]


def isolated_speeds(jobs: Sequence[Job | JobView], gpu_types: Sequence[str],
                    throughput: ThroughputLookup) -> tuple[list[Job], np.ndarray, np.ndarray]:
    """(one job per kind, kind index per job, (n, W) isolated speeds): one lookup per kind and type."""
    kinds: dict[tuple[object, ...], int] = {}
    reps: list[Job] = []
    cls = np.empty(len(jobs), dtype=np.int64)
    for i, j in enumerate(jobs):
        job = j.job if isinstance(j, JobView) else j
        k = _kind(job)
        if k not in kinds:
            kinds[k] = len(reps)
            reps.append(job)
        cls[i] = kinds[k]
    nw = len(gpu_types)
    iso_c = np.array([[max(0.0, float(throughput.isolated(r, t))) for t in gpu_types] for r in reps]).reshape(-1, nw)
    return reps, cls, (iso_c[cls] if len(jobs) else np.zeros((0, nw)))


def build_problem(jobs: Sequence[Job | JobView], cluster: Cluster | Mapping[str, int],
                  throughput: ThroughputLookup, packing: bool = True) -> Problem:
    """Variables for ``jobs`` on ``cluster`` (a Cluster, or GPUs per type as for POP's sub-clusters)."""
    views = _views(jobs)
    cap_map = capacity_of(cluster)
    types = tuple(cap_map)
    cap = np.array([cap_map[t] for t in types], dtype=float)
    n = len(views)
    ids = tuple(v.id for v in views)
    if len(set(ids)) != n:
        raise InputError("a job id appears twice in the allocation problem")
    reps, cls, iso = isolated_speeds(views, types, throughput)
    scale = np.array([v.num_gpus for v in views], dtype=np.int64)
    weight = np.array([v.priority_weight for v in views], dtype=float)
    if np.any(~(weight > 0)):
        raise InputError("priority weights must be > 0")

    ok = (iso > 0) & (scale[:, None] <= cap[None, :])
    sj, sw = np.nonzero(ok)
    parts_a, parts_b, parts_w = [sj], [np.full(len(sj), -1)], [sw]
    parts_sa, parts_sb = [iso[sj, sw]], [np.zeros(len(sj))]
    if packing and n > 1:
        for a, b, w, sa, sb in _pair_vars(views, reps, cls, scale, cap, types, throughput):
            parts_a.append(a)
            parts_b.append(b)
            parts_w.append(w)
            parts_sa.append(sa)
            parts_sb.append(sb)
    return Problem(ids, types, cap, scale, weight, iso,
                   np.concatenate(parts_a).astype(np.int64), np.concatenate(parts_b).astype(np.int64),
                   np.concatenate(parts_w).astype(np.int64), np.concatenate(parts_sa).astype(float),
                   np.concatenate(parts_sb).astype(float), len(sj))


def _pair_vars(views: Sequence[JobView], reps: Sequence[Job], cls: np.ndarray, scale: np.ndarray,
               cap: np.ndarray, types: Sequence[str],
               throughput: ThroughputLookup) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield (a, b, w, speed_a, speed_b) arrays of feasible pair variables, one GPU-count class at a time."""
    nopack = np.array([v.job.no_pack for v in views], dtype=bool)
    for g in np.unique(scale):
        idx = np.flatnonzero((scale == g) & ~nopack)
        if len(idx) < 2 or g > cap.max(initial=0):
            continue
        present = np.unique(cls[idx])
        local = {int(c): i for i, c in enumerate(present)}
        ii, jj = np.triu_indices(len(idx), 1)
        a, b = idx[ii], idx[jj]
        la = np.array([local[int(c)] for c in cls[a]]) if len(a) else np.zeros(0, dtype=np.int64)
        lb = np.array([local[int(c)] for c in cls[b]]) if len(b) else np.zeros(0, dtype=np.int64)
        for w, t in enumerate(types):
            if g > cap[w]:
                continue
            sa_m, sb_m = class_pair_speeds(reps, present, t, throughput)
            sa, sb = sa_m[la, lb], sb_m[la, lb]
            feasible = (sa > 0) & (sb > 0)
            if feasible.any():
                yield a[feasible], b[feasible], np.full(int(feasible.sum()), w), sa[feasible], sb[feasible]


def class_pair_speeds(reps: Sequence[Job], present: np.ndarray, gpu_type: str,
                      throughput: ThroughputLookup) -> tuple[np.ndarray, np.ndarray]:
    """(K, K) packed speeds of a class-p job (rows) next to a class-q job on ``gpu_type``, for the
    classes ``present`` (``reps[c]`` stands for class c); 0 where they cannot pack. One lookup per
    class pair, not per job pair."""
    sa = np.zeros((len(present), len(present)))
    sb = np.zeros_like(sa)
    for p, ca in enumerate(present):
        for q, cb in enumerate(present):
            got = throughput.packed(reps[ca], reps[cb], gpu_type)
            if got is not None:
                sa[p, q], sb[p, q] = max(0.0, float(got[0])), max(0.0, float(got[1]))
    return sa, sb


def solve_lp(c: np.ndarray, a_ub: sp.spmatrix, b_ub: np.ndarray, bounds: np.ndarray,
             time_limit_s: float | None, method: str = METHODS[0]) -> tuple[int, np.ndarray | None]:
    """One HiGHS solve: (linprog status, x or None)."""
    options: dict[str, object] = {"presolve": True}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    res = linprog(c, A_ub=a_ub.tocsr(), b_ub=b_ub, bounds=bounds, method=method, options=options)
    return int(res.status), (None if res.x is None else np.asarray(res.x))


def las_coefficients(prob: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per-variable coefficient of job a and job b in their normalized share (policies.md §5)."""
    total = float(prob.capacity.sum())
    tprop = (prob.iso * prob.capacity[None, :]).sum(axis=1) / total if total > 0 else np.zeros(prob.n)
    norm = np.where(tprop > 0, prob.scale / (prob.weight * np.where(tprop > 0, tprop, 1.0)), 0.0)
    pb = prob.var_b >= 0
    coef_b = np.zeros(prob.num_vars)
    coef_b[pb] = prob.speed_b[pb] * norm[prob.var_b[pb]]
    return prob.speed_a * norm[prob.var_a], coef_b


def las_shares(prob: Problem, x: np.ndarray) -> np.ndarray:
    """(n,) each job's normalized share under ``x`` (the quantity LAS maximizes the minimum of)."""
    ca, cb = las_coefficients(prob)
    s = np.bincount(prob.var_a, weights=ca * x, minlength=prob.n)
    pb = prob.var_b >= 0
    return s + np.bincount(prob.var_b[pb], weights=(cb * x)[pb], minlength=prob.n)


def check_solver_options(time_limit_s: float | None, method: str) -> None:
    ok = isinstance(time_limit_s, (int, float)) and not isinstance(time_limit_s, bool) and time_limit_s > 0
    if time_limit_s is not None and not ok:
        raise InputError(f"time_limit_s must be a number > 0 or None, got {time_limit_s!r}")
    if method not in METHODS:
        raise InputError(f"LP method must be one of {', '.join(METHODS)}, got {method!r}")


def solve_las(prob: Problem, time_limit_s: float | None = None, method: str = METHODS[0]) -> Allocation:
    """Maximize the minimum normalized share over runnable jobs: one LP with an extra variable t."""
    if prob.num_vars == 0:
        return prob.to_allocation(np.zeros(0), "empty", 0.0)
    runnable = prob.runnable()
    rows_of = np.cumsum(runnable) - 1  # runnable job -> objective row
    rows_of = np.where(runnable, rows_of, -1)
    nj = int(runnable.sum())
    ca, cb = las_coefficients(prob)
    v = np.arange(prob.num_vars)
    pb = prob.var_b >= 0
    obj = sp.coo_matrix((np.concatenate([-ca, -cb[pb], np.ones(nj)]),
                         (np.concatenate([rows_of[prob.var_a], rows_of[prob.var_b[pb]], np.arange(nj)]),
                          np.concatenate([v, v[pb], np.full(nj, prob.num_vars)]))),
                        shape=(nj, prob.num_vars + 1))
    base, b_base = prob.base_rows(rows_of)
    base = sp.hstack([base, sp.coo_matrix((base.shape[0], 1))])
    a_ub = sp.vstack([obj, base])
    b_ub = np.concatenate([np.zeros(nj), b_base])
    c = np.zeros(prob.num_vars + 1)
    c[-1] = -1.0
    bounds = np.column_stack([np.zeros(prob.num_vars + 1), np.ones(prob.num_vars + 1)])
    bounds[-1, 1] = np.inf
    status, x = solve_lp(c, a_ub, b_ub, bounds, time_limit_s, method)
    if x is not None and status in (_OPTIMAL, _LIMIT) and prob.check(x[:-1]):
        xs = np.clip(x[:-1], 0.0, 1.0)
        return prob.to_allocation(xs, "optimal" if status == _OPTIMAL else "time_limit",
                                  _min_share(prob, xs, runnable))
    fallback = prob.isolated_share()
    label = "time_limit" if status == _LIMIT else "fallback"
    return prob.to_allocation(fallback, label, _min_share(prob, fallback, runnable))


def _min_share(prob: Problem, x: np.ndarray, runnable: np.ndarray) -> float:
    shares = las_shares(prob, x)[runnable]
    return float(shares.min()) if len(shares) else 0.0


def solve_las_allocation(jobs: Sequence[Job | JobView], cluster: Cluster | Mapping[str, int],
                         throughput: ThroughputLookup, packing: bool = True,
                         time_limit_s: float | None = None, method: str = METHODS[0]) -> Allocation:
    """Build and solve one Gavel LAS allocation (``max_min_fairness_packed`` when ``packing``).

    Standalone entry point for benchmarks: ``time_limit_s`` is HiGHS' own limit for the solve
    (``Allocation.hit_time_limit`` tells whether it stopped there).
    """
    check_solver_options(time_limit_s, method)
    return solve_las(build_problem(jobs, cluster, throughput, packing), time_limit_s, method)
