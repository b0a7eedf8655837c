"""Where the numbers of a decision came from: the table the engine decides with, and per placed job
whether its speed was *measured* (online feedback from running jobs), *profiled* (the configured
table) or *estimated:<estimator>* (a table completed by ``tesserae estimate fill``). Pure.

``folded_profile`` lays the online measurements over the configured table (``OnlineState.apply``),
using only situations reported at least ``min_reports`` times and clamping the derived normalized
speeds to ``[0, max_speed]``: one job's reports can move the table no further than physics allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...estimators.complete import load_provenance
from ...estimators.entries import (
    MEASURED,
    Endpoint,
    SpeedTable,
    Value,
    make_entry,
    oriented,
    profile_from_table,
    table_from_profile,
)
from ...estimators.online import ONLINE, OnlineState
from ...model import Job, RoundDecision
from ...profiles import ThroughputProfile

LABELS = {ONLINE: "measured", MEASURED: "profiled"}
FALLBACK = "fallback"  # the profile has no entry: alone at 1.0 by definition, never packed


def label(source: str) -> str:
    return LABELS.get(source, source)


def provenance_path(profile_spec: str) -> Path | None:
    """``PROFILE.provenance.json`` next to a profile file (``tesserae estimate fill`` writes it)."""
    p = Path(profile_spec).expanduser()
    return p.with_name(p.name + ".provenance.json") if p.suffix.lower() in (".csv", ".json") else None


def base_table(profile: ThroughputProfile, profile_spec: str) -> SpeedTable:
    """The configured table as entries, each tagged measured (profiled) or with its estimator."""
    table = table_from_profile(profile)
    path = provenance_path(profile_spec)
    prov = load_provenance(path) if path is not None else {}
    return SpeedTable(table.values, {e: s for e, s in prov.items() if e in table.values})


def usable(state: OnlineState, min_reports: int) -> OnlineState:
    """Only what was reported at least ``min_reports`` times."""
    return OnlineState(state.alpha, {k: v for k, v in state.alone.items() if v.count >= min_reports},
                       {k: v for k, v in state.packed.items() if v.count >= min_reports})


def folded_table(table: SpeedTable, profile: ThroughputProfile, state: OnlineState, min_reports: int,
                 max_speed: float) -> SpeedTable:
    refs = {(r.gpu_type, Endpoint(r.key, r.strategy or "")): r.throughput for r in profile.isolated
            if r.throughput is not None}
    out = usable(state, min_reports).apply(table, refs)
    values = dict(out.values)
    for e, src in out.sources.items():
        if src == ONLINE:
            v = values[e]
            values[e] = Value(min(max(v.a, 0.0), max_speed), min(max(v.b, 0.0), max_speed))
    return SpeedTable(values, out.sources)


def folded_profile(profile: ThroughputProfile, table: SpeedTable, state: OnlineState, min_reports: int,
                   max_speed: float) -> tuple[ThroughputProfile, SpeedTable]:
    """What the engine decides with: ``profile`` itself until some measurement is usable."""
    folded = folded_table(table, profile, state, min_reports, max_speed)
    if not any(s == ONLINE for s in folded.sources.values()):
        return profile, folded
    return profile_from_table(folded, f"{profile.name}+online", profile.datasets, profile), folded


def decision_sources(decision: RoundDecision, jobs: Mapping[str, Job], profile: ThroughputProfile,
                     table: SpeedTable, state: OnlineState, node_type: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per placed job: the entry its speed came from, its source label, and its online record."""
    partner: dict[str, str] = {}
    for p in decision.packed:
        partner[p.placed], partner[p.partner] = p.partner, p.placed
    out: dict[str, dict[str, Any]] = {}

    def endpoint(job_id: str) -> Endpoint | None:
        job = jobs.get(job_id)
        if job is None:
            return None
        return Endpoint(profile.job_class(job).key, decision.strategies.get(job_id) or "")

    for job_id, refs in sorted(decision.placement.job_gpus().items()):
        ep = endpoint(job_id)
        if ep is None:
            continue
        gpu = node_type.get(refs[0][0], "")
        other = endpoint(partner[job_id]) if job_id in partner else None
        entry = make_entry(gpu, ep, other)
        value = table.get(entry)
        src = label(table.source(entry)) if value is not None else FALLBACK
        info: dict[str, Any] = {"source": src, "entry": str(entry)}
        if value is not None:
            info["speed"] = oriented(entry, value, ep)[0] if other is not None else value.a
        reported = state.packed.get((entry, ep)) if other is not None else state.alone.get((entry.gpu_type, ep))
        if reported is not None:
            info.update(reports=reported.count, steps_per_s=reported.value)
        out[job_id] = info
    return out

