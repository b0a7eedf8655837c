"""`tesserae bench responsive`: how fast the daemon reacts on the dev cluster, as medians.

The two latencies a user and an admin see first (docs/daemon.md, "Between rounds"):

- **submit -> start**: a 1-GPU job submitted to an idle cluster, from just before its submission to its
  payload's first event; under the daemon with its configured rounds (default 360 s, the shipped
  ``etc/tesserae.yaml``), and under plain Slurm (sbatch to the partition the daemon does not manage)
  for reference. Each job runs one step and ends before the next is submitted.
- **signal -> GPUs free**: an operator's `tesserae requeue` stops a running job whose payload takes
  ``--checkpoint-seconds`` to checkpoint; from the daemon's checkpoint signal (its ``signal`` call in
  the state database) to the end of the stop it records (Slurm lists the job pending: its GPUs are free).

It also measures what the daemon's poll between rounds costs slurmctld, against the round's own
listing (``sdiag``'s REQUEST_JOB_INFO count and time, and the client's wall time per call), with
``--queue`` held jobs in the partition. ``--checkout DIR`` runs the daemon and the job launcher from
another source tree (a ``git worktree`` of an older commit, put on PYTHONPATH): before/after. The jobs'
payload is this checkout's emulated GPU job (``devcluster/emulated_job.py``, at speed 1.0), copied beside
them, in both.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..devcluster.cluster import DevCluster
from ..devcluster.compare import DemoJob, submit_plain, submit_tsbatch
from ..devcluster.runs import (
    DaemonProcess,
    Settings,
    daemon_config,
    read_events,
    stop_seconds,
    wait_round,
    write_job_files,
)
from ..slurm import SlurmCliBackend

PARTS = ("plain", "start", "stop", "poll")
POLL_ARGV = ["squeue", "-h", "-p", "{partition}", "-o", "%i %t"]  # as slurm/commands.squeue_poll
ROUND_ARGV = ["squeue", "--json", "--states=all"]  # as slurm/commands.squeue_json
# Slurm 24.05 and later: a lighter RPC (REQUEST_JOB_STATE), but of every job: it cannot filter by partition
ONLY_STATE_ARGV = ["squeue", "-h", "--only-job-state", "-o", "%i %t"]
QUEUED_COMMENT = '--comment=tesserae:v1:{"g":1,"nprof":true}'  # tsbatch's tag: job_submit.lua admits it


class BenchError(RuntimeError):
    """One line: what did not happen, and where to look."""


@dataclass(frozen=True)
class Latencies:
    what: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")


@dataclass(frozen=True)
class PollCost:
    """One listing, run ``calls`` times: slurmctld's time per call (sdiag, microseconds) and the client's."""

    argv: tuple[str, ...]
    queued_jobs: int
    calls: int
    rpcs: int  # REQUEST_JOB_INFO / REQUEST_JOB_STATE counted by sdiag over those calls
    server_us_per_call: float
    client_ms_median: float


@dataclass
class Result:
    checkout: str
    round_seconds: float
    grace_seconds: float
    checkpoint_seconds: float
    features: dict[str, bool] = field(default_factory=dict)  # which config keys the checkout knows
    latencies: list[Latencies] = field(default_factory=list)
    poll: list[PollCost] = field(default_factory=list)


def checkout_features(python: str, env: dict[str, str], cwd: Path) -> dict[str, bool]:
    """Which of the responsiveness settings the daemon under test knows (an older checkout rejects
    unknown keys, so they are written only where known)."""
    probe = ("import dataclasses, json; from tesserae_slurm.site import config as c; "
             "print(json.dumps({'poll_seconds': 'poll_seconds' in {f.name for f in dataclasses.fields(c.SlurmSection)},"
             " 'stop_records_dir': 'stop_records_dir' in {f.name for f in dataclasses.fields(c.PreemptionSection)}}))")
    out = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True, timeout=60, check=True,
                         cwd=cwd)  # not this checkout's directory: `-c` looks in the working directory first
    return {str(k): bool(v) for k, v in json.loads(out.stdout).items()}


def bench_config(settings: Settings, workdir: Path, features: dict[str, bool], poll_seconds: float) -> dict[str, Any]:
    """compare's daemon configuration, without the settings the code under test does not know."""
    cfg = daemon_config(settings, workdir)
    cfg["slurm"]["poll_seconds"] = poll_seconds
    for section, key in (("slurm", "poll_seconds"), ("preemption", "stop_records_dir")):
        if not features.get(key):
            cfg[section].pop(key, None)
    return cfg


def _job(name: str, steps: int) -> DemoJob:
    return DemoJob(name, 1, "DCGAN", 32, duration_s=steps * 0.5, arrival_s=0.0, time_limit_min=60)


