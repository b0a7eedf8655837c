"""Running the studies: each simulation's summary cached by a key of all its inputs, the code's
fingerprint among them (``sim/fingerprint.py``), so an interrupted run resumes and the document can
be re-rendered without re-simulating."""

from __future__ import annotations

import hashlib
import json
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..sim.compare import RunSpec, run_many
from ..sim.fingerprint import code_fingerprint
from ..sim.restart import RestartCost
from ..sim.trace_source import resolve_trace
from .studies import Study, available

log = logging.getLogger("reproduce")


def cache_key(spec: RunSpec) -> str:
    fields: list[Any] = [spec.trace_name, len(spec.trace), spec.cluster_spec, spec.policy, spec.profile,
                         spec.round_s, spec.seed, spec.noise, code_fingerprint()]  # other code: simulate again
    if spec.restart is not None:
        fields.append(spec.restart.to_json())
    if spec.decision_profile:  # the table's content, not its name: re-estimated tables re-simulate
        fields.append(hashlib.sha256(Path(spec.decision_profile).read_bytes()).hexdigest())
    if spec.llm_strategy != "best":
        fields.append(spec.llm_strategy)
    if spec.policy_options:
        fields.append(sorted(spec.policy_options))
    if spec.min_speed:
        fields.append(["min_speed", spec.min_speed])
    if spec.cross_user != "timeslice":
        fields.append(["cross_user", spec.cross_user])
    if spec.paper_plan:
        fields.append("paper_plan")
    ident = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _default_plan(study: Study, trace: Sequence[Any], name: str, restart: RestartCost | None
                  ) -> list[tuple[tuple[Any, ...], str, RunSpec]]:
    out = []
    for config in study.configs:
        if config in study.missing:
            continue
        for noise in study.noise:
            for seed in (study.seeds if noise > 0 else study.seeds[:1]):
                spec = RunSpec(tuple(trace), name, study.setup.cluster, config, study.setup.profile,
                               seed=seed, noise=noise, restart=restart, paper_plan=study.paper_plan)
                out.append(((config, noise, seed), f"{config}-{noise:g}-{seed}", spec))
    return out


def summarize(res: Any, per_job: bool = False) -> dict[str, Any]:
    """A run's summary plus what the sections quote: worst FTF jobs, last jobs, JCT per model and size;
    with ``per_job``, every job's JCT and FTF rho (for CDF figures)."""
    summary: dict[str, Any] = res.summary()
    if per_job:
        summary["per_job"] = [{"jct": j.jct, "ftf": j.ftf} for j in res.jobs]
    summary["worst_ftf_jobs"] = [
        {"id": j.job_id, "num_gpus": j.num_gpus, "model": j.model, "duration": j.duration, "jct": j.jct,
         "ftf": j.ftf, "preemptions": j.preemptions, "migrations": j.migrations, "packed_s": j.packed_s}
        for j in sorted(res.jobs, key=lambda j: -j.ftf)[:3]]
    summary["last_jobs"] = [
        {"id": j.job_id, "num_gpus": j.num_gpus, "model": j.model, "duration": j.duration,
         "submit": j.submit_time, "start": j.start_time, "finish": j.finish_time,
         "preemptions": j.preemptions}
        for j in sorted(res.jobs, key=lambda j: -j.finish_time)[:2]]
    by: dict[str, list[float]] = {}
    for j in res.jobs:  # "model@gpus" -> [jobs, JCT sum, packed seconds]
        b = by.setdefault(f"{j.model}@{j.num_gpus}", [0, 0.0, 0.0])
        b[0] += 1
        b[1] += j.jct
        b[2] += j.packed_s
    summary["by_shape"] = by
    summary["ftf"]["p99"] = float(statistics.quantiles([j.ftf for j in res.jobs], n=100, method="inclusive")[98]) \
        if len(res.jobs) > 1 else summary["ftf"]["worst"]
    return summary


def run_study(study: Study, cache: Path, workers: int, fresh: bool, simulate: bool = True) -> None:
    """Fill ``study.results`` from the cache, simulating what is missing when ``simulate``."""
    trace, name = resolve_trace(study.setup.trace, models=study.setup.profile)
    restart = None
    if study.restart_scale != 1.0:
        base = RestartCost()
        restart = RestartCost(base.default_s * study.restart_scale,
                              {m: v * study.restart_scale for m, v in base.per_model.items()})
    study.missing[:] = [c for c in study.configs if not available(c)]
    if study.plan is not None:
        if study.missing:
            return
        planned = study.plan(study, trace, name, cache, fresh and simulate, simulate)
    else:
        planned = _default_plan(study, trace, name, restart)
    todo: list[tuple[tuple[Any, ...], RunSpec, Path]] = []
    for key, label, spec in planned:
        path = cache / f"{study.key}-{label}-{cache_key(spec)}.json"
        if path.exists() and (not fresh or not simulate):
            study.results[key] = json.loads(path.read_text())
        else:
            todo.append((key, spec, path))
    if todo and simulate:
        log.info("%s: %d simulations (%d cached)", study.key, len(todo), len(study.results))
        t0 = time.perf_counter()

        def progress(done: int, total: int, spec: RunSpec, seconds: float) -> None:
            print(f"reproduce: {study.key}: {done}/{total} runs done ({spec.policy} on {spec.trace_name}, "
                  f"seed {spec.seed}), {seconds:.0f} s", file=sys.stderr, flush=True)

        runs = run_many([s for _, s, _ in todo], workers=workers, on_done=progress)
        for (key, _, path), res in zip(todo, runs, strict=True):
            summary = summarize(res, per_job=bool(study.extra.get("per_job")))
            path.write_text(json.dumps(summary, indent=1))
            study.results[key] = summary
        log.info("%s: done in %.0f s", study.key, time.perf_counter() - t0)
