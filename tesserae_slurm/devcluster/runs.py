"""Running one job set on the dev cluster, under plain Slurm or under `tesserae daemon`, and waiting for it.

Shared by `tesserae devcluster compare` (toy jobs on fake GPUs) and `tesserae devcluster replay` (a
trace in scaled time on emulated GPUs): both submit every job at its offset, either with sbatch to a
partition the daemon does not manage (Slurm's own priority and backfill) or through tsbatch's own code
path to the managed partition while a daemon runs rounds; both then wait for every job to end and read
what happened from Slurm, the jobs' event files and the daemon's state database. Every job runs the
emulated GPU job (``emulated_job.py``) through ``BATCH_SCRIPT``; `tesserae bench responsive` and `tesserae
bench moves` submit through the same submitters.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..slurm import SlurmBackend, SlurmCliBackend, SlurmError, SlurmJob
from .cluster import DevCluster
from .errors import DevClusterError
from .install import ensure_slurm_installed

PLAIN, DAEMON = "plain", "daemon"
MODES = (PLAIN, DAEMON)

# The batch script of every job, written into the run directory: MODE, the payload (the run's copy of
# the emulated job), then its arguments. Lines 2-3 trap the checkpoint signal and TERM before anything
# else runs (as jobscripts/ do: docs/daemon.md "Job side").
BATCH_SCRIPT = r"""#!/bin/bash
trap 'echo USR1 >>"${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"' USR1
trap 'echo TERM >>"${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"' TERM
# One emulated GPU job of `tesserae devcluster compare|replay`: job.sbatch MODE PAYLOAD EMULATED-JOB-ARGS...
# plain: submitted with sbatch, runs the payload directly on the GPUs Slurm gave it.
# daemon: submitted with tsbatch; `tesserae launch` pins the daemon's GPUs and forwards the checkpoint signal;
# the payload exits after its checkpoint and the launcher, outliving it, records the stop.
mode=$1; payload=$2; shift 2
py=${TESSERAE_PYTHON:-python3}
if [ "$mode" = plain ]; then
    exec "$py" "$payload" "$@"
fi
export TESSERAE_SIGNAL_FILE="${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"
( trap '' USR1 TERM; exec "$py" -m tesserae_slurm.harness launch -- \
    "$py" "$payload" "$@" ) &
_tl=$!
while :; do wait "$_tl" && rc=0 || rc=$?; kill -0 "$_tl" 2>/dev/null || break; done
wait "$_tl" && rc=0 || rc=$?
rm -f "$TESSERAE_SIGNAL_FILE"
exit "$rc"
"""


class Arrival(Protocol):
    """What ``submit_all`` needs of a job: a unique name and its submission offset in wall seconds."""

    @property
    def name(self) -> str: ...
    @property
    def arrival_s(self) -> float: ...


J = TypeVar("J", bound=Arrival)


@dataclass
class Settings:
    partition: str = "tesserae"  # the managed one
    plain_partition: str = "plain"
    policy: str = "tesserae-t"
    policy_options: dict[str, Any] = field(default_factory=dict)
    round_seconds: float = 5.0
    grace_seconds: float = 5.0
    checkpoint_s: float = 0.0  # wall seconds the payload takes to checkpoint on the signal
    timeout_s: float = 1800.0  # per run
    daemon_extra: dict[str, Any] = field(default_factory=dict)  # more config sections (feedback, packing)


class RunError(RuntimeError):
    """A run could not go to its end (one line, with where to look)."""


def cluster_for_runs(cluster: DevCluster, plain: str, install: bool = True) -> bool:
    """Use the running cluster when it has the plain partition, else bring it up; True when this call
    brought it up (the caller takes it down again)."""
    if cluster.status().up:
        out = cluster.runner().run(["sinfo", "-h", "-p", plain, "-o", "%P"])
        if not out.strip():
            raise DevClusterError(f"the dev cluster at {cluster.root} runs without partition {plain!r}: "
                                  f"`tesserae devcluster down --dir {cluster.root}` first, or use another --dir")
        return False
    if install:
        ensure_slurm_installed()
    cluster.up()
    return True


def bf_interval(cluster: DevCluster) -> int:
    """The running cluster's backfill interval, from its slurm.conf (Slurm's default 30 s when unset)."""
    m = re.search(r"bf_interval=(\d+)", cluster.slurm_conf.read_text())
    return int(m.group(1)) if m else 30


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
        **settings.daemon_extra,
    }


def job_env() -> dict[str, str]:
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

    def argv(self, mode: str, args: Sequence[str]) -> list[str]:
        return [str(self.script), mode, str(self.payload), "--out", str(self.out), *args, *self.payload_options]


def write_job_files(workdir: Path, out: Path, payload_options: Sequence[str] = ()) -> JobFiles:
    """The batch script and a copy of the emulated job (standard library only) in ``workdir``: the jobs
    run this payload whichever checkout's launcher and daemon run them (`bench responsive --checkout`)."""
    from . import emulated_job

    script, payload = workdir / "job.sbatch", workdir / "emulated_job.py"
    script.write_text(BATCH_SCRIPT)
    payload.write_text(Path(emulated_job.__file__).read_text())
    for f in (script, payload):
        f.chmod(0o755)
    return JobFiles(script, payload, out, tuple(payload_options))


