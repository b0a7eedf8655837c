"""Entries of a throughput profile as flat data that estimators fit and predict.

A profile is a set of *entries*: a job alone under a strategy (``partner is None``), or two jobs
packed on the same GPUs. Every entry holds one or two normalized speeds (``Value``). Estimators work
on a ``SpeedTable`` (entry -> value) and the completed table goes back into a ``ThroughputProfile``
through ``build_profile``, so packing keeps using the ordinary lookups.

Pairs are unordered: an entry is stored with its smaller endpoint first (``make_entry`` sorts), the
same orientation ``profiles/build.py`` chooses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from ..model import InputError
from ..profiles import IsolatedRecord, PairOption, PairRecord, ProfileKey, ThroughputProfile, build_profile
from ..profiles.keys import MPS

MEASURED = "measured"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    """One job of an entry: its profile key and strategy ("" for models without strategies)."""

    key: ProfileKey
    strategy: str = ""

    @property
    def num_gpus(self) -> int:
        return self.key.num_gpus

    def __str__(self) -> str:
        s = f" {self.strategy}" if self.strategy else ""
        return f"{self.key.model}/{self.key.batch_size}@{self.key.num_gpus}{s}"


def endpoint_from_json(d: object) -> Endpoint:
    """An endpoint as the estimators' JSON files hold it (model, batch_size, num_gpus, strategy)."""
    if not isinstance(d, Mapping):
        raise TypeError("endpoint must be an object")
    return Endpoint(ProfileKey(str(d["model"]), str(d.get("batch_size", "")), int(d["num_gpus"])),
                    str(d.get("strategy", "")))


@dataclass(frozen=True, slots=True)
class Entry:
    """A job alone (``partner`` None) or an unordered packed pair, on one GPU type."""

    gpu_type: str
    job: Endpoint
    partner: Endpoint | None = None

    @property
    def isolated(self) -> bool:
        return self.partner is None

    @property
    def num_gpus(self) -> int:
        return self.job.num_gpus

    def __str__(self) -> str:
        return f"{self.job}" + (f" + {self.partner}" if self.partner else " alone") + f" on {self.gpu_type}"

    def sort_key(self) -> tuple[str, int, Endpoint, bool, Endpoint]:
        """Stable order for output: GPU type, GPU count, job, alone before packed, partner."""
        return (self.gpu_type, self.num_gpus, self.job, self.partner is not None, self.partner or self.job)


@dataclass(frozen=True, slots=True)
class Value:
    """Normalized speeds of an entry's job and partner (``b`` is NaN for an isolated entry).

    0.0 on either side means infeasible (out of memory), as in the profile tables.
    """

    a: float
    b: float = math.nan

    @property
    def feasible(self) -> bool:
        return self.a > 0.0 and (math.isnan(self.b) or self.b > 0.0)

    @property
    def total(self) -> float:
        return self.a + (0.0 if math.isnan(self.b) else self.b)


def make_entry(gpu_type: str, job: Endpoint, partner: Endpoint | None = None) -> Entry:
    """Canonical (sorted) entry; use ``oriented`` to read its value from ``job``'s side."""
    if partner is not None and partner < job:
        job, partner = partner, job
    return Entry(gpu_type.strip().lower(), job, partner)


def oriented(entry: Entry, value: Value, job: Endpoint) -> tuple[float, float]:
    """(speed of ``job``, speed of the other one) in ``entry``."""
    if entry.job == job:
        return value.a, value.b
    return value.b, value.a


@dataclass(frozen=True)
class SpeedTable:
    """Entry -> value, with where each value came from ("measured", "estimated:linear", ...)."""

    values: Mapping[Entry, Value]
    sources: Mapping[Entry, str]

    def __len__(self) -> int:
        return len(self.values)

    def __contains__(self, entry: object) -> bool:
        return entry in self.values

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.values)

    def get(self, entry: Entry) -> Value | None:
        return self.values.get(entry)

    def source(self, entry: Entry) -> str:
        return self.sources.get(entry, MEASURED)

    def without(self, entries: Iterable[Entry]) -> SpeedTable:
        drop = set(entries)
        return SpeedTable({e: v for e, v in self.values.items() if e not in drop},
                          {e: s for e, s in self.sources.items() if e not in drop})

    def only(self, entries: Iterable[Entry]) -> SpeedTable:
        keep = set(entries)
        return SpeedTable({e: v for e, v in self.values.items() if e in keep},
                          {e: s for e, s in self.sources.items() if e in keep})

    def merged(self, values: Mapping[Entry, Value], source: str) -> SpeedTable:
        """This table plus ``values`` (tagged ``source``); existing entries win."""
        new = {e: v for e, v in values.items() if e not in self.values}
        return SpeedTable({**self.values, **new}, {**self.sources, **{e: source for e in new}})

    def pairs(self) -> list[Entry]:
        return [e for e in self.values if e.partner is not None]

    def isolated(self) -> list[Entry]:
        return [e for e in self.values if e.partner is None]


