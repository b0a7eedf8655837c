"""Prometheus metrics on localhost: counters, gauges and histograms, and a stdlib HTTP server for /metrics.

No client library: the text exposition format is a handful of lines, and the daemon host should not
need another dependency for it. Names follow Prometheus's conventions (base units, ``_seconds``,
``_total`` for counters); the families are listed in docs/daemon.md ("Metrics").

The job gauges describe the jobs that are active now; ended jobs are counted as they end (a counter,
from the daemon's start, as Prometheus expects), never as a gauge of every job ever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)


ACTIVE_STATES = ("PENDING", "STARTING", "RUNNING", "PREEMPTING")  # every other state is an end
HOLDING_STATES = ("STARTING", "RUNNING", "PREEMPTING")  # the job holds GPUs (a preempting one until it stops)
# Bucket bounds in seconds: waits from seconds to days, runs from a minute to a week.
WAIT_BUCKETS = (10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0, 259200.0)
RUN_BUCKETS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 259200.0, 604800.0)


@dataclass(frozen=True)
class JobSample:
    """What the metrics read of one job row (a copy: the HTTP thread never touches the database)."""

    job_id: str
    state: str
    user: str
    num_gpus: int
    gpus: tuple[tuple[str, int], ...]  # (node, GPU index) of each GPU it holds
    submit_time: float
    first_start: float | None
    executed_time: float


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, the last one +Inf
    total: float = 0.0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        i = next((k for k, b in enumerate(self.bounds) if value <= b), len(self.bounds))
        self.counts[i] += 1
        self.total += value

    def samples(self) -> list[tuple[str, float]]:
        """Cumulative buckets, then _sum and _count (the exposition format's order)."""
        counts = self.counts or [0] * (len(self.bounds) + 1)
        out, running = [], 0
        for b, n in zip([*(f"{b:g}" for b in self.bounds), "+Inf"], counts):
            running += n
            out.append((f'_bucket{{le="{b}"}}', float(running)))
        return [*out, ("_sum", self.total), ("_count", float(running))]


def _label(value: str) -> str:
    """A label value as the exposition format writes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Metrics:
    """Mutable counters the loop updates; ``render`` is called from the HTTP thread under the lock."""

    rounds: dict[str, int] = field(default_factory=dict)  # by status
    start_passes: dict[str, int] = field(default_factory=dict)  # starts between rounds, by status
    decision_seconds_sum: float = 0.0
    decision_seconds_count: int = 0
    decision_seconds_last: float = 0.0
    jobs: dict[str, int] = field(default_factory=dict)  # active jobs by state, as of the last round
    packed_pairs: int = 0
    jobs_ended: dict[str, int] = field(default_factory=dict)  # jobs that ended since the daemon started, by state
    pending: dict[str, int] = field(default_factory=dict)  # pending jobs by reason
    gpus_total: int = 0
    gpus_busy: int = 0
    gpus_packed: int = 0
    user_gpus: dict[str, int] = field(default_factory=dict)
    account_gpus: dict[str, int] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)  # job -> Slurm account, from the last look
    wait: Histogram = field(default_factory=lambda: Histogram(WAIT_BUCKETS))
    run: Histogram = field(default_factory=lambda: Histogram(RUN_BUCKETS))
    _active: dict[str, JobSample] | None = field(default=None, repr=False)  # None until the first round
    actions: dict[str, int] = field(default_factory=dict)  # by kind
    slurm_calls: Mapping[str, int] = field(default_factory=dict)  # by method (the RecordingBackend's counters)
    slurm_errors: Mapping[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def round_done(self, status: str, decision_s: float | None) -> None:
        with self.lock:
            self.rounds[status] = self.rounds.get(status, 0) + 1
            if decision_s is not None:
                self.decision_seconds_sum += decision_s
                self.decision_seconds_count += 1
                self.decision_seconds_last = decision_s

    def start_pass_done(self, status: str) -> None:
        with self.lock:
            self.start_passes[status] = self.start_passes.get(status, 0) + 1

    def saw(self, gpus_total: int, accounts: Mapping[str, str]) -> None:
        """What the round's look at Slurm showed: the partition's GPUs and each job's account."""
        with self.lock:
            self.gpus_total = gpus_total
            self.accounts = dict(accounts)

    def watched(self) -> set[str]:
        """The jobs active at the last update: those not active now have ended (``update``'s ``ended``)."""
        with self.lock:
            return set(self._active or ())

    def update(self, active: Sequence[JobSample], ended: Iterable[JobSample], pending_reasons: Mapping[str, str],
               packed_pairs: int) -> None:
        """The jobs as the round left them: ``active`` (every job in an active state), ``ended`` (the rows
        of watched jobs that are no longer active) and why each pending job waits. The first update
        only learns the jobs (a job that started or ended before the daemon did is not counted)."""
        with self.lock:
            prev = self._active
            if prev is not None:
                for e in ended:
                    if e.job_id in prev:
                        self.jobs_ended[e.state] = self.jobs_ended.get(e.state, 0) + 1
                        self.run.observe(e.executed_time)
                        self._started(prev[e.job_id], e)
                for a in active:
                    self._started(prev.get(a.job_id), a)
            self._active = {a.job_id: a for a in active}
            self.jobs = {st: sum(a.state == st for a in active) for st in ACTIVE_STATES}
            self.packed_pairs = packed_pairs
            self.pending = {}
            for a in active:
                if a.state == "PENDING":
                    why = pending_reasons.get(a.job_id, "Other")
                    self.pending[why] = self.pending.get(why, 0) + 1
            holders: dict[tuple[str, int], int] = {}
            self.user_gpus, self.account_gpus = {}, {}
            for a in active:
                if a.state not in HOLDING_STATES:
                    continue
                for slot in a.gpus:
                    holders[slot] = holders.get(slot, 0) + 1
                self.user_gpus[a.user] = self.user_gpus.get(a.user, 0) + a.num_gpus
                account = self.accounts.get(a.job_id, "")
                self.account_gpus[account] = self.account_gpus.get(account, 0) + a.num_gpus
            self.gpus_busy = len(holders)
            self.gpus_packed = sum(1 for n in holders.values() if n > 1)

    def _started(self, before: JobSample | None, now: JobSample) -> None:
        """The wait of a job seen waiting (or new since the last update) that has started since."""
        if now.first_start is not None and (before is None or before.first_start is None):
            self.wait.observe(max(0.0, now.first_start - now.submit_time))

    def action(self, kind: str) -> None:
        with self.lock:
            self.actions[kind] = self.actions.get(kind, 0) + 1

    def render(self) -> str:
        with self.lock:
            lines: list[str] = []

            def family(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
                lines.append(f"# HELP {name} {help_}")
                lines.append(f"# TYPE {name} {kind}")
                lines.extend(f"{name}{labels} {_number(value)}" for labels, value in samples)

            family("tesserae_rounds_total", "counter", "Scheduling rounds by outcome.",
                   [(f'{{status="{s}"}}', n) for s, n in sorted(self.rounds.items())] or [('{status="applied"}', 0)])
            family("tesserae_start_passes_total", "counter", "Starts between rounds (jobs started on free GPUs), "
                   "by outcome.", [(f'{{status="{s}"}}', n) for s, n in sorted(self.start_passes.items())]
                   or [('{status="applied"}', 0)])
            # a summary's samples carry their suffix in the name: tesserae_decision_seconds_sum ...
            family("tesserae_decision_seconds", "summary", "Time to rank and decide one round.",
                   [("_sum", self.decision_seconds_sum), ("_count", self.decision_seconds_count)])
            family("tesserae_last_decision_seconds", "gauge", "Decision time of the last round.",
                   [("", self.decision_seconds_last)])
            family("tesserae_jobs", "gauge", "Managed jobs in an active state, as of the last round.",
                   [(f'{{state="{st}"}}', n) for st, n in sorted(self.jobs.items())])
            family("tesserae_jobs_ended_total", "counter", "Managed jobs that ended since the daemon started, by "
                   "final state.", [(f'{{state="{st}"}}', n) for st, n in sorted(self.jobs_ended.items())])
            family("tesserae_jobs_pending", "gauge", "Pending jobs by reason (the round's: Priority, Resources, "
                   "...; Other: not ranked, e.g. held or invalid metadata).",
                   [(f'{{reason="{_label(r)}"}}', n) for r, n in sorted(self.pending.items())])
            family("tesserae_packed_pairs", "gauge", "Packed pairs in the current placement.",
                   [("", self.packed_pairs)])
            family("tesserae_gpus", "gauge", "GPUs of the managed partition's nodes, as of the last round.",
                   [("", self.gpus_total)])
            family("tesserae_gpus_busy", "gauge", "GPUs that at least one managed job holds.", [("", self.gpus_busy)])
            family("tesserae_gpus_packed", "gauge", "GPUs that two managed jobs share (packing).",
                   [("", self.gpus_packed)])
            family("tesserae_user_gpus", "gauge", "GPUs held by each user's running jobs (a packed GPU counts "
                   "for both users).", [(f'{{user="{_label(u)}"}}', n) for u, n in sorted(self.user_gpus.items())])
            family("tesserae_account_gpus", "gauge", "GPUs held by each Slurm account's running jobs.",
                   [(f'{{account="{_label(a)}"}}', n) for a, n in sorted(self.account_gpus.items())])
            family("tesserae_job_wait_seconds", "histogram", "Time from submission to a job's first start.",
                   self.wait.samples())
            family("tesserae_job_run_seconds", "histogram", "Run time of ended jobs, every run together.",
                   self.run.samples())
            family("tesserae_actions_total", "counter", "Actions applied through Slurm by kind.",
                   [(f'{{kind="{k}"}}', n) for k, n in sorted(self.actions.items())])
            family("tesserae_migrations_total", "counter", "Jobs moved to other GPUs (migrations).",
                   [("", self.actions.get("migrate", 0))])
            family("tesserae_preemptions_total", "counter", "Jobs preempted (not counting migrations).",
                   [("", self.actions.get("preempt", 0))])
            family("tesserae_slurm_calls_total", "counter", "Slurm calls by method.",
                   [(f'{{method="{m}"}}', n) for m, n in sorted(self.slurm_calls.items())])
            family("tesserae_slurm_call_errors_total", "counter", "Failed Slurm calls by method.",
                   [(f'{{method="{m}"}}', n) for m, n in sorted(self.slurm_errors.items())]
                   or [('{method="any"}', 0)])
            return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    """A sample value without rounding (``:g`` would keep 6 digits of a large sum)."""
    v = float(value)
    return str(int(v)) if v.is_integer() else repr(v)
class Phases:
    """Wall time of each phase of the last round (observe, reconcile, decide, record, apply): where a round's
    time goes at scale (``tesserae bench daemon-scale``)."""

    NAMES = ("observe", "reconcile", "decide", "record", "apply")

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def reset(self) -> None:
        self.seconds = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics here")
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug("metrics: " + fmt, *args)

    return Handler


def start_http(listen: str, handler: type[BaseHTTPRequestHandler], name: str) -> ThreadingHTTPServer:
    """Serve ``handler`` on HOST:PORT (port 0 picks a free one) in a daemon thread named ``name``."""
    host, _, port = listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def serve(metrics: Metrics, listen: str) -> ThreadingHTTPServer:
    """Start /metrics on HOST:PORT (port 0 picks a free one) in a daemon thread."""
    server = start_http(listen, _handler(metrics), "metrics")
    log.info("metrics on http://%s:%d/metrics", *server.server_address[:2])
    return server
