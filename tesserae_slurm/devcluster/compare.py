"""`tesserae devcluster compare`: the same small job set under plain Slurm and under the daemon, timed.

The dev cluster gets a second partition over the same nodes (``plain``), which the daemon does not
manage: there the jobs are submitted with sbatch and Slurm's own priority (priority/basic: submit
order) and backfill start them on the GPUs Slurm picks. Then the same jobs, at the same offsets, go
through tsbatch to the managed partition while `tesserae daemon` runs rounds. Each job runs the
torch-free payload ``demo_job.py`` (sleeping steps that checkpoint and resume).

Measured per job from the caller's clock at submission, the payload's events (first start, node list
of every run) and Slurm's end time: job completion time (submit to end), queueing delay (submit to
first start), the nodes each run of a multi-GPU job spanned, restarts, and, from the daemon's state
database, preemptions and migrations. The fake GPUs do no work, so packing could only look free here:
the managed jobs are submitted with ``--no-pack`` and the comparison is about ordering and placement.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..slurm import SlurmBackend, SlurmCliBackend, SlurmError, SlurmJob

PLAIN, DAEMON = "plain", "daemon"
MODES = (PLAIN, DAEMON)
# Shipped models known to the a100 profile at 1, 2 and 4 GPUs with these batch sizes.
MODELS: tuple[tuple[str, int], ...] = (("DCGAN", 32), ("resnet50", 64), ("vgg19", 32), ("PointNet", 64))
GPU_WEIGHTS: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.3), (4, 0.2))
STEP_TIME_S = 0.5

# The batch script of every demo job, written into the run directory. Lines 2-3 trap the checkpoint
# signal and TERM before anything else runs (as jobscripts/ do: docs/daemon.md "Job side").
BATCH_SCRIPT = r"""#!/bin/bash
trap 'echo USR1 >>"${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"' USR1
trap 'echo TERM >>"${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"' TERM
# One demo job: demo.sbatch MODE PAYLOAD OUTDIR STEPS STEP_TIME [PAYLOAD OPTIONS...].
# plain: submitted with sbatch, runs the payload directly on the GPUs Slurm gave it.
# daemon: submitted with tsbatch; `tesserae launch` pins the daemon's GPUs and forwards the checkpoint signal.
mode=$1; payload=$2; out=$3; steps=$4; step_time=$5; shift 5
py=${TESSERAE_PYTHON:-python3}
if [ "$mode" = plain ]; then
    exec "$py" "$payload" --out "$out" --steps "$steps" --step-time "$step_time" "$@"
fi
export TESSERAE_SIGNAL_FILE="${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"
( trap '' USR1 TERM; exec "$py" -m tesserae_slurm.harness launch -- \
    "$py" "$payload" --out "$out" --steps "$steps" --step-time "$step_time" "$@" ) &
_tl=$!
while :; do wait "$_tl" && rc=0 || rc=$?; kill -0 "$_tl" 2>/dev/null || break; done
wait "$_tl" && rc=0 || rc=$?
rm -f "$TESSERAE_SIGNAL_FILE"
exit "$rc"
"""


def write_job_files(workdir: Path) -> tuple[Path, Path]:
    """The batch script and a copy of the payload (``demo_job.py``, standard library only) in ``workdir``:
    the jobs run this payload whichever checkout's launcher and daemon run them (``--checkout``)."""
    from . import demo_job

    script, payload = workdir / "demo.sbatch", workdir / "demo_job.py"
    script.write_text(BATCH_SCRIPT)
    payload.write_text(Path(demo_job.__file__).read_text())
    for f in (script, payload):
        f.chmod(0o755)
    return script, payload


# ---- the job set ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DemoJob:
    name: str
    gpus: int
    model: str
    batch_size: int
    duration_s: float  # work: steps x STEP_TIME_S, the same wherever it runs (fake GPUs)
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


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a kill: the run's other events still count
    return out


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

@dataclass
class Settings:
    partition: str = "tesserae"  # the managed one
    plain_partition: str = "plain"
    policy: str = "tesserae-t"
    policy_options: dict[str, Any] = field(default_factory=dict)  # see policy_options()
    round_seconds: float = 5.0
    grace_seconds: float = 5.0
    checkpoint_s: float = 0.0  # how long the payload takes to checkpoint on the signal
    timeout_s: float = 1800.0  # per mode


class CompareError(RuntimeError):
    """A mode could not run to its end (one line, with where to look)."""


def daemon_config(settings: Settings, workdir: Path) -> dict[str, Any]:
    return {
        "slurm": {"partition": settings.partition, "command_timeout_s": 8, "retries": 1, "start_timeout_s": 60},
        "scheduler": {"policy": settings.policy, "round_seconds": settings.round_seconds,
                      "policy_options": settings.policy_options},
        "preemption": {"grace_seconds": settings.grace_seconds, "stop_records_dir": str(workdir / "stops")},
        "state": {"database": str(workdir / "state.db")},
        "metrics": {"listen": ""},
        "http": {"listen": ""},
        "log_level": "INFO",
    }