Submit = Callable[[Sequence[str], Sequence[str]], str]  # (payload arguments, submission options) -> job id


def sbatch_submitter(backend: SlurmBackend, files: JobFiles) -> Submit:
    """``submit(payload arguments, sbatch options)`` for plain Slurm."""
    def submit(args: Sequence[str], options: Sequence[str]) -> str:
        return str(backend.submit(files.argv(PLAIN, args), [*options, f"--chdir={files.out}"], env=job_env()))
    return submit


def tsbatch_submitter(backend: SlurmBackend, config: Path, files: JobFiles,
                      env: Callable[[], Mapping[str, str]] = job_env) -> Submit:
    """``submit(payload arguments, tsbatch options)`` through tsbatch's own code path; ``env``: what the
    job's environment gets over the caller's (another user's jobs run another Python)."""
    from ..site.load import load_config
    from ..tsbatch.submit import prepare, submit

    cfg = load_config(config, check_policy=False)

    def submit_one(args: Sequence[str], options: Sequence[str]) -> str:
        argv = ["--config", str(config), *options, f"--chdir={files.out}", *files.argv(DAEMON, args)]
        prepared, _ = prepare(argv, lambda _c: backend, lambda _p: cfg)
        prepared.env.update(env())
        return str(submit(prepared, backend))
    return submit_one


