"""Run several configurations on the same trace (in parallel processes) and write a report directory.

The report directory holds ``report.md`` (a markdown table), ``results.json`` (every run's summary
and per-job records) and, with matplotlib, ``jct_cdf.png``, ``ftf_cdf.png`` and ``decision_time.png``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import textwrap
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..model import Cluster, InputError
from ..model.gpu_limits import GpuLimits
from ..presets import get_config
from ..profiles import profile_from_spec
from .metrics import STAGES, SimResult, cdf
from .restart import RestartCost
from .runner import ProgressCallback, simulate
from .traces.record import TraceJob

log = logging.getLogger(__name__)
CROSS_USER_CHOICES = ("timeslice", "mps", "never")


@dataclass(frozen=True)
class RunSpec:
    """Everything one simulation needs, picklable for a worker process."""

    trace: tuple[TraceJob, ...]
    trace_name: str
    cluster_spec: str
    policy: str  # configuration name (presets.py)
    profile: str = "a100"
    round_s: float = 360.0
    seed: int = 0
    noise: float = 0.0
    check_invariants: bool = False
    restart: RestartCost | None = None
    policy_options: tuple[tuple[str, Any], ...] = ()  # override the configuration's options
    decision_profile: str = ""  # what the scheduler decides with ("" = ``profile``); progress uses ``profile``
    llm_strategy: str = "best"  # best | dp | default-pp | default-pp-always (sim/strategies.py)
    limits: GpuLimits | None = None  # per-user/account GPU limits (--limits; model/gpu_limits.py)
    min_speed: float = 0.0  # over the configuration's packing floor when > 0 (EngineConfig.min_speed)
    # two users' pairs: scored time-sliced ("timeslice", the configurations' own), as one user's ("mps"),
    # or never formed ("never": the daemon's mps.cross_user: never); the truth time-slices them either way
    cross_user: str = "timeslice"
    paper_plan: bool = False  # every move free, the plan rebuilt each round as the paper has it (moves=None)


def run_one(spec: RunSpec, on_round: ProgressCallback | None = None) -> SimResult:
    config = get_config(spec.policy)
    if spec.policy_options:
        config = dataclasses.replace(config, policy_options={**config.policy_options, **dict(spec.policy_options)})
    if spec.min_speed:
        config = dataclasses.replace(config, engine=dataclasses.replace(config.engine, min_speed=spec.min_speed))
    if spec.cross_user not in CROSS_USER_CHOICES:
        raise InputError(f"cross_user must be one of {', '.join(CROSS_USER_CHOICES)}, got {spec.cross_user!r}")
    if spec.cross_user == "mps":
        config = dataclasses.replace(config, engine=dataclasses.replace(config.engine, cross_user="mps"))
    if spec.paper_plan:
        config = dataclasses.replace(config, engine=dataclasses.replace(config.engine, moves=None))
    believed = profile_from_spec(spec.decision_profile) if spec.decision_profile else None
    return simulate(spec.trace, Cluster.from_spec(spec.cluster_spec), config, profile_from_spec(spec.profile),
                    round_s=spec.round_s, seed=spec.seed, noise=spec.noise, restart=spec.restart,
                    check_invariants=spec.check_invariants, trace_name=spec.trace_name, on_round=on_round,
                    decision_profile=believed, llm_strategy=spec.llm_strategy, limits=spec.limits,
                    group_by_user=spec.cross_user == "never")


def run_many(specs: Sequence[RunSpec], workers: int | None = None,
             on_done: Callable[[int, int, RunSpec, float], None] | None = None) -> list[SimResult]:
    """Results in the order of ``specs``; one process per run up to ``workers`` (default: CPUs).
    ``on_done(done, total, spec, seconds)`` is called as each run finishes (progress lines)."""
    for s in specs:  # fail fast on bad names before forking
        get_config(s.policy)
    workers = min(len(specs), workers or os.cpu_count() or 1)
    t0 = time.monotonic()
    if workers <= 1:
        out = []
        for i, s in enumerate(specs):
            out.append(run_one(s))
            if on_done:
                on_done(i + 1, len(specs), s, time.monotonic() - t0)
        return out
    results: dict[int, SimResult] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_one, s): i for i, s in enumerate(specs)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_done:
                on_done(len(results), len(specs), specs[i], time.monotonic() - t0)
    return [results[i] for i in range(len(specs))]


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


def plot_title(what: str, results: Sequence[SimResult], width: int = 90) -> str:
    """What a figure shows and on what: trace, cluster, round length and the policies compared."""
    r = results[0]
    return "\n".join(textwrap.wrap(
        f"{what}: trace {r.trace} ({len(r.jobs)} jobs), cluster {r.cluster} ({r.total_gpus} GPUs), "
        f"round {r.round_duration:g} s; policies {', '.join(x.policy for x in results)}", width,
        break_on_hyphens=False))


def _steps_around(lo: float, hi: float) -> tuple[float, float]:
    """The 1-2-5 values just outside [lo, hi] (lo > 0): x limits with a labelled tick at each end."""
    import math

    steps = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
             for m in (1.0, 2.0, 5.0)]
    below = max(v for v in steps if v <= lo * (1 + 1e-9))
    above = min(v for v in steps if v >= hi * (1 - 1e-9) and v > below)
    return below, above


def _cdf_figure(results: Sequence[SimResult], what: str, xlabel: str, values: Callable[[SimResult], list[float]],
                mark_one: bool = False) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, ax = plt.subplots(figsize=(7, 4.6))
    shown = []
    for r in results:
        xs, ys = cdf(values(r))
        ax.plot(xs, ys, label=r.policy)
        shown += [float(x) for x in xs if x > 0]
    ax.set_xscale("log")
    if shown:
        ax.set_xlim(*_steps_around(min(shown + [1.0] * mark_one), max(shown + [1.0] * mark_one)))
    # labelled ticks at 1-2-5 steps only: matplotlib's default labels every minor tick of a short log range
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if mark_one:
        ax.axvline(1.0, color="black", linestyle="--", linewidth=0.9, label="rho = 1 (fair share)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(plot_title(what, results), fontsize=8.5)
    fig.set_label(ax.get_title().replace("\n", " "))  # the saved PNG's Title
    fig.tight_layout()
    return fig


def ftf_figure(results: Sequence[SimResult]) -> Any:
    return _cdf_figure(results, "Finish-time fairness", "finish-time fairness rho (log; < 1 better than a fair share)",
                       lambda r: [j.ftf for j in r.jobs], mark_one=True)


def jct_figure(results: Sequence[SimResult]) -> Any:
    return _cdf_figure(results, "Job completion time", "JCT (hours, log)", lambda r: [j.jct / 3600 for j in r.jobs])


def decision_figure(results: Sequence[SimResult]) -> Any:
    """Engine calls only: rounds that reused the last decision (0 ms) are left out, as report.md does."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    for r in results:
        decided = [x.decision_ms for x in r.rounds if not x.reused]
        if decided:
            xs, ys = cdf(decided)
            left.plot(xs, ys, label=f"{r.policy} ({len(decided)} of {len(r.rounds)} rounds)")
    left.set_xscale("log")  # a first call's JIT compile can be 100x the median
    left.set_xlabel("decision time per round (ms, log)")
    left.set_ylabel("CDF of rounds that called the engine")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    bottom = [0.0] * len(results)
    for stage in STAGES:  # the report's "median decision time per stage" table, stacked
        heights = []
        for r in results:
            vals = [getattr(x, f"{stage}_ms") for x in r.rounds if not x.reused]
            heights.append(float(np.median(vals)) if vals else 0.0)
        right.bar(range(len(results)), heights, bottom=bottom, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights)]
    right.set_xticks(range(len(results)), [r.policy for r in results], rotation=30, ha="right", fontsize=8)
    right.set_ylabel("median ms per stage (engine calls)")
    right.legend(fontsize=8)
    title = plot_title("Decision time (reused rounds left out, as in report.md)", results, 130)
    fig.suptitle(title, fontsize=9)
    fig.set_label(title.replace("\n", " "))
    fig.tight_layout()
    return fig


def plots(results: Sequence[SimResult], out_dir: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots (pip install 'tesserae-slurm[plot]')")
        return
    for name, make in (("jct_cdf", jct_figure), ("ftf_cdf", ftf_figure), ("decision_time", decision_figure)):
        fig = make(results)
        fig.savefig(out_dir / f"{name}.png", dpi=110, metadata={"Title": fig.get_label()})
        plt.close(fig)
