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

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..devcluster.overheads import RunOverheads, daemon_overheads, plain_overheads
from ..devcluster.replay import (
    JobMeasure,
    ReplayPlan,
    RunSummary,
    deviation,
    measures_from_json,
    plan_matches,
    plan_replay,
    predict,
    render_summary,
    report_json,
    summarize_real,
    summarize_sim,
)
from ..devcluster.replay_cmd import Runs, intro, parse_modes
from ..devcluster.runs import PLAIN, Settings
from ..model import InputError
from ..profiles import ThroughputProfile, profile_from_spec
from ..sim.overheads import Overheads
from ..sim.trace_source import resolve_trace

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


def run_dir(out: Path, label: str, repeat: int, repeats: int) -> Path:
    """Where ``replay_runs`` kept a run (``repeat`` counts from 0)."""
    return out / (label.replace(":", "-") + (f"-{repeat + 1}" if repeats > 1 else ""))


def run_overheads(where: Path, label: str, measures: Sequence[JobMeasure]) -> RunOverheads:
    submitted = {m.slurm_id: m.submit for m in measures}
    return plain_overheads(where, submitted) if label == PLAIN else daemon_overheads(where, submitted)


def runs_from_report(out: Path, profile_spec: str,
                     seed: int) -> tuple[list[tuple[str, str]], ReplayPlan, Runs, int]:
    """The runs a report in ``out`` saved, each predicted again with the current simulator, and the
    repeats the run was asked for (which names the run directories); InputError when the report is
    missing or its plan cannot be rebuilt exactly."""
    try:
        data = json.loads((out / "report.json").read_text())
        first = data["repeats"][0]
        nodes, _, rest = str(first["cluster"]).partition("x")
        gpus = int(rest.partition(":")[0])
        labels = list(dict.fromkeys(label for rep in data["repeats"] for label in rep["runs"]))
        named = int(data.get("repeats_asked", len(data["repeats"])))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise InputError(f"--from-dir {out}: no readable report.json of `tesserae bench physical` ({exc})") from None
    profile = profile_from_spec(profile_spec)
    trace, name = resolve_trace(first["trace"], models="a100" if profile_spec == "a100" else None)
    plan = plan_replay(trace, name, profile, scale=float(first["scale"]), nodes=int(nodes), gpus_per_node=gpus,
                       round_s=float(first["round_s"]), grace_s=float(first["grace_s"]), jobs=len(first["jobs"]),
                       seed=seed)
    if not plan_matches(plan, first["jobs"]):
        raise InputError(f"--from-dir {out}: the trace, profile or --seed rebuild other jobs than the report's")
    modes = parse_modes(",".join(labels))
    runs: Runs = {label: [] for label in labels}
    for label, policy in modes:
        for rep in data["repeats"]:
            if label not in rep["runs"]:  # a run cut short: this label had fewer repeats than others
                continue
            run = rep["runs"][label]
            settings = Settings(**run["settings"])
            predicted = predict(plan, PLAIN if label == PLAIN else "daemon", policy, profile, settings=settings)
            runs[label].append((measures_from_json(run["jobs"]), predicted, settings))
    return modes, plan, runs, named


