"""`tesserae devcluster replay`: a trace replayed on the dev cluster in scaled time, on emulated GPUs, with
the simulator's prediction of the same run beside it.

Time is scaled by ``scale`` S: a trace second is 1/S wall second. Each trace job is submitted at its
arrival / S; its work (the trace's duration) runs on an emulated GPU job (``emulated_job.py``) that
progresses S x speed per wall second at the speed the profile gives for what it runs with (alone,
packed under MPS, time-sliced), and loses the simulator's restart cost on every resume. The daemon's
round length and grace period are the trace's divided by S, and so are the time-valued options of
its policy (Tiresias' queue limits in GPU-seconds, its promotion cap, ...). Under plain Slurm each job
is submitted with sbatch and the time limit the simulator's ``slurm-backfill`` draws for it, in whole
wall minutes as Slurm keeps them (never less than the job needs; the prediction uses the same limits).

Everything measured is reported in trace time: per job the JCT ((end - submit) x S), preemptions and
migrations (the daemon's state database), the work each run did (the payload's events: work is
conserved when every resume starts where the last checkpoint left off and the last run ends with the
trace's work), and per run avg JCT, makespan and finish-time fairness. The prediction is
``simulate()`` run in this process on the same jobs, cluster, profile, policy, move costs and round
length, in trace time, with the overheads of a real run (``sim/overheads.py``, wall seconds x S); FTF for
both sides is computed from submit and end times by one function (``ftf``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..model import Cluster, InputError, Job, JobView
from ..policies.registry import make_policy
from ..policies.slurm_backfill import SlurmBackfillPolicy
from ..presets import get_config
from ..profiles import ThroughputProfile
from ..sim.metrics import SimResult
from ..sim.overheads import REAL_DAEMON, REAL_PLAIN, Overheads
from ..sim.restart import RestartCost
from ..sim.runner import simulate
from ..sim.traces.record import TraceJob
from ..site.load import config_from_mapping
from ..site.scheduler import engine_config
from ..slurm import SlurmBackend, SlurmJob
from .emulation import job_key, speed_table
from .runs import DAEMON, PLAIN, JobFiles, Settings, daemon_config, run_jobs, sbatch_submitter, tsbatch_submitter

GPU_TYPE = "a100"  # the dev cluster's fake GPUs are the profile's reference type
DEFAULT_SCALE = 40.0
# policy options in seconds or GPU-seconds: divided by the scale for the daemon, which counts wall time
TIME_OPTIONS = ("queue_limits", "promote_max_run_s", "max_age_s", "limit_max_s")
LIMIT_SLACK_S = 10.0  # wall seconds a plain job's limit leaves beyond its work (start-up), so Slurm never kills it
WORK_EPS = 1e-6


@dataclass(frozen=True)
class ReplayJob:
    name: str  # "j<trace id>"
    trace_id: str
    gpus: int
    model: str
    batch_size: str
    key: str  # the emulated job's profile key
    work_s: float  # trace seconds of work alone (the trace's duration)
    submit_s: float  # trace time of the submission
    arrival_s: float  # wall offset from the first submission
    time_limit_min: int  # plain Slurm: sbatch -t, wall minutes
    restart_s: float  # trace seconds a resume loses (the simulator's restart cost of the model)


@dataclass(frozen=True)
class ReplayPlan:
    trace: tuple[TraceJob, ...]  # what the simulator predicts with (trace time; plain limits as submitted)
    name: str
    jobs: tuple[ReplayJob, ...]
    scale: float
    round_s: float  # trace seconds
    grace_s: float  # trace seconds
    nodes: int
    gpus_per_node: int
    notes: tuple[str, ...] = ()

    @property
    def cluster_spec(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node}:{GPU_TYPE}"


def plan_replay(trace: Sequence[TraceJob], name: str, profile: ThroughputProfile, *, scale: float, nodes: int,
                gpus_per_node: int, round_s: float = 360.0, grace_s: float = 90.0, jobs: int | None = None,
                seed: int = 0, restart: RestartCost | None = None) -> ReplayPlan:
    """The replay of ``trace`` (its first ``jobs`` arrivals) in wall terms; InputError on nonsense."""
    if not (scale > 0 and math.isfinite(scale)):
        raise InputError(f"--scale must be > 0, got {scale:g}")
    if not round_s > 0 or grace_s < 0:
        raise InputError("--round must be > 0 and --grace >= 0 seconds")
    restart = restart or RestartCost()
    ordered = sorted(trace, key=lambda t: t.submit_time)[:jobs] if jobs is not None else list(trace)
    notes: list[str] = []
    fits = [t for t in ordered if t.num_gpus <= nodes * gpus_per_node]
    if len(fits) < len(ordered):
        notes.append(f"{len(ordered) - len(fits)} job(s) larger than the cluster left out")
    if len({t.user for t in fits}) > 1:  # every job on the dev cluster is submitted by this user
        notes.append("the trace's users are dropped: every job runs as the user who runs the replay")
        fits = [dataclasses.replace(t, user="") for t in fits]
    if not fits:
        raise InputError(f"trace {name}: no job fits the {nodes}x{gpus_per_node} cluster")
    t0 = fits[0].submit_time
    limits = SlurmBackfillPolicy()
    out: list[ReplayJob] = []
    sim: list[TraceJob] = []
    for t in fits:
        job = Job(t.job_id, t.num_gpus, t.model, t.batch_size, time_limit=t.time_limit)
        limit = limits.time_limit(JobView(job, t.submit_time, total_work=t.duration), seed)
        wall = max(limit / scale, t.duration / scale + LIMIT_SLACK_S)
        minutes = max(1, math.ceil(wall / 60.0 - 1e-9))
        out.append(ReplayJob(f"j{t.job_id}", t.job_id, t.num_gpus, t.model, t.batch_size, job_key(profile, job),
                             t.duration, t.submit_time, (t.submit_time - t0) / scale, minutes,
                             restart.of(t.model)))
        sim.append(dataclasses.replace(t, time_limit=minutes * 60.0 * scale))
    return ReplayPlan(tuple(sim), name, tuple(out), scale, round_s, grace_s, nodes, gpus_per_node, tuple(notes))


def scaled_policy_options(policy: str, scale: float) -> dict[str, Any]:
    """The named configuration's policy options with every time-valued one divided by ``scale`` (the
    policy's defaults included: the daemon's clock is the wall clock)."""
    named = get_config(policy)
    made = make_policy(named.policy, **dict(named.policy_options))
    out = dict(named.policy_options)
    names: list[str] = [f.name for f in dataclasses.fields(made)] if dataclasses.is_dataclass(made) else []
    for name in names:
        value = getattr(made, name)
        if name in TIME_OPTIONS and value != math.inf:  # no cap stays no cap (and JSON has no infinity)
            many = isinstance(value, (tuple, list))
            out[name] = [float(v) / scale for v in value] if many else float(value) / scale
    return out


def daemon_settings(plan: ReplayPlan, policy: str, workdir: Path, base: Settings, feedback: bool = True) -> Settings:
    round_wall = plan.round_s / plan.scale
    # the engine's move costs: a restart loses the emulated job its model's restart cost in trace time,
    # 1/S of it in wall time (Slurm's requeue and relaunch, moves.requeue_s, are wall time as they are)
    restart = RestartCost()
    extra: dict[str, Any] = {"moves": {"restart_s": restart.default_s / plan.scale,
                                       "restart_per_model": {m: v / plan.scale for m, v in restart.per_model.items()}}}
    if feedback:  # the emulated jobs report their throughput, as real ones would
        extra["feedback"] = {"reports_dir": str(workdir / "reports"), "report_every_s": max(1.0, round_wall / 2)}
    return dataclasses.replace(base, policy=policy, policy_options=scaled_policy_options(policy, plan.scale),
                               round_seconds=round_wall, grace_seconds=plan.grace_s / plan.scale,
                               daemon_extra=extra)


# ---- running ---------------------------------------------------------------------------------------------

def _args(job: ReplayJob, plan: ReplayPlan, speeds: Path, registry: Path) -> list[str]:
    return ["--work", repr(job.work_s), "--speeds", str(speeds), "--key", job.key,
            "--scale", repr(plan.scale), "--restart-s", repr(job.restart_s), "--registry", str(registry)]


def run_replay_mode(mode: str, plan: ReplayPlan, profile: ThroughputProfile, cluster_env: Mapping[str, str],
                    workdir: Path, settings: Settings) -> list[JobMeasure]:
    """Run the plan once (``plain`` or ``daemon``, the daemon's settings in ``settings``) and measure it."""
    out = workdir / "jobs"
    speeds, registry = workdir / "emulated-speeds.json", workdir / "emulated-gpus"
    workdir.mkdir(parents=True, exist_ok=True)
    reps = [Job(j.trace_id, j.gpus, j.model, j.batch_size) for j in plan.jobs]
    speeds.write_text(json.dumps(speed_table(profile, reps, GPU_TYPE)) + "\n")

    def make(m: str, backend: SlurmBackend, files: JobFiles, config: Path | None) -> Callable[[ReplayJob], str]:
        if m == PLAIN:
            plain = sbatch_submitter(backend, files)
            return lambda j: plain(_args(j, plan, speeds, registry), [
                "-p", settings.plain_partition, f"--gpus={j.gpus}", "-J", j.name, "-t", str(j.time_limit_min),
                "-o", str(out / "%j.out")])
        assert config is not None
        managed = tsbatch_submitter(backend, config, files)
        return lambda j: managed(_args(j, plan, speeds, registry), [
            "--gpus", str(j.gpus), "--model", j.model, "--batch-size", j.batch_size, "-J", j.name,
            "-o", str(out / "%j.out")])

    run = run_jobs(mode, plan.jobs, cluster_env, workdir, settings, make)
    measured = []
    for j in plan.jobs:
        jid, at = run.submitted[j.name]
        measured.append(measure_job(j, jid, at, run.ended.get(jid), run.events(out, j.name),
                                    *run.counts.get(jid, (0, 0))))
    return measured


def replay_one(plan: ReplayPlan, profile: ThroughputProfile, label: str, policy: str, cluster_env: Mapping[str, str],
               workdir: Path, base: Settings, feedback: bool = True) -> tuple[list[JobMeasure], SimResult, Settings]:
    """One run (``plain`` or ``daemon:POLICY``) in a fresh ``workdir``, with its prediction and settings."""
    shutil.rmtree(workdir, ignore_errors=True)  # a stale checkpoint of a reused job id would resume
    workdir.mkdir(parents=True)
    workdir.chmod(0o755)
    mode = PLAIN if label == PLAIN else DAEMON
    settings = dataclasses.replace(base) if mode == PLAIN else daemon_settings(plan, policy, workdir, base, feedback)
    predicted = predict(plan, mode, policy, profile, settings=settings)
    settings.timeout_s = max(1800.0, 4 * predicted.makespan / plan.scale)
    return run_replay_mode(mode, plan, profile, cluster_env, workdir, settings), predicted, settings


# ---- what a run measured ------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobMeasure:
    name: str
    trace_id: str
    slurm_id: str
    gpus: int
    work_s: float  # trace seconds
    submit: float  # wall clock at submission
    first_start: float | None  # the payload's first start event
    end: float | None  # the payload's done event (Slurm's end when it has none)
    state: str
    runs: int
    work_done: float  # the payload's last record of its work (trace seconds)
    ledger: tuple[str, ...]  # how the work was not conserved (empty: it was)
    preemptions: int = 0
    migrations: int = 0
    restarts: int = 0

    @property
    def completed(self) -> bool:
        return self.state == "COMPLETED" and self.end is not None and abs(self.work_done - self.work_s) <= WORK_EPS


def work_ledger(events: Sequence[Mapping[str, Any]], work_s: float) -> tuple[float, tuple[str, ...]]:
    """(work done, problems): each run starts from the work the last one checkpointed, work never
    goes back, and the last run ends with exactly the trace's work."""
    problems: list[str] = []
    saved = 0.0  # what a resume must start from
    last = 0.0
    ended = False
    for e in events:
        kind, work = e.get("event"), float(e.get("work", math.nan))
        if kind == "start":
            if abs(work - saved) > WORK_EPS:
                problems.append(f"a run started at work {work:.6g}, the last checkpoint held {saved:.6g}")
            last = work
        elif kind in ("speed", "checkpoint", "done"):
            if work < last - WORK_EPS:
                problems.append(f"work went back from {last:.6g} to {work:.6g}")
            last = work
            if kind != "speed":
                saved = work
            ended = kind == "done"
    if not ended:
        problems.append("no run finished the work")
    elif abs(last - work_s) > WORK_EPS:
        problems.append(f"finished with work {last:.6g}, the trace's is {work_s:.6g}")
    return last, tuple(problems)


def measure_job(job: ReplayJob, slurm_id: str, submit: float, slurm: SlurmJob | None,
                events: Sequence[Mapping[str, Any]], preemptions: int = 0, migrations: int = 0) -> JobMeasure:
    starts = [float(e["time"]) for e in events if e.get("event") == "start"]
    done = [float(e["time"]) for e in events if e.get("event") == "done"]
    end = max(done) if done else (float(slurm.end_time) if slurm is not None and slurm.end_time is not None else None)
    work, problems = work_ledger(events, job.work_s)
    return JobMeasure(job.name, job.trace_id, slurm_id, job.gpus, job.work_s, submit, min(starts, default=None), end,
                      slurm.state.value if slurm is not None else "LOST", len(starts), work, problems,
                      preemptions, migrations, slurm.restart_count if slurm is not None else 0)


def ftf(submit: Sequence[float], end: Sequence[float], work: Sequence[float], total_gpus: int) -> list[float]:
    """Finish-time fairness rho = JCT / (work x max(1, c)) per job, c the time-average over the job's
    life of the active jobs (submitted, not ended) per GPU: the simulator's definition
    (``JobRecord.ftf``) with the active count followed exactly instead of sampled once a round."""
    points = sorted([(s, 1) for s in submit] + [(e, -1) for e in end])
    times, active = [], []
    n = 0
    for t, d in points:
        n += d
        times.append(t)
        active.append(n)

    def mean_active(a: float, b: float) -> float:
        if b <= a:
            return 0.0
        area, prev, level = 0.0, a, 0
        for t, k in zip(times, active):
            if t <= a:
                level = k
                continue
            if t >= b:
                break
            area += level * (t - prev)
            prev, level = t, k
        area += level * (b - prev)
        return area / (b - a)

    return [(e - s) / (w * max(1.0, mean_active(s, e) / total_gpus)) for s, e, w in zip(submit, end, work)]


@dataclass(frozen=True)
class RunSummary:
    """One run in trace time (seconds)."""

    label: str
    jobs: int
    completed: int
    work_conserved: int  # jobs whose ledger is clean
    avg_jct_s: float
    median_jct_s: float
    makespan_s: float  # first submission to last end
    ftf_worst: float
    ftf_median: float
    preemptions: int
    migrations: int


def summarize_real(label: str, measures: Sequence[JobMeasure], scale: float, total_gpus: int) -> RunSummary:
    done = [m for m in measures if m.completed]
    first = min((m.submit for m in measures), default=0.0)
    jct = [(m.end - m.submit) * scale for m in done if m.end is not None]
    rho = ftf([m.submit * scale for m in done], [m.end * scale for m in done if m.end is not None],
              [m.work_s for m in done], total_gpus)
    last = max((m.end for m in measures if m.end is not None), default=first)
    return RunSummary(label, len(measures), len(done), sum(1 for m in measures if not m.ledger),
                      statistics.fmean(jct) if jct else math.nan, statistics.median(jct) if jct else math.nan,
                      (last - first) * scale, max(rho, default=math.nan),
                      statistics.median(rho) if rho else math.nan,
                      sum(m.preemptions for m in measures), sum(m.migrations for m in measures))


def summarize_sim(label: str, res: SimResult, total_gpus: int) -> RunSummary:
    jobs = res.jobs
    jct = [j.jct for j in jobs]
    rho = ftf([j.submit_time for j in jobs], [j.finish_time for j in jobs], [j.duration for j in jobs], total_gpus)
    return RunSummary(label, len(jobs), len(jobs), len(jobs), statistics.fmean(jct), statistics.median(jct),
                      res.makespan, max(rho), statistics.median(rho), res.preemptions, res.migrations)


def predict(plan: ReplayPlan, mode: str, policy: str, profile: ThroughputProfile,
            overheads: Overheads | None = None, settings: Settings | None = None) -> SimResult:
    """The simulator's run of the same jobs, cluster, profile, policy and round length, in trace time,
    with a real run's overheads (``overheads``, wall seconds; by default the measured ones of the mode,
    ``sim/overheads.py``; ``Overheads()`` for the bare round model) at the plan's scale. The engine
    plans moves with the costs the daemon's site configuration gives it (``settings``: the run's; the
    replay's own when None), in trace time, as the daemon planned them, and, as the daemon, without
    knowing any job's remaining work (the emulated jobs declare no duration)."""
    config = get_config("slurm-backfill" if mode == PLAIN else policy)
    wall = overheads if overheads is not None else (REAL_PLAIN if mode == PLAIN else REAL_DAEMON)
    costs = None
    if mode != PLAIN and config.engine.moves is not None:
        chosen = settings or daemon_settings(plan, policy, Path("."), Settings())
        raw = daemon_config(chosen, Path("."))
        raw = {"scheduler": raw["scheduler"], "preemption": {"grace_seconds": chosen.grace_seconds},
               **({"moves": raw["moves"]} if "moves" in raw else {})}
        site = engine_config(config_from_mapping(raw, check_policy=False)).moves
        if site is not None:
            s = plan.scale
            costs = dataclasses.replace(site, restart_s=site.restart_s * s, stop_s=site.stop_s * s,
                                        horizon_s=site.horizon_s * s,
                                        per_model=tuple((m, v * s) for m, v in site.per_model))
    return simulate(plan.trace, Cluster.from_spec(plan.cluster_spec), config, profile,
                    round_s=plan.round_s + wall.round_over_s * plan.scale, restart=RestartCost(),
                    trace_name=plan.name, overheads=wall.scaled(plan.scale), move_costs=costs,
                    remaining_known=False)


def deviation(real: float, sim: float) -> float:
    """The simulator's deviation from the real run, in percent of the real value (the paper's measure)."""
    return math.nan if not real or math.isnan(real) or math.isnan(sim) else 100.0 * abs(sim - real) / real


# ---- the report -------------------------------------------------------------------------------------------

def _h(s: float) -> str:
    return "-" if s is None or math.isnan(s) else f"{s / 3600:.2f}"


def _f(x: float, digits: int = 2) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def render_summary(rows: Sequence[tuple[RunSummary, RunSummary]]) -> str:
    """(real, predicted) per run: trace-time hours, the deviations in percent."""
    head = ("| run | completed | work conserved | avg JCT (h) | sim avg JCT (h) | dev. | makespan (h) | "
            "sim makespan (h) | dev. | FTF worst | sim FTF worst | preemptions | sim | migrations | sim |")
    lines = [head, "|" + "---|" * 15]
    for real, sim in rows:
        lines.append(
            f"| {real.label} | {real.completed}/{real.jobs} | {real.work_conserved}/{real.jobs} | "
            f"{_h(real.avg_jct_s)} | {_h(sim.avg_jct_s)} | {_f(deviation(real.avg_jct_s, sim.avg_jct_s), 1)} % | "
            f"{_h(real.makespan_s)} | {_h(sim.makespan_s)} | {_f(deviation(real.makespan_s, sim.makespan_s), 1)} % | "
            f"{_f(real.ftf_worst)} | {_f(sim.ftf_worst)} | {real.preemptions} | {sim.preemptions} | "
            f"{real.migrations} | {sim.migrations} |")
    return "\n".join(lines)


def render_jobs(plan: ReplayPlan, runs: Mapping[str, tuple[Sequence[JobMeasure], SimResult]]) -> str:
    labels = list(runs)
    head = "| job | GPUs | model | work (h) | submit (h) | " + " | ".join(
        f"{r}: JCT (h) | sim | p/m | sim p/m" for r in labels) + " |"
    lines = [head, "|" + "---|" * (5 + 4 * len(labels))]
    real = {r: {m.trace_id: m for m in runs[r][0]} for r in labels}
    sim = {r: {j.job_id: j for j in runs[r][1].jobs} for r in labels}
    for j in plan.jobs:
        cells = [j.trace_id, str(j.gpus), j.model, _h(j.work_s), _h(j.submit_s)]
        for r in labels:
            m, s = real[r].get(j.trace_id), sim[r].get(j.trace_id)
            jct = (m.end - m.submit) * plan.scale if m is not None and m.end is not None and m.completed else math.nan
            cells += [_h(jct), _h(s.jct if s else math.nan), f"{m.preemptions}/{m.migrations}" if m else "-",
                      f"{s.preemptions}/{s.migrations}" if s else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_json(plan: ReplayPlan, runs: Mapping[str, tuple[Sequence[JobMeasure], SimResult]],
                settings: Mapping[str, Settings]) -> dict[str, Any]:
    total = plan.nodes * plan.gpus_per_node
    out: dict[str, Any] = {
        "trace": plan.name, "cluster": plan.cluster_spec, "scale": plan.scale, "round_s": plan.round_s,
        "grace_s": plan.grace_s, "notes": list(plan.notes), "jobs": [asdict(j) for j in plan.jobs], "runs": {}}
    for label, (measures, res) in runs.items():
        out["runs"][label] = {
            "settings": asdict(settings[label]),
            "real": asdict(summarize_real(label, measures, plan.scale, total)),
            "predicted": asdict(summarize_sim(label, res, total)),
            "jobs": [{**asdict(m), "jct_s": (m.end - m.submit) * plan.scale if m.end is not None else None}
                     for m in measures],
            "predicted_jobs": [{"id": j.job_id, "jct_s": j.jct, "preemptions": j.preemptions,
                                "migrations": j.migrations} for j in res.jobs],
        }
    return out


def measures_from_json(rows: Sequence[Mapping[str, Any]]) -> list[JobMeasure]:
    """A run's per-job measures back from ``report_json``'s ``jobs`` (to predict again without re-running)."""
    names = {f.name for f in dataclasses.fields(JobMeasure)}
    out = []
    for r in rows:
        fields: dict[str, Any] = {k: (tuple(v) if k == "ledger" else v) for k, v in r.items() if k in names}
        out.append(JobMeasure(**fields))
    return out


def plan_matches(plan: ReplayPlan, jobs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``plan`` has exactly the jobs a report recorded (the same trace, scale and limits)."""
    return [asdict(j) for j in plan.jobs] == [dict(j) for j in jobs]