def _job_env() -> dict[str, str]:
    env = {"TESSERAE_PYTHON": sys.executable}
    path = os.environ.get("PYTHONPATH")  # a checkout run with PYTHONPATH: the jobs import the same code
    if path:
        env["PYTHONPATH"] = path
    return env


@dataclass(frozen=True)
class JobFiles:
    """Where a run's jobs come from and write to: the batch script, the payload, the output directory
    (also their working directory: `python -m` looks there first, and a source tree there would
    shadow the code under test), and options every job's payload gets (``--checkpoint-s``)."""

    script: Path
    payload: Path
    out: Path
    payload_options: tuple[str, ...] = ()

    def argv(self, mode: str, job: DemoJob) -> list[str]:
        return [str(self.script), mode, str(self.payload), str(self.out), str(job.steps), str(STEP_TIME_S),
                *self.payload_options]


def submit_plain(backend: SlurmBackend, partition: str, files: JobFiles) -> Callable[[DemoJob], str]:
    """sbatch to the partition the daemon does not manage, asking Slurm for the GPUs."""
    def submit(job: DemoJob) -> str:
        extra = ["-p", partition, f"--gpus={job.gpus}", "-J", job.name, "-t", str(job.time_limit_min),
                 "-o", str(files.out / "%j.out"), f"--chdir={files.out}"]
        return str(backend.submit(files.argv(PLAIN, job), extra, env=_job_env()))
    return submit


def submit_tsbatch(backend: SlurmBackend, config: Path, files: JobFiles) -> Callable[[DemoJob], str]:
    """tsbatch's own code path (parse, validate, sbatch) in this process, to the managed partition."""
    from ..site.load import load_config
    from ..tsbatch.submit import prepare, submit

    cfg = load_config(config, check_policy=False)

    def submit_one(job: DemoJob) -> str:
        argv = ["--config", str(config), "--gpus", str(job.gpus), "--model", job.model, "--batch-size",
                str(job.batch_size), "--no-pack", "-J", job.name, "-t", str(job.time_limit_min),
                "-o", str(files.out / "%j.out"), f"--chdir={files.out}", *files.argv(DAEMON, job)]
        prepared, _ = prepare(argv, lambda _c: backend, lambda _p: cfg)
        prepared.env.update(_job_env())
        return str(submit(prepared, backend))
    return submit_one


def submit_all(jobs: Sequence[DemoJob], submit: Callable[[DemoJob], str], clock: Callable[[], float] = time.time,
                sleep: Callable[[float], None] = time.sleep,
                into: dict[str, tuple[str, float]] | None = None) -> dict[str, tuple[str, float]]:
    """Submit each job at its arrival offset; job name -> (Slurm id, submit time), filled into ``into``
    as they go (so a caller interrupted midway knows what to cancel)."""
    out: dict[str, tuple[str, float]] = {} if into is None else into
    t0 = clock()
    for job in sorted(jobs, key=lambda j: (j.arrival_s, j.name)):
        wait = t0 + job.arrival_s - clock()
        if wait > 0:
            sleep(wait)
        at = clock()
        out[job.name] = (submit(job), at)
    return out


def _wait_all_ended(backend: SlurmBackend, partition: str, ids: set[str], deadline: float,
                    alive: Callable[[], str] = lambda: "") -> dict[str, SlurmJob]:
    while True:
        seen = {str(j.job_id): j for j in backend.list_jobs(partition) if str(j.job_id) in ids}
        if len(seen) == len(ids) and all(j.state.is_finished for j in seen.values()):
            return seen
        problem = alive()
        if problem:
            raise CompareError(problem)
        if time.time() > deadline:
            left = sorted(i for i in ids if i not in seen or not seen[i].state.is_finished)
            raise CompareError(f"jobs {', '.join(left)} had not ended after the timeout")
        time.sleep(1.0)


class DaemonProcess:
    """`tesserae daemon --config CONFIG` as a child, its output in ``log``."""

    def __init__(self, config: Path, log: Path, env: Mapping[str, str]) -> None:
        self.log = log
        with log.open("ab") as fh:  # in the run's directory: `-m` looks in the working directory first
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tesserae_slurm.cli.main", "daemon", "--config", str(config)],
                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **env},
                start_new_session=True, cwd=log.parent)

    def problem(self) -> str:
        code = self.proc.poll()
        return "" if code is None else f"the daemon exited with status {code} (see {self.log})"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _read(db: Path, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of a query on the daemon's state database, read-only, in plain SQL over columns every schema
    revision has: `tesserae bench responsive --checkout` reads databases of older code, which the
    store's readers (at the newest revision) refuse. No rows while the daemon has not made its tables."""
    import sqlite3

    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, tuple(args)).fetchall()
    except sqlite3.OperationalError:  # no such table yet
        return []
    finally:
        conn.close()