def table_from_profile(profile: ThroughputProfile) -> SpeedTable:
    """Every isolated run and pair measured under MPS of ``profile`` as entries (all tagged measured).
    Time-sliced pairs are not entries: the estimators and online feedback model MPS pairs, and
    ``profile_from_table`` carries a template's time-sliced pairs over as they are."""
    values: dict[Entry, Value] = {}
    for r in profile.isolated:
        values[make_entry(r.gpu_type, Endpoint(r.key, r.strategy or ""))] = Value(r.speed)
    for p in profile.pairs:
        if p.sharing != MPS:
            continue
        ea = Endpoint(p.a, p.option.a_strategy or "")
        eb = Endpoint(p.b, p.option.b_strategy or "")
        e = make_entry(p.gpu_type, ea, eb)
        a, b = (p.option.a_speed, p.option.b_speed) if e.job == ea else (p.option.b_speed, p.option.a_speed)
        values[e] = Value(a, b)
    return SpeedTable(values, {})


def profile_from_table(table: SpeedTable, name: str, datasets: Mapping[str, str] | None = None,
                       template: ThroughputProfile | None = None) -> ThroughputProfile:
    """The table as a profile; ``template`` lends written batch spellings, absolute throughputs and its
    time-sliced pairs."""
    written: dict[tuple[str, ProfileKey, str], IsolatedRecord] = {}
    if template is not None:
        written = {(r.gpu_type, r.key, r.strategy or ""): r for r in template.isolated}
    isolated: list[IsolatedRecord] = []
    pairs: list[PairRecord] = []
    runs = {(e.gpu_type, e.job) for e in table.values if e.partner is None}
    def as_written(gpu: str, ep: Endpoint) -> ProfileKey:
        """The key with the batch the source wrote (``build_profile`` keeps that spelling)."""
        t = written.get((gpu, ep.key, ep.strategy))
        return replace(ep.key, batch_size=t.written_batch) if t is not None and t.written_batch else ep.key

    for e, v in table.values.items():
        if e.partner is not None and any(ep.strategy and (e.gpu_type, ep) not in runs for ep in (e.job, e.partner)):
            log.warning("left out %s: its strategy has no isolated entry to normalize against", e)
            continue
        if e.partner is None:
            t = written.get((e.gpu_type, e.job.key, e.job.strategy))
            isolated.append(IsolatedRecord(e.gpu_type, as_written(e.gpu_type, e.job), e.job.strategy or None, v.a,
                                           t.throughput if t is not None else None))
        else:
            pairs.append(PairRecord(e.gpu_type, as_written(e.gpu_type, e.job), as_written(e.gpu_type, e.partner),
                                    PairOption(e.job.strategy or None, e.partner.strategy or None, v.a, v.b)))
    if template is not None:
        pairs += [p for p in template.pairs if p.sharing != MPS]
    if template is not None:  # the template's order (strategy order breaks packing ties)
        rank = {(r.gpu_type, r.key, r.strategy): i for i, r in enumerate(template.isolated)}
        isolated.sort(key=lambda r: rank.get((r.gpu_type, replace(r.key, batch_size=_canon_batch(template, r)),
                                              r.strategy), len(rank)))
    return build_profile(name, isolated, pairs, datasets)


def _canon_batch(profile: ThroughputProfile, rec: IsolatedRecord) -> str:
    """The key batch a (possibly written-spelling) record has in ``profile``."""
    try:
        return profile.key(rec.key.model, rec.key.batch_size, rec.key.num_gpus).batch_size
    except InputError:
        return rec.key.batch_size
