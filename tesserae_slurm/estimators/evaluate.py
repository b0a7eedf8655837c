"""How good are the estimators? Held-out errors and search success against a full table.

Two studies on a full table (the shipped A100 one by default), both seeded:

* ``budget_scenario``: what a site would profile under a budget -- every pair of data-parallel jobs
  on 1 GPU, and per LLM search problem ``budget`` strategies chosen by BO (history shared across
  the problems of one LLM, visited in random order). The rest is held out; the paper's estimator
  (linear model, then the BO surrogate) and the matrix-completion baseline fill it from the same
  measurements, and both are scored on it.
* ``search_study``: per budget, how often BO's best measured strategy is within ``tolerance`` of
  the problem's true best, against random search with the same budget, over repeated seeds.

``linear_holdout`` scores the linear model alone: every multi-GPU data-parallel pair hidden and
predicted from the smallest measured GPU count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..profiles import ThroughputProfile
from .base import ErrorReport, error_report, held_out, predict_all
from .bayesopt import (
    BayesOpt,
    Observation,
    StrategyProblem,
    best_found,
    bo_search,
    problems_from_table,
    random_search,
    table_oracle,
)
from .complete import complete_table
from .entries import Endpoint, Entry, SpeedTable, Value, profile_from_table, table_from_profile
from .linear import LinearModel, is_data_parallel
from .matrix_completion import MatrixCompletion


def _groups(problems: Sequence[StrategyProblem]) -> dict[tuple, list[StrategyProblem]]:
    out: dict[tuple, list[StrategyProblem]] = {}
    for p in problems:
        out.setdefault(p.group, []).append(p)
    return out


def linear_targets(full: SpeedTable) -> list[Entry]:
    """Data-parallel pairs above the smallest GPU count their shapes were measured on."""
    from .linear import shape

    def group(e: Entry, partner: Endpoint) -> tuple[object, ...]:
        return (e.gpu_type, *sorted((shape(e.job), shape(partner))))

    smallest: dict[tuple[object, ...], int] = {}
    dp = [(e, p) for e in full.pairs()
          if (p := e.partner) is not None and is_data_parallel(e.job) and is_data_parallel(p)]
    for e, p in dp:
        k = group(e, p)
        smallest[k] = min(smallest.get(k, e.num_gpus), e.num_gpus)
    return [e for e, p in dp if e.num_gpus > smallest[group(e, p)]]


def mean_baseline(observed: SpeedTable, truth: dict[Entry, Value]) -> dict[Entry, Value]:
    """Every held-out speed predicted as the mean feasible packed speed: the floor to beat."""
    speeds = [x for e in observed.pairs() if observed.values[e].feasible
              for x in (observed.values[e].a, observed.values[e].b)]
    m = float(np.mean(speeds))
    return {e: Value(m, m if e.partner is not None else float("nan")) for e in truth}


def linear_holdout(full: SpeedTable, seed: int = 0) -> list[ErrorReport]:
    observed, truth = held_out(full, linear_targets(full))
    return [
        error_report("linear", truth, predict_all(LinearModel().fit(observed), truth)),
        error_report("mc", truth, predict_all(MatrixCompletion(seed, list(truth)).fit(observed), truth)),
        error_report("mean", truth, mean_baseline(observed, truth)),
    ]


@dataclass(frozen=True)
class Scenario:
    """One budgeted profiling run: what was measured, and each estimator's completed table."""

    budget: int
    seed: int
    observed: SpeedTable
    truth: dict[Entry, Value]  # the held-out entries
    completed: dict[str, SpeedTable]  # "linear+bo", "mc"
    reports: tuple[ErrorReport, ...]

    @property
    def measured_fraction(self) -> float:
        return len(self.observed) / (len(self.observed) + len(self.truth))


