"""Bayesian optimization over LLM parallelism strategies (paper §"Minimizing Profiling Cost").

A *search problem* is one LLM job (model, batch, GPU count) on one GPU type, alone or packed with
one partner: which of its candidate strategies gives the largest speed (the pair's speed sum, the
weight packing maximizes)? Profiling every strategy for every partner is what the paper calls
impractical; instead a site measures a few strategies per problem: the first at random (paper: "we
first profile ... with randomly generated strategies"), the next ones by expected improvement times
the probability of fitting in memory (constrained EI) under a Gaussian process, until the budget is
spent. The GP is shared by the packed problems of one LLM (``gp.py``: tasks), so what was learned
packing it with one partner carries over to the next. The LLM alone is a problem of its own: its
objective (speed alone, where DP usually wins) has another shape than a pair's speed sum (where a
pipeline that leaves memory and compute to the partner usually wins), and sharing a GP between the
two misleads both. The same GP then predicts the strategies left unmeasured
(``BayesOpt`` estimator).

Everything is pure: the measurement is an ``Oracle`` callable (the shipped table in evaluations, a
profiler run in production) and randomness comes from the ``rng`` passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from ..profiles import ProfileKey
from .entries import Endpoint, Entry, SpeedTable, Value, make_entry, oriented
from .gp import DEFAULT_GRID, FEASIBILITY_GRID, GpHyper, GpPosterior, expected_improvement, fit_gp
from .strategies import feature_matrix

Task = Endpoint | None  # the partner; None = the LLM alone


@dataclass(frozen=True)
class StrategyProblem:
    gpu_type: str
    llm: ProfileKey
    partner: Task
    candidates: tuple[str, ...]

    @property
    def group(self) -> tuple[str, ProfileKey]:
        return (self.gpu_type, self.llm)

    def entry(self, strategy: str) -> Entry:
        return make_entry(self.gpu_type, Endpoint(self.llm, strategy), self.partner)

    def __str__(self) -> str:
        with_ = f" + {self.partner}" if self.partner else " alone"
        return f"{self.llm.model}@{self.llm.num_gpus}{with_} on {self.gpu_type}"


@dataclass(frozen=True, slots=True)
class Observation:
    """A measured strategy of a problem; ``value`` is oriented LLM first (``a``), partner ``b``."""

    task: Task
    strategy: str
    value: Value


Oracle = Callable[[StrategyProblem, str], Value]


def llm_side(entry: Entry) -> tuple[Endpoint, Task] | None:
    """(the LLM endpoint, its partner) when exactly one side of ``entry`` has a strategy."""
    if entry.partner is None:
        return (entry.job, None) if entry.job.strategy else None
    sa, sb = bool(entry.job.strategy), bool(entry.partner.strategy)
    if sa == sb:
        return None
    return (entry.job, entry.partner) if sa else (entry.partner, entry.job)


def problems_from_table(table: SpeedTable) -> list[StrategyProblem]:
    """One problem per (GPU type, LLM key, partner) the table holds, candidates = its strategies."""
    cands: dict[tuple[str, ProfileKey, Task], list[str]] = {}
    for e in table:
        side = llm_side(e)
        if side is None:
            continue
        llm, partner = side
        cands.setdefault((e.gpu_type, llm.key, partner), []).append(llm.strategy)
    order = {s: i for i, s in enumerate(dict.fromkeys(s for v in cands.values() for s in v))}
    return [StrategyProblem(g, k, p, tuple(sorted(v, key=order.__getitem__)))
            for (g, k, p), v in sorted(cands.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] is not None,
                                                                        kv[0][2] or Endpoint(kv[0][1])))]


def table_oracle(table: SpeedTable) -> Oracle:
    """Measurements looked up in a full table (the evaluation's stand-in for a profiler run)."""

    def measure(problem: StrategyProblem, strategy: str) -> Value:
        e = problem.entry(strategy)
        a, b = oriented(e, table.values[e], Endpoint(problem.llm, strategy))
        return Value(a, b)

    return measure


@dataclass(frozen=True)
class Surrogate:
    """GPs for one LLM group: speed sum and per-side speeds over feasible runs, and feasibility."""

    num_gpus: int
    tasks: Mapping[Task, int]
    total: GpPosterior | None
    a: GpPosterior | None
    b: GpPosterior | None
    feasible: GpPosterior | None
    feasible_rate: float

    def predict(self, task: Task, strategies: Sequence[str]) -> dict[str, np.ndarray]:
        x = feature_matrix(list(strategies), self.num_gpus)
        t = np.full(len(strategies), self.tasks.get(task, -1))
        n = len(strategies)
        out: dict[str, np.ndarray] = {}
        if self.total is not None:
            out["total"], out["total_sd"] = self.total.predict(x, t)
            out["a"] = self.a.predict(x, t)[0] if self.a is not None else np.full(n, math.nan)
            out["b"] = self.b.predict(x, t)[0] if self.b is not None else np.full(n, math.nan)
        else:
            out["total"], out["total_sd"] = np.zeros(n), np.ones(n)
            out["a"], out["b"] = np.full(n, math.nan), np.full(n, math.nan)
        if self.feasible is not None:
            mu, sd = self.feasible.predict(x, t)
            out["p_feasible"] = norm.cdf(mu / np.sqrt(sd ** 2 + self.feasible.hyper.noise * self.feasible.scale ** 2))
        else:
            out["p_feasible"] = np.full(n, self.feasible_rate)
        return out


def fit_surrogate(observations: Sequence[Observation], num_gpus: int,
                  grid: tuple[GpHyper, ...] = DEFAULT_GRID) -> Surrogate:
    tasks: dict[Task, int] = {}
    for o in observations:
        tasks.setdefault(o.task, len(tasks))
    x = feature_matrix([o.strategy for o in observations], num_gpus)
    t = np.array([tasks[o.task] for o in observations], dtype=int)
    ok = np.array([o.value.feasible for o in observations], dtype=bool)
    total = a = b = feas = None
    if ok.any():
        y_tot = np.array([o.value.total for o in observations])
        total = fit_gp(x[ok], t[ok], y_tot[ok], grid=grid)
        a = fit_gp(x[ok], t[ok], np.array([o.value.a for o in observations])[ok], hyper=total.hyper)
        pair = ok & np.array([o.task is not None for o in observations])
        if pair.any():
            b = fit_gp(x[pair], t[pair], np.array([o.value.b for o in observations])[pair], hyper=total.hyper)
    if len(set(ok.tolist())) == 2:  # both outcomes seen: learn where memory runs out
        feas = fit_gp(x, t, np.where(ok, 1.0, -1.0), grid=FEASIBILITY_GRID)
    rate = float(ok.mean()) if len(ok) else 1.0
    return Surrogate(num_gpus, tasks, total, a, b, feas, rate)


def _pick_random(unmeasured: list[str], rng: np.random.Generator) -> str:
    return unmeasured[int(rng.integers(len(unmeasured)))]


def suggest(problem: StrategyProblem, observed: Mapping[str, Value], history: Sequence[Observation],
            rng: np.random.Generator, n_init: int = 1, grid: tuple[GpHyper, ...] = DEFAULT_GRID) -> str | None:
    """The next strategy of ``problem`` to measure (``None``: all measured).

    The first ``n_init`` are random; then constrained expected improvement on the speed sum under the
    GP fitted on ``history`` (other problems of the same LLM) and this problem's ``observed`` runs.
    """
    unmeasured = [s for s in problem.candidates if s not in observed]
    if not unmeasured:
        return None
    if len(observed) < n_init:
        return _pick_random(unmeasured, rng)
    same_kind = [o for o in history if (o.task is None) == (problem.partner is None)]  # alone vs packed
    obs = same_kind + [Observation(problem.partner, s, v) for s, v in observed.items()]
    sur = fit_surrogate(obs, problem.llm.num_gpus, grid)
    pred = sur.predict(problem.partner, unmeasured)
    feasible_totals = [v.total for v in observed.values() if v.feasible]
    best = max(feasible_totals) if feasible_totals else float(np.min(pred["total"]))
    acq = expected_improvement(pred["total"], pred["total_sd"], best) * pred["p_feasible"]
    top = np.flatnonzero(acq >= acq.max() - 1e-12)
    return unmeasured[int(top[int(rng.integers(len(top)))])]


def bo_search(problem: StrategyProblem, oracle: Oracle, budget: int, rng: np.random.Generator,
              history: Sequence[Observation] = (), n_init: int = 1,
              grid: tuple[GpHyper, ...] = DEFAULT_GRID) -> dict[str, Value]:
    """Measure up to ``budget`` strategies chosen by BO; returns strategy -> oriented value."""
    observed: dict[str, Value] = {}
    for _ in range(min(budget, len(problem.candidates))):
        s = suggest(problem, observed, history, rng, n_init, grid)
        if s is None:
            break
        observed[s] = oracle(problem, s)
    return observed


def random_search(problem: StrategyProblem, oracle: Oracle, budget: int,
                  rng: np.random.Generator) -> dict[str, Value]:
    """The baseline: ``budget`` strategies drawn uniformly without replacement."""
    k = min(budget, len(problem.candidates))
    picks = rng.choice(len(problem.candidates), size=k, replace=False)
    return {problem.candidates[i]: oracle(problem, problem.candidates[i]) for i in sorted(picks.tolist())}


def best_found(observed: Mapping[str, Value]) -> float:
    """Largest feasible speed sum among the measured strategies (0.0 when none fits)."""
    return max((v.total for v in observed.values() if v.feasible), default=0.0)


@dataclass
class BayesOptFit:
    """Predictor over the observed table: one surrogate per LLM group, fitted on first use."""

    observations: Mapping[tuple[str, ProfileKey], list[Observation]]
    grid: tuple[GpHyper, ...]
    min_observations: int
    _cache: dict[tuple[str, ProfileKey, bool], Surrogate] = field(default_factory=dict)

    def predict(self, entry: Entry) -> Value | None:
        side = llm_side(entry)
        if side is None:
            return None
        llm, partner = side
        group = (entry.gpu_type, llm.key)
        packed = partner is not None
        obs = [o for o in self.observations.get(group, []) if (o.task is not None) == packed]
        if len(obs) < self.min_observations or not any(o.task == partner for o in obs):
            return None
        sur = self._cache.get((*group, packed))
        if sur is None:
            sur = self._cache[(*group, packed)] = fit_surrogate(obs, llm.key.num_gpus, self.grid)
        p = sur.predict(partner, [llm.strategy])
        if p["p_feasible"][0] < 0.5 or sur.total is None:
            return Value(0.0, 0.0 if partner is not None else math.nan)
        a = float(p["a"][0])
        b = float(p["b"][0]) if partner is not None else math.nan
        if partner is not None and math.isnan(b):  # only isolated runs fitted: split the sum evenly
            a = b = float(p["total"][0]) / 2.0
        a, b = max(a, 0.01), (max(b, 0.01) if partner is not None else math.nan)
        va, vb = (a, b) if entry.job == llm else (b, a)
        return Value(va, vb)


class BayesOpt:
    """Estimator: the BO surrogate's predictions for unmeasured strategies of an LLM."""

    name = "bo"

    def __init__(self, grid: tuple[GpHyper, ...] = DEFAULT_GRID, min_observations: int = 2) -> None:
        self.grid, self.min_observations = grid, min_observations

    def fit(self, observed: SpeedTable) -> BayesOptFit:
        return BayesOptFit(group_observations(observed.values.items()), self.grid, self.min_observations)


def group_observations(items: Iterable[tuple[Entry, Value]]) -> dict[tuple[str, ProfileKey], list[Observation]]:
    out: dict[tuple[str, ProfileKey], list[Observation]] = {}
    for e, v in items:
        side = llm_side(e)
        if side is None:
            continue
        llm, partner = side
        a, b = oriented(e, v, llm)
        out.setdefault((e.gpu_type, llm.key), []).append(Observation(partner, llm.strategy, Value(a, b)))
    return out
