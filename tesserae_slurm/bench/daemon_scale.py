"""`tesserae bench daemon-scale`: the daemon's whole round at scale, phase by phase.

The decision engine alone is `bench scale`; this is everything around it: observe (squeue/sinfo JSON
parsed into a snapshot), reconcile (every job's row against Slurm), decide (inputs, ranking, the
engine, the plan), record (the decision in SQLite) and apply (the Slurm calls and their rows). The real
``Daemon`` runs each round on its own state database; per round it reports each phase's wall time, the
Slurm commands by verb, how many jobs changed and the commands per changed job, and the database's
growth; at the end, the median latency of `tesserae jobs` and of the web page's API at that size.

Two worlds under the same rounds:

- ``generated`` (``--nodes 1792 --jobs 20000``, Perlmutter's GPU partition): Slurm 22.05's output printed
  from an in-memory cluster (bench/generated_slurm.py) through the real CLI backend and parser; changing
  commands are counted, not executed, and the time spent printing (Slurm's) is taken out of each phase.
- a running Slurm (``DevCluster``, ``--nodes 64``): slurmd per node with emulated GPUs (gres on files, no
  devices), jobs submitted held by tsbatch's tag and sleeping; every call real (``run_devcluster``).

Between rounds the world moves: ``--churn`` of the running jobs end and as many new jobs arrive, so a
round has starts to make besides the first one.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..daemon.service.metrics import Phases
from ..model.meta import JobMeta
from .cli_latency import tesserae_argv
from .generated_slurm import GeneratedSlurm, GenJob
from .synthetic import synthetic_jobs

PHASES = ("observe", "reconcile", "decide", "record", "apply")
PAGE_PATHS = ("/", "/api/cluster", "/api/jobs", "/api/rounds")  # what the page loads, then polls


class SlurmTime(Phases):
    """The daemon's ``Phases`` with Slurm's own time taken out of each phase, so a phase is the daemon's work
    alone; ``busy()``: (wall, CPU) seconds spent in Slurm's commands so far. Beside the wall time, the process's
    CPU time per phase: on a shared machine the wall time also counts waiting for a core."""

    def __init__(self, busy: Callable[[], tuple[float, float]]) -> None:
        super().__init__()
        self.busy = busy
        self.slurm: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def reset(self) -> None:
        self.seconds, self.slurm, self.cpu = {}, {}, {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0, c0, (s0, sc0) = time.perf_counter(), time.process_time(), self.busy()
        try:
            yield
        finally:
            s1, sc1 = self.busy()
            self.slurm[name] = self.slurm.get(name, 0.0) + s1 - s0
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0 - (s1 - s0)
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c0 - (sc1 - sc0)


@dataclass(frozen=True)
class RoundSample:
    round_id: int
    status: str
    phases_ms: dict[str, float]  # the daemon's own wall time per phase (Slurm's taken out)
    cpu_ms: dict[str, float]  # the daemon's CPU time per phase
    slurm_ms: float  # time in Slurm's commands (generated: printing them; live: the clients' wall time)
    calls: dict[str, int]  # Slurm commands by verb this round
    writes: int  # changing commands (everything but listings)
    changed: int  # jobs the round started, stopped, moved or held
    db_bytes: int  # the state database (with its WAL) after the round

    @property
    def own_ms(self) -> float:
        return sum(self.phases_ms.values())


@dataclass
class ScaleReport:
    world: str
    nodes: int
    gpus_per_node: int
    jobs: int
    samples: list[RoundSample] = field(default_factory=list)
    cli_ms: list[float] = field(default_factory=list)  # `tesserae jobs`, whole processes
    page_ms: list[float] = field(default_factory=list)  # the page and its API calls, one load each
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def median_phase(self, name: str, skip_first: bool = True) -> float:
        rows = self.samples[1:] if skip_first and len(self.samples) > 1 else self.samples
        return statistics.median(s.phases_ms.get(name, 0.0) for s in rows)


def db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def perlmutter_jobs(n: int, first_id: int, seed: int, users: int = 200) -> list[GenJob]:
    """``n`` held tagged jobs in the Tesserae trace's mix of models and GPU counts (bench/synthetic.py)."""
    rng = np.random.default_rng(seed)
    out = []
    for k, job in enumerate(synthetic_jobs(n, rng)):
        comment = JobMeta(job.num_gpus, job.model, job.batch_size).encode()
        out.append(GenJob(first_id + k, f"u{int(rng.integers(users))}", comment, job.num_gpus, 1_700_000_000 + k))
    return out