def wait_round(db: Path, daemon: DaemonProcess, *, after: float = 0.0, timeout_s: float = 120.0) -> None:
    """Wait until the daemon has finished a round that began at or after ``after`` (its first, by default)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        problem = daemon.problem()
        if problem:
            raise CompareError(problem)
        if _read(db, "SELECT 1 FROM rounds WHERE finished_at IS NOT NULL AND started_at >= ? LIMIT 1", [after]):
            return
        time.sleep(0.5)
    raise CompareError(f"the daemon finished no round within {timeout_s:g}s (see {daemon.log})")


def run_mode(mode: str, jobs: Sequence[DemoJob], cluster_env: Mapping[str, str], workdir: Path,
             settings: Settings) -> list[JobResult]:
    """Run the job set once (``plain`` or ``daemon``) and measure it; the jobs' files go under ``workdir``."""
    out = workdir / "jobs"
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    script, payload = write_job_files(workdir)
    files = JobFiles(script, payload, out, ("--checkpoint-s", f"{settings.checkpoint_s:g}"))
    backend = SlurmCliBackend(cluster_env)
    daemon: DaemonProcess | None = None
    counts: dict[str, tuple[int, int]] = {}
    stops: dict[str, list[float]] = {}
    submitted: dict[str, tuple[str, float]] = {}
    finished = False
    try:
        if mode == PLAIN:
            partition = settings.plain_partition
            submit = submit_plain(backend, settings.plain_partition, files)
        else:
            partition = settings.partition
            config = workdir / "tesserae.yaml"
            config.write_text(json.dumps(daemon_config(settings, workdir), indent=1) + "\n")  # JSON is YAML
            daemon = DaemonProcess(config, workdir / "daemon.log", cluster_env)
            wait_round(workdir / "state.db", daemon)  # its start (imports, compiled cores) not timed
            submit = submit_tsbatch(backend, config, files)
        submit_all(jobs, submit, into=submitted)
        ids = {jid for jid, _ in submitted.values()}
        alive = daemon.problem if daemon is not None else (lambda: "")
        ended = _wait_all_ended(backend, partition, ids, time.time() + settings.timeout_s, alive)
        if daemon is not None:
            # one more whole round records the last ends (a round under load can outlast round_seconds)
            wait_round(workdir / "state.db", daemon, after=time.time(), timeout_s=settings.round_seconds + 120)
            counts = _daemon_counts(workdir / "state.db", ids)
            stops = stop_seconds(workdir / "state.db", sorted(ids))
        finished = True
    finally:
        if daemon is not None:
            daemon.stop()
        if not finished:  # an error or Ctrl-C: leave no job of this run behind on the cluster
            for jid, _ in submitted.values():
                try:
                    backend.cancel(int(jid))
                except SlurmError:
                    pass
    results = []
    for job in jobs:
        jid, at = submitted[job.name]
        p, m = counts.get(jid, (0, 0))
        results.append(job_result(job, jid, at, ended.get(jid), read_events(out / f"events-{jid}.jsonl"), p, m,
                                  stops.get(jid, ())))
    return results


STOP_KINDS = ("preempt", "migrate", "requeue")


def stop_seconds(db: Path, ids: Sequence[str], after: float = 0.0) -> dict[str, list[float]]:
    """Per job, each stop the daemon finished (the job requeue-held, not ended meanwhile): seconds from its
    checkpoint signal (the ``signal`` call on record) to the stop's end in its records, when Slurm listed
    the job pending and its GPUs were free. Stops finished before ``after`` are left out."""
    wanted = set(ids)
    signals: dict[str, list[float]] = {}
    for when, jobs in _read(db, "SELECT time, job_ids FROM slurm_calls WHERE method = 'signal' AND ok"):
        for job in str(jobs).split(","):
            if job in wanted:
                signals.setdefault(job, []).append(float(when))
    marks = ",".join("?" * len(STOP_KINDS))
    out: dict[str, list[float]] = {}
    done: dict[str, float] = {}  # job -> the end of its last stop: a signal belongs to the stop after it
    for job, end, error in _read(db, f"SELECT job_id, finished_at, error FROM actions WHERE kind IN ({marks}) "
                                     "AND status = 'done' AND finished_at IS NOT NULL ORDER BY id", STOP_KINDS):
        if job not in wanted:
            continue
        end, since = float(end), done.get(job, -math.inf)
        done[job] = end
        sent = [t for t in signals.get(job, ()) if since < t <= end]
        # an error on a done stop: the job ended instead; no signal: a released job held again, no stop
        if sent and not error and end >= after:
            out.setdefault(job, []).append(end - max(sent))
    return out


def _daemon_counts(db: Path, ids: set[str]) -> dict[str, tuple[int, int]]:
    from ..daemon.state.store import Store

    store = Store.open(db, read_only=True)
    try:
        return {r.job_id: (r.preemptions, r.migrations) for r in store.jobs_by_id(sorted(ids))}
    finally:
        store.close()


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
