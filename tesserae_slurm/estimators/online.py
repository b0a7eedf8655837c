"""Online feedback (beyond the paper): fold throughput that running jobs report into the table.

A job's launcher reports steps/s over a window together with what it ran with (its strategy, its
partner or none, the GPU type). ``OnlineState.fold`` keeps an exponentially weighted average per
(GPU type, job, strategy) alone and per (pair entry, side) packed; ``OnlineState.apply`` turns them
into normalized speeds and lays them over a table, tagged ``online``:

    normalized packed speed = packed steps/s / steps/s alone under the same strategy x iso(strategy)

where iso(strategy) is the table's normalized isolated speed of that strategy (1.0 for models without
strategies), so the result is relative to the best strategy alone, as the tables are. The steps/s
alone come from online reports of the same job shape running alone, else from the table's absolute
isolated throughput (profiles written by ``tesserae profile`` have it); an LLM strategy never seen
alone takes another strategy's reference scaled by the table's isolated ratio. A side without a
reference keeps its table value. Pure and immutable: the daemon keeps the state and stores its rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model import InputError
from ..profiles import ProfileKey
from .entries import Endpoint, Entry, SpeedTable, Value, endpoint_from_json, make_entry

ONLINE = "online"


@dataclass(frozen=True, slots=True)
class ThroughputReport:
    """Measured steps/s of ``job`` over a window, alone (``partner`` None) or packed with ``partner``."""

    gpu_type: str
    job: Endpoint
    partner: Endpoint | None
    steps_per_s: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.steps_per_s) or self.steps_per_s <= 0.0:
            raise InputError(f"throughput report for {self.job}: steps/s must be a positive number, "
                             f"got {self.steps_per_s!r}")


@dataclass(frozen=True, slots=True)
class Ewma:
    value: float
    count: int

    def updated(self, x: float, alpha: float) -> Ewma:
        return Ewma(x if self.count == 0 else alpha * x + (1.0 - alpha) * self.value, self.count + 1)


@dataclass(frozen=True)
class OnlineState:
    """EWMAs of reported steps/s; ``alpha`` is the weight of the newest report."""

    alpha: float = 0.3
    alone: Mapping[tuple[str, Endpoint], Ewma] = field(default_factory=dict)
    packed: Mapping[tuple[Entry, Endpoint], Ewma] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise InputError(f"online feedback weight alpha must be in (0, 1], got {self.alpha}")

    def fold(self, reports: Iterable[ThroughputReport]) -> OnlineState:
        alone, packed = dict(self.alone), dict(self.packed)
        for r in reports:
            gpu = r.gpu_type.strip().lower()
            if r.partner is None:
                k = (gpu, r.job)
                alone[k] = alone.get(k, Ewma(0.0, 0)).updated(r.steps_per_s, self.alpha)
            else:
                pk = (make_entry(gpu, r.job, r.partner), r.job)
                packed[pk] = packed.get(pk, Ewma(0.0, 0)).updated(r.steps_per_s, self.alpha)
        return OnlineState(self.alpha, alone, packed)

    def apply(self, table: SpeedTable, throughput: Mapping[tuple[str, Endpoint], float] | None = None) -> SpeedTable:
        """``table`` with the pairs that have online measurements replaced (source ``online``).

        ``throughput`` gives absolute steps/s alone from the profile, the fallback reference.
        """
        refs = dict(throughput or {})
        refs.update({k: e.value for k, e in self.alone.items()})
        refs = _other_strategies(refs, table)
        values = dict(table.values)
        sources = dict(table.sources)
        for entry in {e for e, _ in self.packed}:
            sides = [entry.job] if entry.partner == entry.job else [entry.job, entry.partner]
            speeds: dict[Endpoint, float] = {}
            for side in sides:
                assert side is not None
                meas, ref = self.packed.get((entry, side)), refs.get((entry.gpu_type, side))
                iso = table.get(make_entry(entry.gpu_type, side))
                iso_speed = iso.a if iso is not None else (1.0 if not side.strategy else None)
                if meas is None or ref is None or ref <= 0.0 or iso_speed is None:
                    continue
                speeds[side] = meas.value / ref * iso_speed
            if not speeds:
                continue
            old = table.get(entry)
            a_old, b_old = (old.a, old.b) if old is not None else (math.nan, math.nan)
            if entry.partner == entry.job:
                a = b = speeds[entry.job]
            else:
                a = speeds.get(entry.job, a_old)
                b = speeds.get(entry.partner, b_old) if entry.partner is not None else math.nan
            if math.isnan(a) or math.isnan(b):
                continue  # one side measured, the other known nowhere: nothing to write yet
            values[entry] = Value(a, b)
            sources[entry] = ONLINE
        return SpeedTable(values, sources)

    def measured_speed(self, gpu_type: str, job: Endpoint, partner: Endpoint | None) -> float | None:
        """The EWMA steps/s of ``job`` in that situation (None: never reported)."""
        gpu = gpu_type.strip().lower()
        e = self.alone.get((gpu, job)) if partner is None else self.packed.get((make_entry(gpu, job, partner), job))
        return None if e is None else e.value


    def rows(self) -> list[dict[str, object]]:
        """JSON-able rows for the daemon's store; ``from_rows`` reads them back."""
        out: list[dict[str, object]] = []
        for (gpu, job), e in sorted(self.alone.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            out.append({"gpu_type": gpu, "job": _ep(job), "steps_per_s": e.value, "count": e.count})
        for (entry, job), e in sorted(self.packed.items(), key=lambda kv: (kv[0][0].sort_key(), kv[0][1])):
            partner = entry.partner if entry.job == job else entry.job
            assert partner is not None
            out.append({"gpu_type": entry.gpu_type, "job": _ep(job), "partner": _ep(partner),
                        "steps_per_s": e.value, "count": e.count})
        return out

    @staticmethod
    def from_rows(rows: Iterable[Mapping[str, object]], alpha: float = 0.3) -> OnlineState:
        alone: dict[tuple[str, Endpoint], Ewma] = {}
        packed: dict[tuple[Entry, Endpoint], Ewma] = {}
        for i, row in enumerate(rows):
            try:
                gpu, job = str(row["gpu_type"]).lower(), endpoint_from_json(row["job"])
                e = Ewma(float(_number(row, "steps_per_s")), int(_number(row, "count")))
                if "partner" in row:
                    packed[(make_entry(gpu, job, endpoint_from_json(row["partner"])), job)] = e
                else:
                    alone[(gpu, job)] = e
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"online feedback row {i}: {exc.__class__.__name__}: {exc}") from None
        return OnlineState(alpha, alone, packed)


