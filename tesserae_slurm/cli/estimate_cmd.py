"""`tesserae estimate`: fill a partial profile with estimators, and score estimators on a full one.

``fill``: the entries a complete table over the partial one would hold (extra GPU counts and LLM
strategies on request) are filled by the estimators in order, and the provenance of every filled
entry is written next to the CSV; the error is reported on measured entries held out of the fit.
``eval``: the studies of ``estimators/evaluate.py`` on a full table (the shipped A100 one by
default): held-out errors per profiling budget, and BO against random search.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..estimators.base import Estimator, error_report, held_out
from ..estimators.bayesopt import BayesOpt
from ..estimators.complete import complete_profile, complete_table, provenance_rows
from ..estimators.entries import table_from_profile
from ..estimators.evaluate import budget_scenario, linear_holdout, search_study
from ..estimators.linear import LinearModel
from ..estimators.matrix_completion import MatrixCompletion
from ..model import InputError
from ..profiles import load_profile, write_profile_csv
from .jsonio import dump_json
from .render import table

ESTIMATORS = ("linear", "bo", "mc")


def _ints(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not out or any(x < 0 for x in out):
        raise InputError(f"{what} must be non-negative integers, got {text!r}")
    return out


def make_estimators(names: str, seed: int) -> list[Estimator]:
    out: list[Estimator] = []
    for n in (x.strip().lower() for x in names.split(",") if x.strip()):
        if n == "linear":
            out.append(LinearModel())
        elif n == "bo":
            out.append(BayesOpt())
        elif n == "mc":
            out.append(MatrixCompletion(seed))
        else:
            raise InputError(f"unknown estimator {n!r}; known: {', '.join(ESTIMATORS)}")
    if not out:
        raise InputError("--estimators is empty")
    return out


def _strategies(text: str) -> dict[tuple[str, int], list[str]]:
    """``MODEL@GPUS=S1;S2;...`` separated by spaces: candidate strategies to add."""
    out: dict[tuple[str, int], list[str]] = {}
    for item in text.split():
        head, _, body = item.partition("=")
        model, _, gpus = head.partition("@")
        if not body or not model or not gpus.isdigit():
            raise InputError(f"--strategies item {item!r}: expected MODEL@GPUS=S1;S2 (e.g. GPT2-Medium@2=10,14;12,12)")
        out[(model, int(gpus))] = [s for s in body.split(";") if s]
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("estimate", help="fill a partial profile with estimators; score estimators",
                       description=__doc__)
    esub = p.add_subparsers(dest="estimate", required=True, metavar="ACTION")
    f = esub.add_parser("fill", help="complete a partial profile CSV/JSON; write CSV + provenance")
    f.add_argument("profile", help="the partial profile (CSV or JSON)")
    f.add_argument("--out", required=True, help="completed profile CSV")
    f.add_argument("--estimators", default="linear,bo,mc", help="in order of trust (default linear,bo,mc)")
    f.add_argument("--gpu-counts", default="", help="GPU counts to extend data-parallel jobs to")
    f.add_argument("--strategies", default="", help="extra LLM candidates: 'MODEL@GPUS=S1;S2 ...'")
    f.add_argument("--holdout", type=float, default=0.2, help="fraction of measured pairs held out to score (0.2)")
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(func=run_fill)

    e = esub.add_parser("eval", help="held-out error and BO-vs-random on a full profile (default a100)")
    e.add_argument("--profile", default="a100", help="a full profile: a100 (default) or a path")
    e.add_argument("--budgets", default="2,3,4", help="strategies measured per LLM search problem")
    e.add_argument("--seeds", type=int, default=5, help="repetitions of the search study (default 5)")
    e.add_argument("--tolerance", type=float, default=0.03, help="'found the best' = within this fraction")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=run_eval)


def run_fill(args: argparse.Namespace) -> int:
    if not 0.0 <= args.holdout < 1.0:
        raise InputError(f"--holdout must be in [0, 1), got {args.holdout}")
    partial = load_profile(args.profile)
    ests = make_estimators(args.estimators, args.seed)
    counts = _ints(args.gpu_counts, "--gpu-counts") if args.gpu_counts else []
    completed, filled = complete_profile(partial, ests, counts, _strategies(args.strategies), name=Path(args.out).stem)
    out = Path(args.out)
    write_profile_csv(completed, out)
    prov = out.with_name(out.name + ".provenance.json")
    rows = provenance_rows(filled)
    prov.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    by_source: dict[str, int] = {}
    for e in filled:
        by_source[filled.source(e)] = by_source.get(filled.source(e), 0) + 1
    print(table(["SOURCE", "ENTRIES"], sorted(by_source.items())))
    observed = table_from_profile(partial)
    rng = np.random.default_rng(args.seed)
    pairs = observed.pairs()
    hide = [pairs[i] for i in np.flatnonzero(rng.random(len(pairs)) < args.holdout)]
    if hide:
        train, truth = held_out(observed, hide)
        est = complete_table(train, list(truth), ests)
        r = error_report("+".join(x.name for x in ests), truth, {e: est.values[e] for e in truth if e in est})
        print(f"held out {r.held_out} measured pairs: answered {r.answered}, MAE {r.mae:.3f}, "
              f"mean relative error {r.mean_relative:.1%}, feasibility wrong on {r.feasibility_errors}")
    print(f"wrote {out} and {prov}")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    full = table_from_profile(load_profile(args.profile))
    budgets = _ints(args.budgets, "--budgets")
    if args.seeds <= 0:
        raise InputError(f"--seeds must be positive, got {args.seeds}")
    linear = linear_holdout(full)
    scenarios = [budget_scenario(full, b, 0) for b in budgets]
    search = search_study(full, budgets, list(range(args.seeds)), args.tolerance)
    if args.json:
        dump_json({
            "linear_holdout": [r.as_dict() for r in linear],
            "budgets": [{"budget": s.budget, "measured_fraction": s.measured_fraction,
                         "reports": [r.as_dict() for r in s.reports]} for s in scenarios],
            "search": [vars(r) for r in search],
        })
        return 0
    print("linear model: every multi-GPU data-parallel pair held out, predicted from the smallest GPU count")
    print(table(["ESTIMATOR", "HELD_OUT", "ANSWERED", "MAE", "REL_ERR", "FEAS_WRONG"],
                [[r.estimator, r.held_out, r.answered, f"{r.mae:.3f}", f"{r.mean_relative:.1%}", r.feasibility_errors]
                 for r in linear]))
    print("\nbudgeted profiling (1-GPU data-parallel pairs + BUDGET strategies per LLM problem measured)")
    print(table(["BUDGET", "MEASURED", "ESTIMATOR", "HELD_OUT", "MAE", "REL_ERR", "FEAS_WRONG"],
                [[s.budget, f"{s.measured_fraction:.0%}", r.estimator, r.held_out, f"{r.mae:.3f}",
                  f"{r.mean_relative:.1%}", r.feasibility_errors] for s in scenarios for r in s.reports]))
    print(f"\nstrategy search: best measured within {args.tolerance:.0%} of the true best, {args.seeds} seeds")
    print(table(["BUDGET", "RUNS", "BO_SUCCESS", "RANDOM_SUCCESS", "BO_REGRET", "RANDOM_REGRET"],
                [[r.budget, r.problems, f"{r.bo_success:.1%}", f"{r.random_success:.1%}", f"{r.bo_regret:.1%}",
                  f"{r.random_regret:.1%}"] for r in search]))
    return 0