def _first_event(out: Path, job: str, event: str, timeout_s: float, after: float = 0.0) -> float:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        times = [float(e["time"]) for e in read_events(out / f"events-{job}.jsonl")
                 if e.get("event") == event and float(e["time"]) >= after]
        if times:
            return min(times)
        time.sleep(0.05)
    raise BenchError(f"job {job}: no {event!r} event within {timeout_s:g}s (see {out / (job + '.out')})")


def _wait_ended(backend: SlurmCliBackend, job: str, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        seen = {str(j.job_id): j for j in backend.list_jobs()}
        if job not in seen or seen[job].state.is_finished:
            return
        time.sleep(0.3)
    raise BenchError(f"job {job} had not ended after {timeout_s:g}s")


def submit_to_start(submit: Callable[[DemoJob], str], backend: SlurmCliBackend, out: Path, repeats: int,
                    timeout_s: float, label: str, progress: Callable[[str], None]) -> Latencies:
    """One short job at a time on an idle cluster: submit, wait for its payload's start, wait for its end."""
    samples = []
    for i in range(repeats):
        t0 = time.time()
        job = submit(_job(f"resp{i:02d}", steps=1))
        started = _first_event(out, job, "start", timeout_s)
        samples.append(started - t0)
        progress(f"{label}: job {job} started {started - t0:.2f}s after its submission")
        _wait_ended(backend, job, 120)
    return Latencies(f"{label}: submit -> start (s)", tuple(samples))


def _stop_time(db: Path, job: str, after: float) -> float | None:
    """Seconds from the daemon's checkpoint signal to ``job`` to the end of the requeue it recorded, once
    both are on record (the round records its Slurm calls when it ends)."""
    got = stop_seconds(db, [job], after).get(job)
    return got[0] if got else None


def signal_to_free(submit: Callable[[DemoJob], str], backend: SlurmCliBackend, out: Path, db: Path,
                   request: Callable[[str], None], repeats: int, timeout_s: float,
                   progress: Callable[[str], None]) -> Latencies:
    """A long job runs; an operator requeues it; the stop is timed from the daemon's own records."""
    samples = []
    for i in range(repeats):
        job = submit(_job(f"stop{i:02d}", steps=100_000))
        started = _first_event(out, job, "start", timeout_s)
        time.sleep(1.0)  # past the launcher's start: the payload listens for the signal
        asked = time.time()
        request(job)
        deadline = time.time() + timeout_s
        got = None
        while got is None and time.time() < deadline:
            got = _stop_time(db, job, asked)
            time.sleep(0.2)
        if got is None:
            raise BenchError(f"job {job} (started at {started:.1f}) was not requeued within {timeout_s:g}s ({db})")
        samples.append(got)
        progress(f"stop: job {job}: signal -> GPUs free {got:.2f}s")
        backend.cancel(int(job))
        _wait_ended(backend, job, 120)
    return Latencies("signal -> GPUs free (s)", tuple(samples))


_SDIAG = re.compile(r"^\s*REQUEST_JOB_(?:INFO|STATE)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:(\d+)\s+"
                    r"total_time:(\d+)", re.M)


def _job_info_rpcs(env: dict[str, str]) -> tuple[int, int]:
    """(count, total microseconds) of the job listing RPCs (REQUEST_JOB_INFO, REQUEST_JOB_STATE) since the
    last ``sdiag -r``."""
    out = subprocess.run(["sdiag"], env=env, capture_output=True, text=True, timeout=30, check=True).stdout
    found = [(int(m.group(1)), int(m.group(3))) for m in _SDIAG.finditer(out)]
    return sum(c for c, _ in found), sum(t for _, t in found)


def _knows(env: dict[str, str], option: str) -> bool:
    out = subprocess.run(["squeue", "--help"], env=env, capture_output=True, text=True, timeout=30, check=False)
    return option in out.stdout


def poll_cost(env: dict[str, str], argv: Sequence[str], calls: int, queued: int) -> PollCost:
    subprocess.run(["sdiag", "-r"], env=env, capture_output=True, timeout=30, check=True)
    before = _job_info_rpcs(env)
    wall = []
    for _ in range(calls):
        t0 = time.perf_counter()
        subprocess.run(list(argv), env=env, capture_output=True, timeout=30, check=True)
        wall.append((time.perf_counter() - t0) * 1e3)
    after = _job_info_rpcs(env)
    rpcs, us = after[0] - before[0], after[1] - before[1]
    return PollCost(tuple(argv), queued, calls, rpcs, us / calls, statistics.median(wall))


def run(cluster: DevCluster, work: Path, parts: Sequence[str], repeats: int, round_seconds: float,
        grace_seconds: float, checkpoint_seconds: float, checkout: str | None, queue: Sequence[int],
        poll_calls: int, progress: Callable[[str], None]) -> Result:
    env = {**os.environ, **cluster.env()}
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(checkout).resolve()), env.get("PYTHONPATH", "")) if p)
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the jobs' launcher (runs.job_env) runs that code too
    features = checkout_features(sys.executable, env, work)
    result = Result(checkout or "", round_seconds, grace_seconds, checkpoint_seconds, features)
    backend = SlurmCliBackend(cluster.env())
    timeout = round_seconds + 120
    payload = ("--checkpoint-s", f"{checkpoint_seconds:g}")
    if "plain" in parts:
        d = _fresh(work / "plain")
        files = write_job_files(d, d / "jobs", payload)
        result.latencies.append(submit_to_start(submit_plain(backend, cluster.plain_partition or "plain", files),
                                                backend, files.out, repeats, 120, "plain Slurm", progress))
    for part, rounds in (("start", round_seconds), ("stop", 2.0)):
        if part not in parts:
            continue
        d = _fresh(work / part)
        files = write_job_files(d, d / "jobs", payload)
        settings = Settings(partition=cluster.partition, policy="fifo", round_seconds=rounds,
                            grace_seconds=grace_seconds)
        config = d / "tesserae.yaml"
        config.write_text(json.dumps(bench_config(settings, d, features, 1.0), indent=1) + "\n")
        daemon = DaemonProcess(config, d / "daemon.log", env)
        try:
            wait_round(d / "state.db", daemon)
            submit = submit_tsbatch(backend, config, files)
            if part == "start":
                result.latencies.append(submit_to_start(submit, backend, files.out, repeats, timeout,
                                                        f"daemon, {rounds:g} s rounds", progress))
            else:
                result.latencies.append(signal_to_free(submit, backend, files.out, d / "state.db",
                                                       _requester(config), repeats, grace_seconds + 120, progress))
        finally:
            daemon.stop()
    if "poll" in parts:
        held: list[int] = []
        try:
            d = _fresh(work / "poll")
            for n in queue:
                while len(held) < n:
                    held.append(backend.submit("#!/bin/sh\ntrue\n", ["-p", cluster.partition, "--hold", "-J", "q",
                                                                       "-o", "/dev/null", QUEUED_COMMENT]))
                listings = [[a.format(partition=cluster.partition) for a in POLL_ARGV], ROUND_ARGV]
                if _knows(env, "--only-job-state"):
                    listings.append(ONLY_STATE_ARGV)
                for argv in listings:
                    result.poll.append(poll_cost(env, argv, poll_calls, n))
                    progress(f"poll: {' '.join(argv)} with {n} queued jobs: "
                             f"{result.poll[-1].server_us_per_call:.0f} us in slurmctld per call")
        finally:
            for j in held:
                backend.cancel(j)
    return result