def _number(row: Mapping[str, object], key: str) -> int | float | str:
    """A number as JSON holds it (or its text); anything else is the TypeError float() would raise."""
    value = row[key]
    if isinstance(value, (int, float, str)):
        return value
    raise TypeError(f"{key} must be a number, got {type(value).__name__}")


def _other_strategies(refs: dict[tuple[str, Endpoint], float], table: SpeedTable) -> dict[tuple[str, Endpoint], float]:
    """Steps/s alone under strategies never seen alone, from another strategy of the same job shape:
    ref(s) = ref(s2) x iso(s) / iso(s2), the table's isolated ratio. (An LLM alone usually runs its
    best strategy; its packed reports under a pipeline split still get a reference this way.)"""
    by_key: dict[tuple[str, ProfileKey], list[tuple[str, float]]] = {}
    for (gpu, ep), v in refs.items():
        iso = table.get(make_entry(gpu, ep))
        if ep.strategy and iso is not None and iso.a > 0:
            by_key.setdefault((gpu, ep.key), []).append((ep.strategy, v / iso.a))  # steps/s at iso 1.0
    out = dict(refs)
    for e in table:
        if e.partner is not None or not e.job.strategy or (e.gpu_type, e.job) in out:
            continue
        known = by_key.get((e.gpu_type, e.job.key))
        iso_speed = table.values[e].a
        if known and iso_speed > 0:
            out[(e.gpu_type, e.job)] = min(known)[1] * iso_speed  # the first strategy by name: deterministic
    return out


def _ep(ep: Endpoint) -> dict[str, object]:
    return {"model": ep.key.model, "batch_size": ep.key.batch_size, "num_gpus": ep.key.num_gpus,
            "strategy": ep.strategy}


