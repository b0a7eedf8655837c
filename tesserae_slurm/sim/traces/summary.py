"""What a trace looks like at a glance: size, arrival rate, GPU mix, durations, models.

Used by ``tesserae trace show`` and handy in notebooks; pure data in, data out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from .record import Trace

QUANTILES = (0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


@dataclass(frozen=True, slots=True)
class TraceSummary:
    name: str
    jobs: int
    first_submit: float
    last_submit: float
    jobs_per_hour: float  # (jobs - 1) arrivals over the submit span; 0 when it is empty
    gpu_mix: tuple[tuple[int, int], ...]  # (num_gpus, jobs), by num_gpus
    gpu_hours: float  # sum of num_gpus x isolated duration
    duration_quantiles: tuple[tuple[float, float], ...]  # (quantile, seconds)
    models: tuple[tuple[str, int], ...]  # (model, jobs), most common first

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "jobs": self.jobs, "first_submit_s": self.first_submit,
            "last_submit_s": self.last_submit, "jobs_per_hour": self.jobs_per_hour,
            "gpu_mix": {str(g): n for g, n in self.gpu_mix}, "gpu_hours": self.gpu_hours,
            "duration_s": {f"p{round(q * 100)}": v for q, v in self.duration_quantiles},
            "models": dict(self.models),
        }


def summarize(trace: Trace) -> TraceSummary:
    n = len(trace)
    if n == 0:
        return TraceSummary(trace.name, 0, 0.0, 0.0, 0.0, (), 0.0, (), ())
    submit = np.array([j.submit_time for j in trace])
    dur = np.array([j.duration for j in trace])
    gpus = np.array([j.num_gpus for j in trace])
    span = float(submit[-1] - submit[0])
    rate = (n - 1) / span * 3600.0 if span > 0 else 0.0
    mix = tuple(sorted(Counter(int(g) for g in gpus).items()))
    models = tuple(sorted(Counter(j.model for j in trace).items(), key=lambda kv: (-kv[1], kv[0])))
    quants = tuple((q, float(np.quantile(dur, q))) for q in QUANTILES)
    return TraceSummary(trace.name, n, float(submit[0]), float(submit[-1]), rate, mix,
                        float((gpus * dur).sum() / 3600.0), quants, models)


def format_summary(s: TraceSummary) -> str:
    if s.jobs == 0:
        return f"trace {s.name}: no jobs"
    def pct(k: int) -> str:
        return f"{100.0 * k / s.jobs:.1f}%"

    lines = [
        f"trace {s.name}: {s.jobs} jobs, {s.gpu_hours:.1f} GPU-hours of isolated work",
        f"arrivals: {s.first_submit:g} s .. {s.last_submit:g} s ({s.jobs_per_hour:.1f} jobs/hour)",
        "GPUs per job: " + ", ".join(f"{g}: {k} ({pct(k)})" for g, k in s.gpu_mix),
        "duration (h): " + "  ".join(f"{_qname(q)} {v / 3600:.2f}" for q, v in s.duration_quantiles),
        "models: " + ", ".join(f"{m} {k} ({pct(k)})" for m, k in s.models),
    ]
    return "\n".join(lines)


def _qname(q: float) -> str:
    return {0.0: "min", 0.5: "median", 1.0: "max"}.get(q, f"p{round(q * 100)}")
