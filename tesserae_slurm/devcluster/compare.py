"""`tesserae devcluster compare`: the same small job set under plain Slurm and under the daemon, timed.

The dev cluster gets a second partition over the same nodes (``plain``), which the daemon does not
manage: there the jobs are submitted with sbatch and Slurm's own priority (priority/basic: submit
order) and backfill start them on the GPUs Slurm picks. Then the same jobs, at the same offsets, go
through tsbatch to the managed partition while `tesserae daemon` runs rounds (``runs.py`` does both).
Each job runs the emulated GPU job without a speed table (``emulated_job.py``: it sleeps its work at
1.0 wherever it runs, checkpoints and resumes).

Measured per job from the caller's clock at submission, the payload's events (first start, node list
of every run) and Slurm's end time: job completion time (submit to end), queueing delay (submit to
first start), the nodes each run of a multi-GPU job spanned, restarts, and, from the daemon's state
database, preemptions and migrations. The fake GPUs do no work, so packing could only look free here:
the managed jobs are submitted with ``--no-pack`` and the comparison is about ordering and placement.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..slurm import SlurmBackend, SlurmJob
from .runs import (
    PLAIN,
    JobFiles,
    Settings,
    run_jobs,
    sbatch_submitter,
    tsbatch_submitter,
)

# Shipped models known to the a100 profile at 1, 2 and 4 GPUs with these batch sizes.
MODELS: tuple[tuple[str, int], ...] = (("DCGAN", 32), ("resnet50", 64), ("vgg19", 32), ("PointNet", 64))
GPU_WEIGHTS: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.3), (4, 0.2))
STEP_TIME_S = 0.5

# ---- the job set ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DemoJob:
    name: str
    gpus: int
    model: str
    batch_size: int
    duration_s: float  # work in seconds, the same wherever it runs (fake GPUs)
    arrival_s: float  # submission offset from the first job's
    time_limit_min: int  # what the user asks Slurm for (backfill plans with it)

    @property
    def steps(self) -> int:
        return max(1, round(self.duration_s / STEP_TIME_S))


def generate_jobs(count: int, seed: int, *, gpus_per_node: int = 4, min_s: float = 20.0, max_s: float = 80.0,
                  mean_gap_s: float = 3.0, limit_factor: float = 2.0) -> tuple[DemoJob, ...]:
    """``count`` jobs, deterministic from ``seed``: 1/2/4 GPUs (half, 30%, 20%; at most a node), durations
    uniform in [min_s, max_s] whole seconds, exponential gaps between arrivals (mean ``mean_gap_s``, the
    first at 0), a shipped model each, and a time limit of ``limit_factor`` x the duration in whole minutes
    (users overestimate; Slurm's limits are minutes)."""
    if count < 1:
        raise ValueError(f"need at least one job, got {count}")
    if not 0 < min_s <= max_s:
        raise ValueError(f"durations need 0 < min <= max, got {min_s:g}..{max_s:g}")
    rng = random.Random(seed)
    sizes = [(g, w) for g, w in GPU_WEIGHTS if g <= gpus_per_node] or [(1, 1.0)]
    jobs: list[DemoJob] = []
    arrival = 0.0
    for i in range(count):
        gpus = rng.choices([g for g, _ in sizes], weights=[w for _, w in sizes])[0]
        model, batch = MODELS[rng.randrange(len(MODELS))]
        duration = float(round(rng.uniform(min_s, max_s) / STEP_TIME_S) * STEP_TIME_S)
        if i:
            arrival = round(arrival + rng.expovariate(1.0 / mean_gap_s), 1) if mean_gap_s > 0 else arrival
        limit = max(1, math.ceil(duration * limit_factor / 60.0))
        jobs.append(DemoJob(f"demo{i:02d}", gpus, model, batch, duration, arrival, limit))
    return tuple(jobs)


# ---- what one run measured -----------------------------------------------------------------------------

@dataclass(frozen=True)
class JobResult:
    name: str
    job_id: str
    gpus: int
    duration_s: float
    submit: float  # wall clock, the caller's, just before the submission call
    first_start: float | None  # the payload's first start event
    end: float | None  # Slurm's end time of the last run (or the payload's done event, when later)
    state: str  # Slurm's final state
    run_nodes: tuple[int, ...] = ()  # nodes each run spanned (Slurm's node count for it)
    restarts: int = 0  # Slurm's restart count
    preemptions: int = 0  # the daemon's records (0 under plain Slurm)
    migrations: int = 0
    nodelists: tuple[str, ...] = ()
    stops_s: tuple[float, ...] = ()  # each stop of the job: the daemon's checkpoint signal to its GPUs free

    @property
    def jct(self) -> float | None:
        return None if self.end is None else self.end - self.submit

    @property
    def queueing(self) -> float | None:
        return None if self.first_start is None else self.first_start - self.submit

    @property
    def split(self) -> bool:
        """A run of this job spanned more than one node."""
        return any(n > 1 for n in self.run_nodes)


@dataclass(frozen=True)
class ModeSummary:
    mode: str
    jobs: int
    completed: int
    avg_jct_s: float
    max_jct_s: float
    makespan_s: float  # first submission to last end
    avg_queueing_s: float
    multi_gpu_jobs: int
    split_jobs: int  # multi-GPU jobs with a run on more than one node
    runs: int
    preemptions: int
    migrations: int
    restarts: int
    stops: int = 0  # stops timed (preemptions and migrations that requeued the job)
    median_stop_s: float = math.nan  # checkpoint signal to GPUs free, median over the stops
    mean_stop_s: float = math.nan


def summarize(mode: str, results: Sequence[JobResult]) -> ModeSummary:
    """The report's numbers; a job without an end or a start counts as not completed and is left out of
    the averages (``completed`` says how many were)."""
    done = [r for r in results if r.state == "COMPLETED" and r.end is not None and r.first_start is not None]
    jcts = [r.jct for r in done if r.jct is not None]
    queueing = [r.queueing for r in done if r.queueing is not None]
    first = min((r.submit for r in results), default=0.0)
    last = max((r.end for r in results if r.end is not None), default=first)
    multi = [r for r in results if r.gpus > 1]
    stops = [t for r in results for t in r.stops_s]
    return ModeSummary(
        mode=mode, jobs=len(results), completed=len(done),
        avg_jct_s=statistics.fmean(jcts) if jcts else math.nan, max_jct_s=max(jcts, default=math.nan),
        makespan_s=last - first, avg_queueing_s=statistics.fmean(queueing) if queueing else math.nan,
        multi_gpu_jobs=len(multi), split_jobs=sum(1 for r in multi if r.split),
        runs=sum(max(1, len(r.run_nodes)) for r in results), preemptions=sum(r.preemptions for r in results),
        migrations=sum(r.migrations for r in results), restarts=sum(r.restarts for r in results),
        stops=len(stops), median_stop_s=statistics.median(stops) if stops else math.nan,
        mean_stop_s=statistics.fmean(stops) if stops else math.nan,
    )


def job_result(job: DemoJob, job_id: str, submit: float, slurm: SlurmJob | None, events: Sequence[Mapping[str, Any]],
               preemptions: int = 0, migrations: int = 0, stops_s: Sequence[float] = ()) -> JobResult:
    starts = [e for e in events if e.get("event") == "start"]
    done = [float(e["time"]) for e in events if e.get("event") == "done"]
    end = float(slurm.end_time) if slurm is not None and slurm.end_time is not None else None
    if end is not None and done:
        end = max(end, max(done))  # Slurm keeps whole seconds: the payload's own end is finer when later
    return JobResult(
        name=job.name, job_id=job_id, gpus=job.gpus, duration_s=job.duration_s, submit=submit,
        first_start=min((float(e["time"]) for e in starts), default=None),
        end=end,
        state=slurm.state.value if slurm is not None else "LOST",
        run_nodes=tuple(int(e.get("num_nodes", 1)) for e in starts),
        restarts=slurm.restart_count if slurm is not None else 0,
        preemptions=preemptions, migrations=migrations, stops_s=tuple(stops_s),
        nodelists=tuple(str(e.get("nodelist", "")) for e in starts),
    )


# ---- running one mode ----------------------------------------------------------------------------------

def job_args(job: DemoJob) -> list[str]:
    """The emulated job's arguments: its work at 1.0, whatever shares its GPUs (no speed table)."""
    return ["--work", f"{job.duration_s:g}", "--tick", str(STEP_TIME_S)]


def submit_plain(backend: SlurmBackend, partition: str, files: JobFiles) -> Callable[[DemoJob], str]:
    """sbatch to the partition the daemon does not manage, asking Slurm for the GPUs."""
    plain = sbatch_submitter(backend, files)
    return lambda job: plain(job_args(job), ["-p", partition, f"--gpus={job.gpus}", "-J", job.name,
                                          "-t", str(job.time_limit_min), "-o", str(files.out / "%j.out")])


def submit_tsbatch(backend: SlurmBackend, config: Path, files: JobFiles) -> Callable[[DemoJob], str]:
    """tsbatch's own code path (parse, validate, sbatch) in this process, to the managed partition."""
    managed = tsbatch_submitter(backend, config, files)
    return lambda job: managed(job_args(job), [
        "--gpus", str(job.gpus), "--model", job.model, "--batch-size", str(job.batch_size), "--no-pack",
        "-J", job.name, "-t", str(job.time_limit_min), "-o", str(files.out / "%j.out")])


def _submitter(settings: Settings) -> Callable[[str, SlurmBackend, JobFiles, Path | None], Callable[[DemoJob], str]]:
    def make(mode: str, backend: SlurmBackend, files: JobFiles, config: Path | None) -> Callable[[DemoJob], str]:
        if mode == PLAIN:
            return submit_plain(backend, settings.plain_partition, files)
        assert config is not None
        return submit_tsbatch(backend, config, files)
    return make


def run_mode(mode: str, jobs: Sequence[DemoJob], cluster_env: Mapping[str, str], workdir: Path,
             settings: Settings) -> list[JobResult]:
    """Run the job set once (``plain`` or ``daemon``) and measure it; the jobs' files go under ``workdir``."""
    out = workdir / "jobs"
    run = run_jobs(mode, jobs, cluster_env, workdir, settings, _submitter(settings))
    results = []
    for job in jobs:
        jid, at = run.submitted[job.name]
        p, m = run.counts.get(jid, (0, 0))
        results.append(job_result(job, jid, at, run.ended.get(jid), run.events(out, job.name), p, m,
                                  run.stops.get(jid, ())))
    return results


# ---- the report ----------------------------------------------------------------------------------------

def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def render_summary(summaries: Sequence[ModeSummary]) -> str:
    head = ("| mode | completed | avg JCT (s) | max JCT (s) | makespan (s) | avg queueing (s) | "
            "multi-GPU jobs split over nodes | runs | preemptions | migrations | stop: signal -> GPUs free, "
            "median / mean (s) |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        stop = f"{_f(s.median_stop_s)} / {_f(s.mean_stop_s)} ({s.stops})" if s.stops else "-"
        lines.append(f"| {s.mode} | {s.completed}/{s.jobs} | {_f(s.avg_jct_s)} | {_f(s.max_jct_s)} | "
                     f"{_f(s.makespan_s)} | {_f(s.avg_queueing_s)} | {s.split_jobs}/{s.multi_gpu_jobs} | {s.runs} | "
                     f"{s.preemptions} | {s.migrations} | {stop} |")
    return "\n".join(lines)


def render_jobs(jobs: Sequence[DemoJob], results: Mapping[str, Sequence[JobResult]]) -> str:
    modes = list(results)
    by = {m: {r.name: r for r in results[m]} for m in modes}
    head = "| job | GPUs | model | work (s) | arrives (s) | limit (min) | " + " | ".join(
        f"{m}: JCT (s) | {m}: queued (s) | {m}: nodes per run" for m in modes) + " |"
    lines = [head, "|" + "---|" * (6 + 3 * len(modes))]
    for j in jobs:
        cells = [j.name, str(j.gpus), j.model, _f(j.duration_s), _f(j.arrival_s), str(j.time_limit_min)]
        for m in modes:
            r = by[m].get(j.name)
            if r is None:
                cells += ["-", "-", "-"]
                continue
            nodes = ",".join(r.nodelists) or "-"
            extra = f" ({r.preemptions}p {r.migrations}m)" if r.preemptions or r.migrations else ""
            cells += [_f(r.jct), _f(r.queueing), nodes + extra]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_json(jobs: Sequence[DemoJob], results: Mapping[str, Sequence[JobResult]],
                settings: Mapping[str, Settings], cluster: Mapping[str, Any]) -> dict[str, Any]:
    """Everything measured, by run label (``plain``, ``daemon:POLICY``), with each run's settings."""
    return {
        "cluster": dict(cluster),
        "jobs": [asdict(j) for j in jobs],
        "modes": {m: {"settings": asdict(settings[m]), "summary": asdict(summarize(m, rs)),
                      "jobs": [{**asdict(r), "jct": r.jct, "queueing": r.queueing} for r in rs]}
                  for m, rs in results.items()},
    }


def policy_options(policy: str) -> dict[str, Any]:
    """The daemon's policy options for the demo: Tiresias' queue thresholds scaled to jobs of tens of
    seconds (demote after 30 GPU-seconds, as etc/tesserae-devcluster.yaml); other policies as named."""
    from ..presets import get_config

    return {"queue_limits": [30, 600]} if get_config(policy).policy == "tiresias" else {}