def site_config(db: Path, partition: str = "tesserae", **slurm: Any) -> Any:
    """The daemon's configuration for a bench: tesserae-t, stops without a grace (a signal's grace is waiting
    on the payload, not the round's work), no HTTP or metrics listeners."""
    from ..site.config import parse_config
    return parse_config({
        "slurm": {"partition": partition, "backend": "cli", "guard_seconds": 0, "poll_seconds": 0, **slurm},
        "scheduler": {"policy": "tesserae-t", "round_seconds": 60},
        "preemption": {"grace_seconds": 0},
        "state": {"database": str(db)},
        "metrics": {"listen": ""}, "http": {"listen": ""},
    }, "bench daemon-scale")


def sample_round(daemon: Any, phases: SlurmTime, calls: Callable[[], Counter[str]], reads: frozenset[str],
                 db: Path) -> RoundSample:
    """Run one round and take its measures; ``calls``: Slurm's command counter so far, by verb."""
    before = Counter(calls())
    result = daemon.run_round()
    diff = calls() - before
    changed = {j for r in daemon.journal.store.slurm_calls(result.round_id) for j in r.job_ids.split(",") if j}
    return RoundSample(result.round_id, result.status, {p: phases.seconds.get(p, 0.0) * 1e3 for p in PHASES},
                       {p: phases.cpu.get(p, 0.0) * 1e3 for p in PHASES},
                       sum(phases.slurm.values()) * 1e3, dict(diff),
                       sum(n for verb, n in diff.items() if verb not in reads), len(changed), db_bytes(db))


def run_generated(tmp: Path, nodes: int, jobs: int, rounds: int, churn: float = 0.02, seed: int = 0,
                  progress: Callable[[str], None] | None = None) -> ScaleReport:
    """``rounds`` rounds of the real daemon over a generated 22.05 Slurm of ``nodes`` x 4 GPUs and ``jobs``
    tagged jobs; ``churn``: the share of running jobs that end between rounds (as many new ones arrive)."""
    from ..daemon.loop import Daemon
    from ..daemon.state.store import Store
    from ..slurm import SlurmCliBackend

    db = tmp / "state.db"
    slurm = GeneratedSlurm(nodes)
    for j in perlmutter_jobs(jobs, 1, seed):
        slurm.submit(j)
    cfg = site_config(db, parallel_starts=1)  # this Slurm answers in this process, one command at a time
    clock = [float(slurm.now)]
    backend = SlurmCliBackend(runner=slurm)  # type: ignore[arg-type]
    daemon = Daemon(cfg, backend, Store.open(db), clock=lambda: clock[0],
                    sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    phases = SlurmTime(lambda: (slurm.busy_s, slurm.busy_cpu_s))
    daemon.phases = phases
    daemon.start()
    report = ScaleReport("generated Slurm 22.05 output", nodes, slurm.gpus_per_node, jobs)
    reads = frozenset({"squeue --json", "squeue --jobs", "sinfo --json", "squeue poll", "sinfo --version"})
    rng = np.random.default_rng(seed + 1)
    next_id = jobs + 1
    for r in range(rounds):
        s = sample_round(daemon, phases, lambda: slurm.calls, reads, db)
        report.samples.append(s)
        if progress:
            progress(_line(s, r))
        running = [j.job_id for j in slurm.jobs.values() if j.state == "RUNNING"]
        ending: list[int] = [int(j) for j in rng.choice(running, size=int(len(running) * churn), replace=False)] \
            if running else []
        for jid in ending:
            slurm.finish(int(jid))
        for j in perlmutter_jobs(len(ending), next_id, seed + 2 + r):
            slurm.submit(j)
        next_id += len(ending)
        slurm.forget_finished(before=slurm.now)  # those the round just run saw ended
        slurm.now += 60
        clock[0] = float(slurm.now)
    daemon.journal.store.close()
    report.cli_ms = cli_latency(db)
    report.page_ms = page_latency(db)
    report.load = os.getloadavg()
    return report


def _line(s: RoundSample, r: int) -> str:
    phases = " ".join(f"{p} {s.phases_ms[p]:.0f}" for p in PHASES)
    return (f"round {r + 1} ({s.status}): {phases} ms; own {s.own_ms:.0f} ms (CPU {sum(s.cpu_ms.values()):.0f}), "
            f"Slurm {s.slurm_ms:.0f} ms; "
            f"{s.writes} changing calls for {s.changed} jobs; db {s.db_bytes / 2**20:.1f} MiB")


def cli_latency(db: Path, repeats: int = 5) -> list[float]:
    """Wall time of whole `tesserae jobs` processes against the database, ms; the first run warms caches."""
    argv = [*tesserae_argv(), "jobs", "--db", str(db)]
    out = []
    for k in range(repeats + 1):
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"tesserae jobs exited {p.returncode}: {p.stderr.strip()[-300:]}")
        if k:
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def page_latency(db: Path, repeats: int = 5) -> list[float]:
    """The page as a browser loads it (the HTML, then the API calls it makes), ms per load, through the daemon's
    web server on a free port."""
    from ..daemon.operators.web import serve
    server = serve(db, "127.0.0.1:0")
    port = server.server_address[1]
    out = []
    try:
        for k in range(repeats + 1):
            t0 = time.perf_counter()
            for path in PAGE_PATHS:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as resp:
                    resp.read()
            if k:
                out.append((time.perf_counter() - t0) * 1e3)
    finally:
        server.shutdown()
        server.server_close()
    return out