def render_physical(plan: ReplayPlan, labels: Sequence[str], runs: Runs, out: Path,
                    profile: ThroughputProfile | None = None,
                    repeats_asked: int | None = None) -> tuple[str, dict[str, Any], bool]:
    """The report (markdown), its JSON and whether every job of every run completed with its work:
    the simulator (with the overheads of a real run) against the mean of the real runs, the same
    without the overhead model, the gains over the first daemon run, the overheads each run had, and
    every real run's row. Each label counts the runs it has, so a series cut short (or still going)
    reports every finished run; ``repeats_asked`` names their directories."""
    profile = profile or profile_from_spec("a100")
    total = plan.nodes * plan.gpus_per_node
    labels = [label for label in labels if runs[label]]
    repeats = max((len(runs[label]) for label in labels), default=0)
    asked = max(repeats, repeats_asked or 0)
    pairs = {label: [(summarize_real(label, m, plan.scale, total), summarize_sim(label, r, total))
                     for m, r, _ in runs[label]] for label in labels}
    bare = {label: summarize_sim(label, predict(plan, PLAIN if label == PLAIN else "daemon", label.partition(":")[2],
                                                profile, Overheads(), runs[label][0][2]), total)
            for label in labels}
    fid = fidelity(pairs)
    fid_bare = fidelity({label: [(r, bare[label]) for r, _ in ps] for label, ps in pairs.items()})
    base = next((label for label in labels if label != PLAIN), "")
    every = [p for ps in pairs.values() for p in ps]
    measured = {label: [run_overheads(run_dir(out, label, k, asked), label, runs[label][k][0])
                        for k in range(len(runs[label]))] for label in labels}
    text = "\n\n".join([
        "# The physical experiment on the dev cluster (emulated GPUs)", intro(plan),
        "## The simulator against the real runs (mean of the real runs)",
        "The simulator with the overheads of a real run (`sim/overheads.py`):", render_fidelity(fid),
        "The bare round model (no start, stop or round overheads):", render_fidelity(fid_bare),
        f"## Against {base}" if base else "", render_gains(fid, base) if base else "",
        "## The overheads each real run had (wall seconds)",
        "Means (`RunOverheads.model`, what `sim/overheads.py`'s `REAL_DAEMON` holds for one run): a start at a "
        "round onto free GPUs (launch), onto GPUs a stop of the round freed (stop: beyond the launch), in a round "
        "that migrates (migrate: beyond the launch), between rounds within a round of its GPUs coming free; plain "
        "Slurm's starts: the median from the GPUs coming free. The stops' own signal -> requeue-held is the median.",
        render_overheads(measured, plan.round_s / plan.scale),
        "## Every real run", render_summary(every)])
    nth = [[label for label in labels if len(runs[label]) > k] for k in range(repeats)]
    data = {"repeats_asked": asked,
            "repeats": [report_json(plan, {label: (runs[label][k][0], runs[label][k][1]) for label in nth[k]},
                                    {label: runs[label][k][2] for label in nth[k]}) for k in range(repeats)],
            "fidelity": [{**f.__dict__, "jct_dev": f.jct_dev, "makespan_dev": f.makespan_dev} for f in fid],
            "fidelity_bare": [{**f.__dict__, "jct_dev": f.jct_dev, "makespan_dev": f.makespan_dev}
                              for f in fid_bare],
            "overheads": {label: [o.summary() for o in os] for label, os in measured.items()}}
    ok = all(r.completed == r.jobs and r.work_conserved == r.jobs for r, _ in every)
    return text, data, ok


def render_overheads(measured: Mapping[str, Sequence[RunOverheads]], round_wall_s: float) -> str:
    lines = ["| run | starts at rounds onto free GPUs | launch | onto vacated GPUs | stop | in rounds that migrate | "
             "migrate | between rounds (plain: all) | GPUs free -> running | stops | signal -> held | rounds | "
             "round period |", "|" + "---|" * 13]
    for label, os in measured.items():
        for o in os:
            m = o.summary()
            if label == PLAIN:
                lines.append(f"| {label} |{' - |' * 6} {m['launches']} | {_f(m['launch_median_s'], 2, ' s')} |"
                             f"{' - |' * 4}")
                continue
            model = o.model(round_wall_s)
            migrate = math.nan if model.migrate_s is None else model.migrate_s
            lines.append(f"| {label} | {m['launches']} | {_f(model.launch_s, 2, ' s')} | {m['vacated']} | "
                         f"{_f(model.stop_s, 2, ' s')} | {m['migrating']} | {_f(migrate, 2, ' s')} | {m['between']} | "
                         f"{_f(model.between_s or 0.0, 2, ' s')} | {m['stops']} | {_f(m['stop_median_s'], 2, ' s')} | "
                         f"{m['rounds']} | {_f(m['period_mean_s'], 2, ' s')} |")
    return "\n".join(lines)
