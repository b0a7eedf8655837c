"""The paper's linear model for data-parallel jobs (after Sia): tput(N) = N x tput(1), packed likewise.

Throughput of a data-parallel job grows linearly with its GPU count, alone and packed, so the ratio
packed / isolated -- the normalized speed the profile stores -- does not depend on the GPU count. A
pair of data-parallel jobs on N GPUs therefore gets the normalized speeds measured for the same pair
on another count M (1 GPU preferred, the cheapest to profile), each side rescaled by its own isolated
speed ratio iso_N / iso_M (1 for models without strategies; for an LLM under ``DP`` the ratio of its
normalized isolated speeds, when both are known). Infeasibility carries over: data parallelism keeps
a full replica per GPU, so memory per GPU does not shrink with N.

Data-parallel endpoints are models without strategies and LLM strategies named ``DP<layers>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..model import InputError
from ..model.strategy import Kind, parse_strategy
from .entries import Endpoint, Entry, SpeedTable, Value

Shape = tuple[str, str, str]  # (model, batch or "" for strategied models, strategy)


def is_data_parallel(ep: Endpoint) -> bool:
    if ep.strategy == "":
        return True
    try:
        return parse_strategy(ep.strategy).kind is Kind.DATA
    except InputError:  # a profile label that is no strategy
        return False


def shape(ep: Endpoint) -> Shape:
    """What an endpoint is apart from its GPU count (an LLM's batch text may change with the count)."""
    return (ep.key.model, "" if ep.strategy else ep.key.batch_size, ep.strategy)


def _order(n: int, counts: list[int]) -> list[int]:
    """Source counts to try for target ``n``: 1 first, then the nearest smaller, then larger ones."""
    others = [m for m in counts if m != n]
    smaller = sorted((m for m in others if m < n), reverse=True)
    larger = sorted(m for m in others if m > n)
    first = [1] if 1 in others else []
    return first + [m for m in smaller + larger if m != 1]


@dataclass(frozen=True)
class LinearFit:
    pairs: Mapping[tuple[str, Shape, Shape], Mapping[int, Value]]  # shapes sorted
    isolated: Mapping[tuple[str, Shape], Mapping[int, float]]
    known_models: frozenset[tuple[str, str]]  # (gpu, model) of models without strategies

    def _iso(self, gpu: str, ep: Endpoint, n: int) -> float | None:
        if not ep.strategy:
            return 1.0
        return self.isolated.get((gpu, shape(ep)), {}).get(n)

    def predict(self, entry: Entry) -> Value | None:
        job, partner, gpu, n = entry.job, entry.partner, entry.gpu_type, entry.num_gpus
        if not is_data_parallel(job) or (partner is not None and not is_data_parallel(partner)):
            return None
        if partner is None:
            if not job.strategy:
                return Value(1.0) if (gpu, job.key.model) in self.known_models else None
            runs = self.isolated.get((gpu, shape(job)), {})
            for m in _order(n, list(runs)):
                return Value(runs[m])
            return None
        sa, sb = shape(job), shape(partner)
        flip = sb < sa
        key = (gpu, sb, sa) if flip else (gpu, sa, sb)
        measured = self.pairs.get(key, {})
        for m in _order(n, list(measured)):
            v = measured[m]
            a, b = (v.b, v.a) if flip else (v.a, v.b)
            ra = self._ratio(gpu, job, n, m)
            rb = self._ratio(gpu, partner, n, m)
            return Value(a * ra, b * rb)
        return None

    def _ratio(self, gpu: str, ep: Endpoint, n: int, m: int) -> float:
        src, dst = self._iso(gpu, ep, m), self._iso(gpu, ep, n)
        if src is None or dst is None or src <= 0.0:
            return 1.0
        return dst / src


class LinearModel:
    """Estimator: data-parallel pairs (and DP isolated runs) on unmeasured GPU counts."""

    name = "linear"

    def fit(self, observed: SpeedTable) -> LinearFit:
        pairs: dict[tuple[str, Shape, Shape], dict[int, Value]] = {}
        iso: dict[tuple[str, Shape], dict[int, float]] = {}
        known: set[tuple[str, str]] = set()
        for e, v in observed.values.items():
            if e.partner is None:
                if e.job.strategy:
                    iso.setdefault((e.gpu_type, shape(e.job)), {})[e.num_gpus] = v.a
                else:
                    known.add((e.gpu_type, e.job.key.model))
                continue
            for ep in (e.job, e.partner):
                if not ep.strategy:
                    known.add((e.gpu_type, ep.key.model))
            if not (is_data_parallel(e.job) and is_data_parallel(e.partner)):
                continue
            sa, sb = shape(e.job), shape(e.partner)
            if sb < sa:
                pairs.setdefault((e.gpu_type, sb, sa), {})[e.num_gpus] = Value(v.b, v.a)
            else:
                pairs.setdefault((e.gpu_type, sa, sb), {})[e.num_gpus] = v
        return LinearFit(pairs, iso, frozenset(known))