def _requester(config: Path) -> Callable[[str], None]:
    """`tesserae requeue JOB` as the operator this process is (the request file the daemon takes in)."""
    from ..daemon.operators import admin
    from ..site.load import load_config

    cfg = load_config(config, check_policy=False)

    def request(job: str) -> None:
        admin.submit(cfg, "requeue", job)
    return request


def _fresh(d: Path) -> Path:
    import shutil

    shutil.rmtree(d, ignore_errors=True)  # a stale checkpoint of a reused job id would resume
    (d / "jobs").mkdir(parents=True)
    for p in (d, d / "jobs"):
        p.chmod(0o755)
    return d


def as_json(r: Result) -> dict[str, Any]:
    out = asdict(r)
    for lat, entry in zip(r.latencies, out["latencies"], strict=True):
        entry["median"] = lat.median
    return out


def report(r: Result) -> str:
    code = f"code from {r.checkout}" if r.checkout else "this checkout"
    lines = [f"responsiveness on the dev cluster ({code}; rounds {r.round_seconds:g} s, grace {r.grace_seconds:g} s, "
             f"checkpoint {r.checkpoint_seconds:g} s; settings known: "
             + ", ".join(k for k, v in r.features.items() if v) + ")" if any(r.features.values()) else
             f"responsiveness on the dev cluster ({code}; rounds {r.round_seconds:g} s, grace {r.grace_seconds:g} s, "
             f"checkpoint {r.checkpoint_seconds:g} s; no between-round starts or early stops in that code)"]
    lines += ["", "| measure | median | min | max | samples |", "|---|---|---|---|---|"]
    for lat in r.latencies:
        s = lat.samples
        lines.append(f"| {lat.what} | {lat.median:.2f} | {min(s):.2f} | {max(s):.2f} | {len(s)} |" if s else
                     f"| {lat.what} | - | - | - | 0 |")
    if r.poll:
        lines += ["", "| listing | queued jobs | calls | slurmctld us per call | client ms (median) |",
                  "|---|---|---|---|---|"]
        for p in r.poll:
            lines.append(f"| `{' '.join(p.argv)}` | {p.queued_jobs} | {p.calls} | {p.server_us_per_call:.0f} | "
                         f"{p.client_ms_median:.1f} |")
    return "\n".join(lines)
