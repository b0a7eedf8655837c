"""Prometheus metrics on localhost: a few counters and gauges and a stdlib HTTP server for /metrics.

No client library: the text exposition format is a handful of lines, and the daemon host should not
need another dependency for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)


@dataclass
class Metrics:
    """Mutable counters the loop updates; ``render`` is called from the HTTP thread under the lock."""

    rounds: dict[str, int] = field(default_factory=dict)  # by status
    start_passes: dict[str, int] = field(default_factory=dict)  # starts between rounds, by status
    decision_seconds_sum: float = 0.0
    decision_seconds_count: int = 0
    decision_seconds_last: float = 0.0
    jobs: dict[str, int] = field(default_factory=dict)  # by state, from the last round
    packed_pairs: int = 0
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

    def set_jobs(self, by_state: Mapping[str, int], packed_pairs: int) -> None:
        with self.lock:
            self.jobs = dict(by_state)
            self.packed_pairs = packed_pairs

    def action(self, kind: str) -> None:
        with self.lock:
            self.actions[kind] = self.actions.get(kind, 0) + 1

    def render(self) -> str:
        with self.lock:
            lines: list[str] = []

            def family(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
                lines.append(f"# HELP {name} {help_}")
                lines.append(f"# TYPE {name} {kind}")
                lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

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
            family("tesserae_jobs", "gauge", "Managed jobs by state, as of the last round.",
                   [(f'{{state="{s}"}}', n) for s, n in sorted(self.jobs.items())])
            family("tesserae_packed_pairs", "gauge", "Packed pairs in the current placement.",
                   [("", self.packed_pairs)])
            family("tesserae_actions_total", "counter", "Actions applied through Slurm by kind.",
                   [(f'{{kind="{k}"}}', n) for k, n in sorted(self.actions.items())])
            family("tesserae_migrations_total", "counter", "Jobs migrated.", [("", self.actions.get("migrate", 0))])
            family("tesserae_preemptions_total", "counter", "Jobs preempted (not counting migrations).",
                   [("", self.actions.get("preempt", 0))])
            family("tesserae_slurm_calls_total", "counter", "Slurm calls by method.",
                   [(f'{{method="{m}"}}', n) for m, n in sorted(self.slurm_calls.items())])
            family("tesserae_slurm_call_errors_total", "counter", "Failed Slurm calls by method.",
                   [(f'{{method="{m}"}}', n) for m, n in sorted(self.slurm_errors.items())]
                   or [('{method="any"}', 0)])
            return "\n".join(lines) + "\n"


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