def exponent(small: ScaleReport, big: ScaleReport, name: str) -> float:
    """b in time ~ jobs^b between two sizes, for one phase (``own``: all of them)."""
    def t(r: ScaleReport) -> float:
        if name == "own":
            rows = r.samples[1:] if len(r.samples) > 1 else r.samples
            return statistics.median(s.own_ms for s in rows)
        return r.median_phase(name)
    a, b = t(small), t(big)
    if a <= 0 or b <= 0 or big.jobs == small.jobs:
        return float("nan")
    return float(np.log(b / a) / np.log(big.jobs / small.jobs))


def markdown(reports: Sequence[ScaleReport]) -> str:
    """Medians over the rounds after the first two (the first holds and starts a whole cluster, the second
    compiles what the first did not need: both shown apart). Wall ms, the process's CPU ms in brackets."""
    head = ["world", "nodes x GPUs", "jobs", "rounds", *PHASES, "own total", "Slurm", "changing calls",
            "changed jobs", "calls / changed job", "db growth / round", "`tesserae jobs`", "page"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in reports:
        parts = (("1", r.samples[:1]), ("2", r.samples[1:2]), (f"3-{len(r.samples)} (median)", r.samples[2:]))
        for label, rows in parts:
            if not rows:
                continue
            first = rows[0].round_id - r.samples[0].round_id
            before = r.samples[first - 1].db_bytes if first else 0
            growth = [s.db_bytes - b for s, b in zip(rows, [before, *(x.db_bytes for x in rows)])]
            writes, changed = sum(s.writes for s in rows), sum(s.changed for s in rows)
            cells = [r.world, f"{r.nodes:,} x {r.gpus_per_node}", f"{r.jobs:,}", label]
            cells += [f"{_med(s.phases_ms[p] for s in rows):,.0f} ({_med(s.cpu_ms[p] for s in rows):,.0f})"
                      for p in PHASES]
            cells += [f"{_med(s.own_ms for s in rows):,.0f} ({_med(sum(s.cpu_ms.values()) for s in rows):,.0f})",
                      f"{_med(s.slurm_ms for s in rows):,.0f}", f"{_med(s.writes for s in rows):g}",
                      f"{_med(s.changed for s in rows):g}", f"{writes / changed:.2f}" if changed else "-",
                      f"{_med(growth) / 1024:,.0f} KiB", f"{_med(r.cli_ms):,.0f}", f"{_med(r.page_ms):,.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _med(values: Iterable[float]) -> float:
    v = list(values)
    return statistics.median(v) if v else 0.0


def calls_table(reports: Sequence[ScaleReport]) -> str:
    lines = ["| world | jobs | round | Slurm commands by verb |", "|---|---|---|---|"]
    for r in reports:
        for s in r.samples:
            verbs = ", ".join(f"{v} {n}" for v, n in sorted(s.calls.items()))
            lines.append(f"| {r.world} | {r.jobs:,} | {s.round_id} | {verbs} |")
    return "\n".join(lines)


class TimedRunner:
    """A ``SlurmRunner`` that counts its commands by verb and the wall time spent in them (the daemon waiting
    on Slurm's clients). Starts run several commands at once: ``busy_s`` counts the time at least one was in
    flight, so that overlapping commands are not counted twice and a phase's own time stays its own."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.busy_s = 0.0
        self._lock = threading.Lock()
        self._running = 0
        self._since = 0.0  # when the commands in flight began to be

    def run(self, argv: Sequence[str], **kw: Any) -> str:
        words = [str(a) for a in argv]
        verb = words[0] + (" " + words[1] if words[0] == "scontrol" and len(words) > 1 else "")
        if words[0] in ("squeue", "sinfo"):
            kind = ("--json" if "--json" in words else "--version" if "--version" in words
                    else "--jobs" if any(w.startswith("--jobs=") for w in words) else "poll")
            verb = f"{words[0]} {kind}"
        with self._lock:
            self.calls[verb] += 1
            if not self._running:
                self._since = time.perf_counter()
            self._running += 1
        try:
            return str(self.inner.run(argv, **kw))
        finally:
            with self._lock:
                self._running -= 1
                if not self._running:
                    self.busy_s += time.perf_counter() - self._since


def submit_queue(backend: Any, partition: str, jobs: Sequence[GenJob], sleep_s: Callable[[int], int],
                 threads: int = 4) -> list[int]:
    """sbatch each job held, tagged as tsbatch tags it, its payload ``sleep``; returns Slurm's job ids in order."""
    from concurrent.futures import ThreadPoolExecutor

    def one(j: GenJob) -> int:
        return int(backend.submit([], ["-p", partition, "--hold", "-J", f"scale-{j.job_id}", "-o", "/dev/null",
                                       f"--comment={j.comment}", "--wrap", f"sleep {sleep_s(j.job_id)}"]))
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, jobs))


