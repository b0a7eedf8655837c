"""`tesserae bench physical`: the paper's physical experiment (section 6.2) on the dev cluster, emulated GPUs.

The paper ran a 120-job trace arriving at 80 jobs/h on 32 A100s (8 nodes x 4) under Tiresias and
Tesserae-T, and found its simulator within 3.36 % of the real runs' avg JCT and 5.42 % of their
makespan (its Table "fidelity of simulator"), and Tesserae-T 1.62x better than Tiresias in avg JCT and
1.15x in makespan. This replays the same kind of trace (`tesserae devcluster replay`) on an 8 x 4 dev
cluster whose GPUs are emulated (``devcluster/emulated_job.py``), once or ``repeats`` times per run
(plain Slurm, the daemon under each policy), and reports per run the mean of the real runs beside
the simulator's prediction, the deviation, and the runs' ratios against the first daemon run, real
and simulated, with the paper's figures beside.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..devcluster.replay import RunSummary, deviation

# the paper's section 6.2: simulator deviation from the physical runs (mean of five simulations) and the gains
PAPER_DEVIATION = {"daemon:tiresias": (3.36, 2.05), "daemon:tesserae-t": (0.35, 5.42)}  # (avg JCT %, makespan %)
PAPER_GAIN = {"daemon:tiresias": (1.62, 1.15)}  # Tiresias over Tesserae-T: (avg JCT, makespan)


@dataclass(frozen=True)
class Fidelity:
    label: str
    runs: int
    completed: str  # "jobs completed / jobs" summed over the runs
    real_jct_s: float  # mean over the runs
    real_jct_sd_s: float
    sim_jct_s: float
    real_makespan_s: float
    real_makespan_sd_s: float
    sim_makespan_s: float

    @property
    def jct_dev(self) -> float:
        return deviation(self.real_jct_s, self.sim_jct_s)

    @property
    def makespan_dev(self) -> float:
        return deviation(self.real_makespan_s, self.sim_makespan_s)


def fidelity(runs: Mapping[str, Sequence[tuple[RunSummary, RunSummary]]]) -> list[Fidelity]:
    """Per run label, the mean of its real runs against its prediction (the same for every repeat)."""
    out = []
    for label, pairs in runs.items():
        real = [r for r, _ in pairs]
        sim = pairs[0][1]
        jct = [r.avg_jct_s for r in real]
        span = [r.makespan_s for r in real]
        out.append(Fidelity(label, len(real), f"{sum(r.completed for r in real)}/{sum(r.jobs for r in real)}",
                            statistics.fmean(jct), statistics.stdev(jct) if len(jct) > 1 else 0.0, sim.avg_jct_s,
                            statistics.fmean(span), statistics.stdev(span) if len(span) > 1 else 0.0,
                            sim.makespan_s))
    return out


def _f(x: float, digits: int = 2, unit: str = "") -> str:
    return "-" if math.isnan(x) else f"{x:.{digits}f}{unit}"


def _x(x: float) -> str:
    return _f(x, 2, "x")


def render_fidelity(rows: Sequence[Fidelity]) -> str:
    lines = ["| run | real runs | completed | avg JCT (h) | sim | dev. | paper dev. | makespan (h) | sim | dev. | "
             "paper dev. |", "|" + "---|" * 11]
    for f in rows:
        pj, pm = PAPER_DEVIATION.get(f.label, (math.nan, math.nan))
        sd = f" ± {f.real_jct_sd_s / 3600:.2f}" if f.runs > 1 else ""
        sdm = f" ± {f.real_makespan_sd_s / 3600:.2f}" if f.runs > 1 else ""
        lines.append(f"| {f.label} | {f.runs} | {f.completed} | {f.real_jct_s / 3600:.2f}{sd} | "
                     f"{f.sim_jct_s / 3600:.2f} | {_f(f.jct_dev, 1, ' %')} | {_f(pj, 2, ' %')} | "
                     f"{f.real_makespan_s / 3600:.2f}{sdm} | {f.sim_makespan_s / 3600:.2f} | "
                     f"{_f(f.makespan_dev, 1, ' %')} | {_f(pm, 2, ' %')} |")
    return "\n".join(lines)


def render_gains(rows: Sequence[Fidelity], base: str) -> str:
    """Each other run's avg JCT and makespan over ``base``'s (how much better ``base`` is), real and simulated."""
    by = {f.label: f for f in rows}
    if base not in by:
        return ""
    b = by[base]
    lines = [f"| {base} against | avg JCT: real | sim | paper | makespan: real | sim | paper |", "|" + "---|" * 7]
    for f in rows:
        if f.label == base:
            continue
        pj, pm = PAPER_GAIN.get(f.label, (math.nan, math.nan)) if base == "daemon:tesserae-t" else (math.nan, math.nan)
        lines.append(f"| {f.label} | {_x(f.real_jct_s / b.real_jct_s)} | {_x(f.sim_jct_s / b.sim_jct_s)} | "
                     f"{_x(pj)} | {_x(f.real_makespan_s / b.real_makespan_s)} | "
                     f"{_x(f.sim_makespan_s / b.sim_makespan_s)} | {_x(pm)} |")
    return "\n".join(lines)
