"""From a loader's raw rows to a canonical ThroughputProfile.

Loaders only parse; this module decides what the rows mean, the same way for every source:

* model names that fold equal (``keys.fold``) are one model, spelled as first seen;
* an LLM (a model with parallelism strategies) has one batch per GPU count: the most frequent one
  its rows write (the A100 table writes ``256/32`` under TP24 and ``256/16`` otherwise); a row's own
  spelling is kept as ``written_batch`` so a writer can reproduce it;
* a model without strategies that appears only in pair rows runs alone at 1.0 (normalization);
* a pair is stored once, its smaller (key, strategy) first; one measured more than once, in either
  order, is the mean of its measurements, and infeasible (0.0) if any measurement was. The A100 table
  measured 36 same-model pairs in both orders; a measured pair of identical jobs is made symmetric
  the same way.
* pairs measured under MPS and time-sliced (``PairRecord.sharing``) are kept apart: the same two
  jobs have one record of each kind at most.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model import InputError
from .keys import (
    SHARINGS,
    IsolatedRecord,
    PairOption,
    PairRecord,
    ProfileKey,
    embedded_batch,
    fold,
    fold_strategy,
    normalize_batch,
)
from .table import ThroughputProfile

Endpoint = tuple[ProfileKey, str]  # (key, strategy or "")


@dataclass
class _Group:
    """Measurements of one unordered pair, smaller endpoint first (mutable, local)."""

    a: Endpoint
    b: Endpoint
    written: tuple[str, str]  # the first row's batch spellings
    values: list[tuple[float, float]] = field(default_factory=list)


def _check_speed(value: float, what: str) -> float:
    if not math.isfinite(value) or value < 0.0:
        raise InputError(f"{what}: speed must be a finite number >= 0, got {value!r}")
    return float(value)


def build_profile(name: str, isolated: Iterable[IsolatedRecord], pairs: Iterable[PairRecord],
                  datasets: Mapping[str, str] | None = None) -> ThroughputProfile:
    iso_in, pairs_in = list(isolated), list(pairs)
    spelling: dict[str, str] = {}
    for r in iso_in:
        spelling.setdefault(fold(r.key.model), r.key.model.strip())
    for p in pairs_in:
        spelling.setdefault(fold(p.a.model), p.a.model.strip())
        spelling.setdefault(fold(p.b.model), p.b.model.strip())

    def model(name_: str) -> str:
        return spelling[fold(name_)]

    strategied = {model(r.key.model) for r in iso_in if r.strategy is not None}
    strategied |= {model(p.a.model) for p in pairs_in if p.option.a_strategy is not None}
    strategied |= {model(p.b.model) for p in pairs_in if p.option.b_strategy is not None}

    written: dict[tuple[str, int], Counter[str]] = {}
    sides = [(r.key, r.written_batch or r.key.batch_size) for r in iso_in]
    sides += [(p.a, p.a_written_batch or p.a.batch_size) for p in pairs_in]
    sides += [(p.b, p.b_written_batch or p.b.batch_size) for p in pairs_in]
    for k, wb in sides:
        if model(k.model) in strategied:
            written.setdefault((model(k.model), k.num_gpus), Counter())[normalize_batch(wb)] += 1
    fixed = {mk: c.most_common(1)[0][0] for mk, c in written.items()}  # ties: first seen

    def canon(k: ProfileKey, what: str) -> tuple[ProfileKey, str]:
        """Canonical key and the written batch to remember ("" when it is the key's)."""
        if k.num_gpus <= 0:
            raise InputError(f"{what}: GPU count must be > 0, got {k.num_gpus}")
        m, batch = model(k.model), normalize_batch(k.batch_size)
        emb = embedded_batch(m)
        if emb is not None:
            if batch and batch != emb:
                raise InputError(f"{what}: batch {k.batch_size!r} contradicts model {m!r}")
            return ProfileKey(m, emb, k.num_gpus), ""
        if m in strategied:
            key = ProfileKey(m, fixed[(m, k.num_gpus)], k.num_gpus)
            return key, ("" if batch == key.batch_size else batch)
        return ProfileKey(m, batch, k.num_gpus), ""

    spell_strategy: dict[tuple[str, int, str], str] = {}

    def strategy(k: ProfileKey, s: str | None, what: str) -> str:
        if (s is None) != (k.model not in strategied):
            raise InputError(f"{what}: {k.model} {'needs' if s is None else 'takes no'} parallelism strategy")
        if s is None:
            return ""
        if not s.strip():
            raise InputError(f"{what}: empty strategy")
        return spell_strategy.setdefault((k.model, k.num_gpus, fold_strategy(s)), s.strip())

    def gpu(g: str) -> str:
        return g.strip().lower()

    iso: list[IsolatedRecord] = []
    for r in iso_in:
        what = f"isolated {r.key} on {r.gpu_type}"
        k, wb = canon(r.key, what)
        s = strategy(k, r.strategy, what) or None
        iso.append(IsolatedRecord(gpu(r.gpu_type), k, s, _check_speed(r.speed, what), r.throughput, wb))

    groups: dict[tuple[str, str, Endpoint, Endpoint], _Group] = {}
    implicit: dict[tuple[str, ProfileKey], None] = {}
    for p in pairs_in:
        what = f"pair {p.a} + {p.b} on {p.gpu_type}"
        if p.sharing not in SHARINGS:
            raise InputError(f"{what}: sharing must be {' or '.join(SHARINGS)}, got {p.sharing!r}")
        if p.a.num_gpus != p.b.num_gpus:
            raise InputError(f"{what}: packed jobs must use the same number of GPUs")
        a, wa = canon(p.a, what)
        b, wb = canon(p.b, what)
        ea, eb = (a, strategy(a, p.option.a_strategy, what)), (b, strategy(b, p.option.b_strategy, what))
        x, y = _check_speed(p.option.a_speed, what), _check_speed(p.option.b_speed, what)
        g = gpu(p.gpu_type)
        for k, s in (ea, eb):
            if not s:
                implicit.setdefault((g, k))
        lo, hi = sorted((ea, eb))  # one orientation per unordered pair, whatever the row order
        flip = (ea, eb) != (lo, hi)
        grp = groups.get((g, p.sharing, lo, hi))
        if grp is None:
            grp = groups[(g, p.sharing, lo, hi)] = _Group(lo, hi, (wb, wa) if flip else (wa, wb))
        grp.values.append((y, x) if flip else (x, y))
        if ea == eb:  # identical jobs: the row's order means nothing
            grp.values.append((y, x))

    have = {(r.gpu_type, r.key) for r in iso if r.strategy is None}
    iso += [IsolatedRecord(g, k, None, 1.0) for g, k in implicit if (g, k) not in have]
    out: list[PairRecord] = []
    for (g, sharing, _, _), grp in groups.items():
        if any(x == 0.0 or y == 0.0 for x, y in grp.values):
            xs, ys = 0.0, 0.0
        else:
            xs = sum(x for x, _ in grp.values) / len(grp.values)
            ys = sum(y for _, y in grp.values) / len(grp.values)
        out.append(PairRecord(g, grp.a[0], grp.b[0], PairOption(grp.a[1] or None, grp.b[1] or None, xs, ys),
                              *grp.written, sharing))
    ds = {model(m): d for m, d in (datasets or {}).items() if fold(m) in spelling}
    return ThroughputProfile(name, tuple(iso), tuple(out), ds)