def run_devcluster(root: Path, nodes: int, jobs: int, rounds: int, pause_s: float = 5.0, seed: int = 0,
                   payload_s: tuple[int, int] = (60, 600), progress: Callable[[str], None] | None = None,
                   cluster: Any = None) -> tuple[ScaleReport, list[int]]:
    """``rounds`` rounds of the real daemon on a dev cluster of ``nodes`` x 4 emulated GPUs (slurmd per node,
    GPUs in gres.conf on files: no devices) with ``jobs`` held tagged jobs whose payload sleeps ``payload_s``
    seconds (uniform), ``pause_s`` between rounds. ``cluster``: a ``DevCluster`` already up, left up (a test
    then looks at it); else one is brought up under ``root`` and down at the end. Returns the report and the
    submitted Slurm job ids; the state database is ``root/state.db``."""
    from ..daemon.loop import Daemon
    from ..daemon.state.store import Store
    from ..devcluster import DevCluster
    from ..devcluster.install import ensure_slurm_installed
    from ..slurm import SlurmCliBackend, SlurmRunner

    own = cluster is None
    if own:
        ensure_slurm_installed()
        cluster = DevCluster(root / "cluster", nodes=nodes, gpus_per_node=4, start_timeout_s=max(60.0, nodes * 2.0))
        cluster.up()
    db = root / "state.db"
    try:
        runner = TimedRunner(SlurmRunner(cluster.env(), timeout_s=120.0))
        backend = SlurmCliBackend(runner=runner)  # type: ignore[arg-type]
        rng = np.random.default_rng(seed)
        lengths = {}
        queue = perlmutter_jobs(jobs, 1, seed)
        for j in queue:
            lengths[j.job_id] = int(rng.integers(payload_s[0], payload_s[1] + 1))
        if progress:
            progress(f"submitting {jobs} held jobs to {nodes} nodes")
        t0 = time.perf_counter()
        ids = submit_queue(backend, cluster.partition, queue, lambda k: lengths[k])
        if progress:
            progress(f"submitted in {time.perf_counter() - t0:.0f} s")
        cfg = site_config(db, command_timeout_s=120.0)
        daemon = Daemon(cfg, backend, Store.open(db))
        phases = SlurmTime(lambda: (runner.busy_s, 0.0))
        daemon.phases = phases
        daemon.start()
        major, minor = backend.slurm_version()
        report = ScaleReport(f"dev cluster, Slurm {major}.{minor:02d}", nodes, 4, jobs)
        reads = frozenset({"squeue --json", "squeue --jobs", "sinfo --json", "squeue poll", "sinfo --version"})
        for r in range(rounds):
            if r:
                time.sleep(pause_s)
            s = sample_round(daemon, phases, lambda: runner.calls, reads, db)
            report.samples.append(s)
            if progress:
                progress(_line(s, r))
        daemon.journal.store.close()
        report.cli_ms = cli_latency(db)
        report.page_ms = page_latency(db)
        report.load = os.getloadavg()
        return report, ids
    finally:
        if own:
            cluster.down()