def submit_all(jobs: Sequence[J], submit: Callable[[J], str], clock: Callable[[], float] = time.time,
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


def wait_all_ended(backend: SlurmBackend, partition: str, ids: set[str], deadline: float,
                   alive: Callable[[], str] = lambda: "") -> dict[str, SlurmJob]:
    """Each job as Slurm last listed it, once every one has been listed finished. A finished job is
    kept as last seen: Slurm drops it from its listing ``MinJobAge`` (300 s) after it ends, sooner than
    a long run's last job ends."""
    seen: dict[str, SlurmJob] = {}
    while True:
        seen.update({str(j.job_id): j for j in backend.list_jobs(partition) if str(j.job_id) in ids})
        if len(seen) == len(ids) and all(j.state.is_finished for j in seen.values()):
            return seen
        problem = alive()
        if problem:
            raise RunError(problem)
        if time.time() > deadline:
            left = sorted(i for i in ids if i not in seen or not seen[i].state.is_finished)
            raise RunError(f"jobs {', '.join(left)} had not ended after the timeout")
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
            raise RunError(problem)
        if _read(db, "SELECT 1 FROM rounds WHERE finished_at IS NOT NULL AND started_at >= ? LIMIT 1", [after]):
            return
        time.sleep(0.5)
    raise RunError(f"the daemon finished no round within {timeout_s:g}s (see {daemon.log})")


def daemon_counts(db: Path, ids: set[str]) -> dict[str, tuple[int, int]]:
    """Slurm id -> (preemptions, migrations) from the daemon's state database."""
    from ..daemon.state.store import Store

    store = Store.open(db, read_only=True)
    try:
        return {r.job_id: (r.preemptions, r.migrations) for r in store.jobs_by_id(sorted(ids))}
    finally:
        store.close()


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


def cancel_all(backend: SlurmBackend, ids: Sequence[str]) -> None:
    """Cancel a run's jobs after it failed, so none outlives it; a job Slurm no longer knows is fine."""
    for jid in ids:
        try:
            backend.cancel(int(jid))
        except SlurmError:
            pass


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


@dataclass(frozen=True)
class RunOutcome:
    submitted: dict[str, tuple[str, float]]  # job name -> (Slurm id, submit time on the caller's clock)
    ended: dict[str, SlurmJob]  # Slurm id -> the job as Slurm last listed it
    counts: dict[str, tuple[int, int]]  # Slurm id -> (preemptions, migrations) under the daemon
    started_at: float  # when submissions began (under the daemon: after its first round)
    stops: dict[str, list[float]] = field(default_factory=dict)  # Slurm id -> each stop's seconds (stop_seconds)

    def events(self, out: Path, name: str) -> list[dict[str, Any]]:
        return read_events(out / f"events-{self.submitted[name][0]}.jsonl")


def run_jobs(mode: str, jobs: Sequence[J], cluster_env: Mapping[str, str], workdir: Path, settings: Settings,
             make_submit: Callable[[str, SlurmBackend, JobFiles, Path | None], Callable[[J], str]]) -> RunOutcome:
    """Run the job set once (``plain`` or ``daemon``) and wait for every job to end; the jobs' files
    go under ``workdir/jobs``. ``make_submit(mode, backend, job files, daemon config or None)`` gives
    the function that submits one job. On an error or Ctrl-C no job of the run is left on the
    cluster."""
    out = workdir / "jobs"
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    files = write_job_files(workdir, out, ("--checkpoint-s", f"{settings.checkpoint_s:g}"))
    backend = SlurmCliBackend(cluster_env)
    daemon: DaemonProcess | None = None
    counts: dict[str, tuple[int, int]] = {}
    stops: dict[str, list[float]] = {}
    submitted: dict[str, tuple[str, float]] = {}
    finished = False
    try:
        if mode == PLAIN:
            partition = settings.plain_partition
            submit = make_submit(PLAIN, backend, files, None)
        else:
            partition = settings.partition
            config = workdir / "tesserae.yaml"
            config.write_text(json.dumps(daemon_config(settings, workdir), indent=1) + "\n")  # JSON is YAML
            daemon = DaemonProcess(config, workdir / "daemon.log", cluster_env)
            wait_round(workdir / "state.db", daemon)  # its start (imports, compiled cores) not timed
            submit = make_submit(DAEMON, backend, files, config)
        started_at = time.time()
        submit_all(jobs, submit, into=submitted)
        ids = {jid for jid, _ in submitted.values()}
        alive = daemon.problem if daemon is not None else (lambda: "")
        ended = wait_all_ended(backend, partition, ids, time.time() + settings.timeout_s, alive)
        if daemon is not None:
            # one more whole round records the last ends (a round under load can outlast round_seconds)
            wait_round(workdir / "state.db", daemon, after=time.time(), timeout_s=settings.round_seconds + 120)
            counts = daemon_counts(workdir / "state.db", ids)
            stops = stop_seconds(workdir / "state.db", sorted(ids))
        finished = True
    finally:
        if daemon is not None:
            daemon.stop()
        if not finished:
            cancel_all(backend, [jid for jid, _ in submitted.values()])
    return RunOutcome(dict(submitted), ended, counts, started_at, stops)
