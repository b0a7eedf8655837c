"""Running one job set on the dev cluster, under plain Slurm or under `tesserae daemon`, and waiting for it.

Shared by `tesserae devcluster compare` (toy jobs on fake GPUs) and `tesserae devcluster replay` (a
trace in scaled time on emulated GPUs): both submit every job at its offset, either with sbatch to a
partition the daemon does not manage (Slurm's own priority and backfill) or through tsbatch's own code
path to the managed partition while a daemon runs rounds; both then wait for every job to end and read
what happened from Slurm, the jobs' event files and the daemon's state database. Every job runs the
emulated GPU job (``emulated_job.py``) through ``BATCH_SCRIPT``.
"""

from __future__ import annotations

import json
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

from ..model import InputError
from ..slurm import SlurmBackend, SlurmCliBackend, SlurmError, SlurmJob
from .cluster import DevCluster
from .errors import DevClusterError
from .install import ensure_slurm_installed

PLAIN, DAEMON = "plain", "daemon"
MODES = (PLAIN, DAEMON)

# The batch script of every job, written into the run directory: MODE, then the emulated job's
# arguments. Lines 2-3 trap the checkpoint signal and TERM before anything else runs (as jobscripts/
# do: docs/daemon.md "Job side").
BATCH_SCRIPT = r"""#!/bin/bash
trap 'echo USR1 >>"${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"' USR1
trap 'echo TERM >>"${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"' TERM
# One emulated GPU job of `tesserae devcluster compare|replay`: job.sbatch MODE EMULATED-JOB-ARGS...
# plain: submitted with sbatch, runs the payload directly on the GPUs Slurm gave it.
# daemon: submitted with tsbatch; `tesserae launch` pins the daemon's GPUs and forwards the checkpoint signal.
mode=$1; shift
py=${TESSERAE_PYTHON:-python3}
if [ "$mode" = plain ]; then
    exec "$py" -m tesserae_slurm.devcluster.emulated_job "$@"
fi
export TESSERAE_SIGNAL_FILE="${TMPDIR:-/tmp}/tesserae-signals.${SLURM_JOB_ID:-0}.${SLURM_RESTART_COUNT:-0}.$$"
( trap '' USR1 TERM; exec "$py" -m tesserae_slurm.harness launch -- \
    "$py" -m tesserae_slurm.devcluster.emulated_job --managed "$@" ) &
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
        "preemption": {"grace_seconds": settings.grace_seconds},
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


Submit = Callable[[Sequence[str], Sequence[str]], str]  # (batch script arguments, submission options) -> job id


def sbatch_submitter(backend: SlurmBackend, script: Path) -> Submit:
    """``submit(script arguments, sbatch options)`` for plain Slurm."""
    def submit(args: Sequence[str], options: Sequence[str]) -> str:
        return str(backend.submit([str(script), PLAIN, *args], list(options), env=job_env()))
    return submit


def tsbatch_submitter(backend: SlurmBackend, config: Path, script: Path) -> Submit:
    """``submit(script arguments, tsbatch options)`` through tsbatch's own code path."""
    from ..site.load import load_config
    from ..tsbatch.submit import prepare, submit

    cfg = load_config(config, check_policy=False)

    def submit_one(args: Sequence[str], options: Sequence[str]) -> str:
        argv = ["--config", str(config), *options, str(script), DAEMON, *args]
        prepared, _ = prepare(argv, lambda _c: backend, lambda _p: cfg)
        prepared.env.update(job_env())
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
    while True:
        seen = {str(j.job_id): j for j in backend.list_jobs(partition) if str(j.job_id) in ids}
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
        with log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tesserae_slurm.cli.main", "daemon", "--config", str(config)],
                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **env},
                start_new_session=True)

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


def wait_round(db: Path, daemon: DaemonProcess, *, after: float = 0.0, timeout_s: float = 120.0) -> None:
    """Wait until the daemon has finished a round that began at or after ``after`` (its first, by default)."""
    from ..daemon.state.store import Store

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        problem = daemon.problem()
        if problem:
            raise RunError(problem)
        if db.exists():
            try:
                store = Store.open(db, read_only=True)
            except InputError:  # the daemon has created the file but not its schema yet
                store = None
            if store is not None:
                try:
                    if any(r.finished_at is not None and r.started_at >= after for r in store.rounds(limit=2)):
                        return
                finally:
                    store.close()
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

    def events(self, out: Path, name: str) -> list[dict[str, Any]]:
        return read_events(out / f"events-{self.submitted[name][0]}.jsonl")


def run_jobs(mode: str, jobs: Sequence[J], cluster_env: Mapping[str, str], workdir: Path, settings: Settings,
             make_submit: Callable[[str, SlurmBackend, Path, Path | None], Callable[[J], str]]) -> RunOutcome:
    """Run the job set once (``plain`` or ``daemon``) and wait for every job to end; the jobs' files
    go under ``workdir/jobs``. ``make_submit(mode, backend, batch script, daemon config or None)``
    gives the function that submits one job. On an error or Ctrl-C no job of the run is left on the
    cluster."""
    out = workdir / "jobs"
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    script = workdir / "job.sbatch"
    script.write_text(BATCH_SCRIPT)
    script.chmod(0o755)
    backend = SlurmCliBackend(cluster_env)
    daemon: DaemonProcess | None = None
    counts: dict[str, tuple[int, int]] = {}
    submitted: dict[str, tuple[str, float]] = {}
    finished = False
    try:
        if mode == PLAIN:
            partition = settings.plain_partition
            submit = make_submit(PLAIN, backend, script, None)
        else:
            partition = settings.partition
            config = workdir / "tesserae.yaml"
            config.write_text(json.dumps(daemon_config(settings, workdir), indent=1) + "\n")  # JSON is YAML
            daemon = DaemonProcess(config, workdir / "daemon.log", cluster_env)
            wait_round(workdir / "state.db", daemon)  # its start (imports, compiled cores) not timed
            submit = make_submit(DAEMON, backend, script, config)
        started_at = time.time()
        submit_all(jobs, submit, into=submitted)
        ids = {jid for jid, _ in submitted.values()}
        alive = daemon.problem if daemon is not None else (lambda: "")
        ended = wait_all_ended(backend, partition, ids, time.time() + settings.timeout_s, alive)
        if daemon is not None:
            # one more whole round records the last ends (a round under load can outlast round_seconds)
            wait_round(workdir / "state.db", daemon, after=time.time(), timeout_s=settings.round_seconds + 120)
            counts = daemon_counts(workdir / "state.db", ids)
        finished = True
    finally:
        if daemon is not None:
            daemon.stop()
        if not finished:
            for jid, _ in submitted.values():
                try:
                    backend.cancel(int(jid))
                except SlurmError:
                    pass
    return RunOutcome(dict(submitted), ended, counts, started_at)
