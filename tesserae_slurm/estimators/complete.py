"""From a partial profile to a completed one: which entries should exist, and who fills each.

``target_entries`` is the universe a site wants in its table: every pair of same-GPU-count endpoints
(two LLMs excepted: the engine never packs them) and every isolated run, over the GPU counts and LLM
strategies the partial table knows plus the ones asked for. ``complete_table`` asks the estimators in
order; the first that answers an entry fills it and tags it ``estimated:<name>``. Measured entries
are never overwritten.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..model import InputError
from ..profiles import ProfileKey, ThroughputProfile
from .base import Estimator, predict_all, source_tag
from .entries import (
    Endpoint,
    Entry,
    SpeedTable,
    endpoint_from_json,
    make_entry,
    profile_from_table,
    table_from_profile,
)
from .linear import is_data_parallel

log = logging.getLogger(__name__)


def _endpoints(table: SpeedTable) -> dict[str, set[Endpoint]]:
    out: dict[str, set[Endpoint]] = {}
    for e in table:
        for ep in (e.job, e.partner):
            if ep is not None:
                out.setdefault(e.gpu_type, set()).add(ep)
    return out


def target_entries(table: SpeedTable, gpu_counts: Iterable[int] = (),
                   strategies: Mapping[tuple[str, int], Sequence[str]] | None = None) -> list[Entry]:
    """Every entry a complete table over ``table``'s endpoints would hold.

    Data-parallel endpoints (models without strategies, LLMs under ``DP``) are extended to every
    count in ``gpu_counts`` (the linear model's job); ``strategies`` adds candidate strategies per
    (LLM model, GPU count) for keys the table has.
    """
    counts = sorted(set(gpu_counts))
    extra = {(m.lower(), n): tuple(s) for (m, n), s in (strategies or {}).items()}
    out: dict[Entry, None] = {}
    for gpu, eps in sorted(_endpoints(table).items()):
        full: set[Endpoint] = set(eps)
        for ep in eps:
            if is_data_parallel(ep):
                for n in counts:
                    full.add(Endpoint(ProfileKey(ep.key.model, ep.key.batch_size, n), ep.strategy))
            for s in extra.get((ep.key.model.lower(), ep.num_gpus), ()) if ep.strategy else ():
                full.add(Endpoint(ep.key, s))
        by_count: dict[int, list[Endpoint]] = {}
        for ep in sorted(full):
            by_count.setdefault(ep.num_gpus, []).append(ep)
            out[make_entry(gpu, ep)] = None
        for group in by_count.values():
            for i, a in enumerate(group):
                for b in group[i:]:
                    if a.strategy and b.strategy:
                        continue
                    out[make_entry(gpu, a, b)] = None
    return list(out)


def complete_table(observed: SpeedTable, targets: Iterable[Entry], estimators: Sequence[Estimator]) -> SpeedTable:
    """``observed`` plus estimates for the missing ``targets``, first answering estimator wins."""
    missing = [e for e in targets if e not in observed]
    table = observed
    for est in estimators:
        if not missing:
            break
        got = predict_all(est.fit(observed), missing)
        table = table.merged(got, source_tag(est.name))
        missing = [e for e in missing if e not in got]
    if missing:
        log.info("%d entries left unfilled (no estimator had data for them), e.g. %s", len(missing), missing[0])
    return table


def complete_profile(partial: ThroughputProfile, estimators: Sequence[Estimator], gpu_counts: Iterable[int] = (),
                     strategies: Mapping[tuple[str, int], Sequence[str]] | None = None,
                     name: str | None = None) -> tuple[ThroughputProfile, SpeedTable]:
    """The completed profile (what packing looks up) and its table with provenance per entry."""
    observed = table_from_profile(partial)
    table = complete_table(observed, target_entries(observed, gpu_counts, strategies), estimators)
    return profile_from_table(table, name or f"{partial.name}+estimated", partial.datasets, partial), table


def provenance_rows(table: SpeedTable) -> list[dict[str, object]]:
    """One JSON-able row per entry that was not measured (measured is the default)."""
    rows: list[dict[str, object]] = []
    for e in sorted(table, key=Entry.sort_key):
        src = table.source(e)
        if src == "measured":
            continue
        row: dict[str, object] = {"gpu_type": e.gpu_type, "a": _ep(e.job)}
        if e.partner is not None:
            row["b"] = _ep(e.partner)
        row["source"] = src
        rows.append(row)
    return rows


def provenance_from_rows(rows: object, source: str = "provenance") -> dict[Entry, str]:
    """Inverse of ``provenance_rows``: entry -> source, for the entries that were not measured."""
    if not isinstance(rows, list):
        raise InputError(f"{source}: expected a JSON list of provenance rows")
    out: dict[Entry, str] = {}
    for i, row in enumerate(rows):
        where = f"{source}[{i}]"
        try:
            a = endpoint_from_json(row["a"])
            b = endpoint_from_json(row["b"]) if "b" in row else None
            out[make_entry(str(row["gpu_type"]), a, b)] = str(row["source"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: bad provenance row ({exc.__class__.__name__}: {exc})") from None
    return out


def load_provenance(path: str | Path) -> dict[Entry, str]:
    """The ``.provenance.json`` written next to a completed profile (missing file: all measured)."""
    p = Path(path)
    if not p.exists():
        return {}
    try:
        rows = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: cannot read provenance: {exc}") from None
    return provenance_from_rows(rows, str(p))


def _ep(ep: Endpoint) -> dict[str, object]:
    out: dict[str, object] = {"model": ep.key.model, "batch_size": ep.key.batch_size, "num_gpus": ep.key.num_gpus}
    if ep.strategy:
        out["strategy"] = ep.strategy
    return out
