"""Run several configurations on the same trace (in parallel processes) and write a report directory."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Cluster
from ..profiles import profile_from_spec
from .configs import get_config
from .metrics import SimResult, cdf
from .runner import RestartCost, simulate
from .traces.record import TraceJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSpec:
    """Everything one simulation needs, picklable for a worker process."""

    trace: tuple[TraceJob, ...]
    trace_name: str
    cluster_spec: str
    policy: str
    profile: str = "a100"
    round_s: float = 360.0
    seed: int = 0
    noise: float = 0.0
    check_invariants: bool = False
    restart: RestartCost | None = None


def run_one(spec: RunSpec) -> SimResult:
    return simulate(spec.trace, Cluster.from_spec(spec.cluster_spec), get_config(spec.policy),
                    profile_from_spec(spec.profile), round_s=spec.round_s, seed=spec.seed, noise=spec.noise,
                    check_invariants=spec.check_invariants, trace_name=spec.trace_name, restart=spec.restart)


def run_many(specs: Sequence[RunSpec], workers: int | None = None) -> list[SimResult]:
    for s in specs:  # fail fast on bad names before forking
        get_config(s.policy)
    workers = workers or min(len(specs), os.cpu_count() or 1)
    if workers <= 1 or len(specs) <= 1:
        return [run_one(s) for s in specs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_one, specs))


def write_report(results: Sequence[SimResult], out_dir: Path, title: str = "") -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = [r.summary() for r in results]
    (out_dir / "results.json").write_text(json.dumps({"runs": [r.to_json() for r in results]}, indent=1))
    (out_dir / "report.md").write_text(markdown_table(summaries, title))
    _plots(results, out_dir)
    return {"runs": summaries}


def markdown_table(summaries: Sequence[dict[str, Any]], title: str = "") -> str:
    base = summaries[0]
    lines = [f"# {title or 'Comparison'}", "",
             f"Trace `{base['trace']}` ({base['jobs']} jobs), cluster `{base['cluster']}`, "
             f"round {base['round_s']:g} s, seed {base['seed']}.", "",
             "| policy | avg JCT (h) | vs first | makespan (h) | migrations | preemptions | FTF worst | "
             "FTF median | GPU util | decision ms (median / p99) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(
            f"| {s['policy']} | {s['avg_jct_s'] / 3600:.2f} | {base['avg_jct_s'] / s['avg_jct_s']:.2f}x | "
            f"{s['makespan_s'] / 3600:.2f} | {s['migrations']} | {s['preemptions']} | {s['ftf']['worst']:.2f} | "
            f"{s['ftf']['median']:.2f} | {s['gpu_utilization']:.0%} | "
            f"{s['decision_ms']['median']:.1f} / {s['decision_ms']['p99']:.1f} |")
    lines += ["", "'vs first' = avg JCT of the first policy / this policy's (> 1: faster than the first).",
              "Plots: jct_cdf.png, ftf_cdf.png, decision_time.png.", ""]
    return "\n".join(lines)


def _plots(results: Sequence[SimResult], out_dir: Path) -> None:
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
        ("decision_time", "decision time per round (ms)", lambda r: [x.decision_ms for x in r.rounds]),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in results:
            xs, ys = cdf(values(r))
            ax.plot(xs, ys, label=r.policy)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CDF")
        if name == "jct_cdf":
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}.png", dpi=110)
        plt.close(fig)