def profile_llms(full: SpeedTable, budget: int, rng: np.random.Generator, n_init: int = 1) -> dict[Entry, Value]:
    """BO-chosen measurements: ``budget`` per LLM search problem, problems of an LLM in random order."""
    oracle = table_oracle(full)
    measured: dict[Entry, Value] = {}
    for problems in _groups(problems_from_table(full)).values():
        history: list[Observation] = []
        for i in rng.permutation(len(problems)):
            p = problems[int(i)]
            got = bo_search(p, oracle, budget, rng, history, n_init)
            history += [Observation(p.partner, s, v) for s, v in got.items()]
            for s in got:
                measured[p.entry(s)] = full.values[p.entry(s)]
    return measured


def budget_scenario(full: SpeedTable, budget: int, seed: int = 0, n_init: int = 1) -> Scenario:
    rng = np.random.default_rng(seed)
    llm = profile_llms(full, budget, rng, n_init)
    keep = [e for e in full if e in llm or (not _has_strategy(e) and e.num_gpus == _min_count(full, e))]
    observed = full.only(keep)
    truth = {e: v for e, v in full.values.items() if e not in observed}
    targets = list(truth)
    paper = complete_table(observed, targets, [LinearModel(), BayesOpt()])
    mc = complete_table(observed, targets, [MatrixCompletion(seed, targets)])
    reports = (
        error_report("linear+bo", truth, {e: paper.values[e] for e in truth if e in paper}),
        error_report("mc", truth, {e: mc.values[e] for e in truth if e in mc}),
        error_report("mean", truth, mean_baseline(observed, truth)),
    )
    return Scenario(budget, seed, observed, truth, {"linear+bo": paper, "mc": mc}, reports)


def completed_profiles(full: ThroughputProfile, budget: int, seed: int = 0) -> dict[str, ThroughputProfile]:
    """What a site would pack with after budgeted profiling: one profile per estimator, named
    ``<full>-<estimator>-b<budget>-s<seed>``, each holding every entry of ``full`` (measured or filled).
    The simulator runs decisions on these and progress on ``full`` (the oracle)."""
    sc = budget_scenario(table_from_profile(full), budget, seed)
    return {est: profile_from_table(t, f"{full.name}-{est}-b{budget}-s{seed}", full.datasets, full)
            for est, t in sc.completed.items()}


def _has_strategy(e: Entry) -> bool:
    return bool(e.job.strategy) or (e.partner is not None and bool(e.partner.strategy))


def _min_count(full: SpeedTable, e: Entry) -> int:
    return min(x.num_gpus for x in full if not _has_strategy(x) and x.gpu_type == e.gpu_type)


@dataclass(frozen=True)
class SearchResult:
    budget: int
    problems: int  # problem x seed runs with a feasible strategy
    bo_success: float  # fraction within tolerance of the true best
    random_success: float
    bo_regret: float  # mean (true best - best found) / true best
    random_regret: float


def search_study(full: SpeedTable, budgets: Sequence[int], seeds: Sequence[int], tolerance: float = 0.03,
                 n_init: int = 1) -> list[SearchResult]:
    oracle = table_oracle(full)
    problems = problems_from_table(full)
    truth_best = {p: best_found({s: oracle(p, s) for s in p.candidates}) for p in problems}
    out: list[SearchResult] = []
    for budget in budgets:
        hits = {"bo": 0, "rs": 0}
        regret = {"bo": 0.0, "rs": 0.0}
        n = 0
        for seed in seeds:
            rng = np.random.default_rng(seed)
            for group in _groups(problems).values():
                history: list[Observation] = []
                for i in rng.permutation(len(group)):
                    p = group[int(i)]
                    bo = bo_search(p, oracle, budget, rng, history, n_init)
                    history += [Observation(p.partner, s, v) for s, v in bo.items()]
                    rs = random_search(p, oracle, budget, rng)
                    best = truth_best[p]
                    if best <= 0.0:
                        continue
                    n += 1
                    for name, got in (("bo", best_found(bo)), ("rs", best_found(rs))):
                        hits[name] += got >= (1.0 - tolerance) * best
                        regret[name] += (best - got) / best
        out.append(SearchResult(budget, n, hits["bo"] / max(n, 1), hits["rs"] / max(n, 1),
                                regret["bo"] / max(n, 1), regret["rs"] / max(n, 1)))
    return out
