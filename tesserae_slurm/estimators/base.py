"""The one interface every throughput estimator implements, and the held-out error report.

``Estimator.fit(observed)`` learns from the measured entries of a ``SpeedTable``; the returned
``Predictor.predict(entry)`` answers a missing entry with a ``Value`` or ``None`` when the estimator
has nothing to go on (another estimator may). Estimators are pure: data and a seed in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .entries import Entry, SpeedTable, Value


class Predictor(Protocol):
    def predict(self, entry: Entry) -> Value | None: ...


class Estimator(Protocol):
    """``name`` is the registry key and the provenance tag (``estimated:<name>``)."""

    name: str

    def fit(self, observed: SpeedTable) -> Predictor: ...


def source_tag(name: str) -> str:
    return f"estimated:{name}"


def predict_all(predictor: Predictor, entries: Iterable[Entry]) -> dict[Entry, Value]:
    """Predictions for the entries the predictor can answer (the others are left out)."""
    out: dict[Entry, Value] = {}
    for e in entries:
        v = predictor.predict(e)
        if v is not None:
            out[e] = v
    return out


@dataclass(frozen=True)
class ErrorReport:
    """Error of predictions against the true table on held-out entries.

    Speeds are compared side by side (a pair contributes two speeds) on entries that are feasible in
    both the truth and the prediction; ``feasibility_errors`` counts entries whose feasibility was
    predicted wrong, ``missing`` the held-out entries the estimator could not answer.
    """

    estimator: str
    held_out: int
    answered: int
    missing: int
    compared_speeds: int
    mae: float  # mean |predicted - true| normalized speed
    mean_relative: float  # mean |predicted - true| / true
    max_abs: float
    feasibility_errors: int

    def as_dict(self) -> dict[str, float | int | str]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def error_report(name: str, truth: Mapping[Entry, Value], predicted: Mapping[Entry, Value]) -> ErrorReport:
    diffs: list[float] = []
    rel: list[float] = []
    feas_err = 0
    answered = 0
    for e, t in truth.items():
        p = predicted.get(e)
        if p is None:
            continue
        answered += 1
        if p.feasible != t.feasible:
            feas_err += 1
            continue
        if not t.feasible:
            continue
        for tv, pv in ((t.a, p.a), (t.b, p.b)):
            if math.isnan(tv):
                continue
            diffs.append(abs(pv - tv))
            rel.append(abs(pv - tv) / tv)
    d = np.asarray(diffs)
    return ErrorReport(name, len(truth), answered, len(truth) - answered, len(diffs),
                       float(d.mean()) if d.size else math.nan,
                       float(np.mean(rel)) if rel else math.nan,
                       float(d.max()) if d.size else math.nan, feas_err)


def held_out(full: SpeedTable, entries: Iterable[Entry]) -> tuple[SpeedTable, dict[Entry, Value]]:
    """(the table without ``entries``, the true values of ``entries``)."""
    hide = [e for e in entries if e in full]
    return full.without(hide), {e: full.values[e] for e in hide}
