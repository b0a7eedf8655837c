"""Run several configurations on the same trace (in parallel processes) and write a report directory.

The report directory holds ``report.md`` (a markdown table), ``results.json`` (every run's summary
and per-job records) and, with matplotlib, ``jct_cdf.png``, ``ftf_cdf.png`` and ``decision_time.png``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..configs import get_config
from ..model import Cluster, InputError
from ..profiles import profile_from_spec
from .metrics import STAGES, SimResult, cdf
from .restart import RestartCost
from .runner import ProgressCallback, simulate
from .traces.record import TraceJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSpec:
    """Everything one simulation needs, picklable for a worker process."""

    trace: tuple[TraceJob, ...]
    trace_name: str
    cluster_spec: str
    policy: str  # configuration name (configs.py)
    profile: str = "a100"
    round_s: float = 360.0
    seed: int = 0
    noise: float = 0.0
    check_invariants: bool = False
    restart: RestartCost | None = None
    policy_options: tuple[tuple[str, Any], ...] = ()  # override the configuration's options
    decision_profile: str = ""  # what the scheduler decides with ("" = ``profile``); progress uses ``profile``
    llm_strategy: str = "best"  # best | dp | default-pp | default-pp-always (sim/strategies.py)


def run_one(spec: RunSpec, on_round: ProgressCallback | None = None) -> SimResult:
    config = get_config(spec.policy)
    if spec.policy_options:
        config = dataclasses.replace(config, policy_options={**config.policy_options, **dict(spec.policy_options)})
    believed = profile_from_spec(spec.decision_profile) if spec.decision_profile else None
    return simulate(spec.trace, Cluster.from_spec(spec.cluster_spec), config, profile_from_spec(spec.profile),
                    round_s=spec.round_s, seed=spec.seed, noise=spec.noise, restart=spec.restart,
                    check_invariants=spec.check_invariants, trace_name=spec.trace_name, on_round=on_round,
                    decision_profile=believed, llm_strategy=spec.llm_strategy)


def run_many(specs: Sequence[RunSpec], workers: int | None = None) -> list[SimResult]:
    """Results in the order of ``specs``; one process per run up to ``workers`` (default: CPUs)."""
    for s in specs:  # fail fast on bad names before forking
        get_config(s.policy)
    workers = min(len(specs), workers or os.cpu_count() or 1)
    if workers <= 1:
        return [run_one(s) for s in specs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_one, specs))


def write_report(results: Sequence[SimResult], out_dir: Path, title: str = "") -> dict[str, Any]:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        summaries = [r.summary() for r in results]
        (out_dir / "results.json").write_text(json.dumps({"runs": [r.to_json() for r in results]}, indent=1))
        (out_dir / "report.md").write_text(markdown_table(summaries, title))
    except OSError as exc:
        raise InputError(f"{out_dir}: cannot write the report ({exc.strerror})") from None
    plots(results, out_dir)
    return {"runs": summaries}


def markdown_table(summaries: Sequence[dict[str, Any]], title: str = "") -> str:
    base = summaries[0]
    lines = [f"# {title or 'Comparison'}", "",
             f"Trace `{base['trace']}` ({base['jobs']} jobs), cluster `{base['cluster']}`, "
             f"round {base['round_s']:g} s, seed {base['seed']}, profile noise {base['settings'].get('noise', 0):g}.",
             "",
             "| configuration | avg JCT (h) | vs first | makespan (h) | migrations | preemptions | FTF worst | "
             "FTF median | GPU util | decision ms (median / p99) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(
            f"| {s['policy']} | {s['avg_jct_s'] / 3600:.2f} | {base['avg_jct_s'] / s['avg_jct_s']:.2f}x | "
            f"{s['makespan_s'] / 3600:.2f} | {s['migrations']} | {s['preemptions']} | {s['ftf']['worst']:.2f} | "
            f"{s['ftf']['median']:.2f} | {s['gpu_utilization']:.0%} | "
            f"{s['decision_ms']['median']:.1f} / {s['decision_ms']['p99']:.1f} |")
    lines += ["", "Median decision time per stage (ms):", "",
              "| configuration | " + " | ".join(STAGES) + " |", "|---|" + "---|" * len(STAGES)]
    for s in summaries:
        lines.append(f"| {s['policy']} | " + " | ".join(f"{s['decision_ms']['stages_median'][k]:.2f}"
                                                        for k in STAGES) + " |")
    lines += ["", "'vs first' = avg JCT of the first configuration / this one's (> 1: faster than the first). "
              "FTF = JCT / (isolated time x max(1, mean active jobs per GPU)); docs/simulator.md.",
              "Plots: jct_cdf.png, ftf_cdf.png, decision_time.png; every run's per-job records: results.json.", ""]
    return "\n".join(lines)


def plots(results: Sequence[SimResult], out_dir: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots (pip install 'tesserae-slurm[plot]')")
        return
    for name, xlabel, values in (
        ("jct_cdf", "JCT (hours)", lambda r: [j.jct / 3600 for j in r.jobs]),
        ("ftf_cdf", "finish-time fairness rho", lambda r: [j.ftf for j in r.jobs]),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in results:
            xs, ys = cdf(values(r))
            ax.plot(xs, ys, label=r.policy)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CDF of jobs")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}.png", dpi=110)
        plt.close(fig)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        xs, ys = cdf([x.decision_ms for x in r.rounds])
        left.plot(xs, ys, label=r.policy)
    left.set_xlabel("decision time per round (ms)")
    left.set_ylabel("CDF of rounds")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    bottom = [0.0] * len(results)
    for stage in STAGES:
        heights = [float(sum(getattr(x, f"{stage}_ms") for x in r.rounds) / max(1, len(r.rounds))) for r in results]
        right.bar(range(len(results)), heights, bottom=bottom, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights)]
    right.set_xticks(range(len(results)), [r.policy for r in results], rotation=30, ha="right", fontsize=8)
    right.set_ylabel("mean decision time per round (ms)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "decision_time.png", dpi=110)
    plt.close(fig)
