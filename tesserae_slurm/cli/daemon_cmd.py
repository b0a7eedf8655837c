"""`tesserae daemon`: the scheduling daemon for the managed Slurm partition (systemd runs it).

    tesserae daemon --config /etc/tesserae/tesserae.yaml [--once] [--dry-run] [--log-format json]

SIGHUP re-reads the configuration between rounds (a bad file keeps the running one); SIGTERM and
SIGINT stop it between actions. Logs go to stderr (journald under systemd).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING

from .gc_tuning import long_run_gc

if TYPE_CHECKING:
    from collections.abc import Callable
    from http.server import ThreadingHTTPServer

    from ..site.config import SiteConfig

EXIT_ROUND_FAILED = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("daemon", help="run the scheduling daemon (every round: observe Slurm, decide, act)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None,
                   help="YAML configuration (default $TESSERAE_CONFIG, else /etc/tesserae/tesserae.yaml)")
    p.add_argument("--once", action="store_true", help="reconcile, run one round and exit (status 1 if it was skipped)")
    p.add_argument("--dry-run", action="store_true",
                   help="shadow mode: decide and record every round, send nothing to Slurm")
    p.add_argument("--rounds", type=int, default=None, metavar="N", help="stop after N rounds")
    p.add_argument("--log-format", choices=("human", "json"), default="human",
                   help="human (default) or json: one object a line with time, level, round, job, action, "
                        "outcome, message")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..daemon.loop import Daemon
    from ..daemon.service.logfmt import formatter
    from ..daemon.service.metrics import serve
    from ..daemon.service.sdnotify import Notifier
    from ..daemon.state.store import Store, acquire_lock, prepare_state
    from ..site.connect import backend_from_config
    from ..site.load import resolve_config

    cfg, source = resolve_config(args.config)
    logging.getLogger().setLevel(cfg.log_level.upper())
    for h in logging.getLogger().handlers:
        h.setFormatter(formatter(args.log_format))
    log = logging.getLogger("tesserae_slurm.daemon")
    prepare_state(cfg.state.database)  # 0750 / 0640 whoever starts it; a world-readable one refused
    store = Store.open(cfg.state.database)  # before any log line: a bad state file is one line
    acquire_lock(cfg.state.database)  # one daemon per state database, before it acts or settles intents
    log.info("configuration from %s; state in %s; partition %s", source, cfg.state.database, cfg.slurm.partition)
    from ..daemon.operators import admin
    try:
        admin.ensure_dir(admin.requests_dir(cfg))  # where `tesserae hold|drain|...` leave requests
    except OSError as exc:
        log.error("admin requests directory %s: %s; operators' commands will fail", admin.requests_dir(cfg), exc)
    notifier = Notifier()  # systemd Type=notify: READY/WATCHDOG/STOPPING; no-op elsewhere
    daemon = Daemon(cfg, backend_from_config(cfg), store, dry_run=args.dry_run, sleep=notifier.sleep)
    daemon.heartbeat, daemon.heartbeat_s = notifier.ping, notifier.slice_s
    if args.once:
        daemon.start()
        with long_run_gc():
            result = daemon.run_round()
        if result.status in ("skipped", "failed"):
            print(f"tesserae daemon: round {result.round_id} {result.status}: {result.error}", file=sys.stderr)
            return EXIT_ROUND_FAILED
        return 0

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: stopping after the current action", signal.Signals(signum).name)
        notifier.stopping()
        daemon.request_stop()

    def on_hup(_signum: int, _frame: FrameType | None) -> None:
        log.info("SIGHUP: reloading the configuration before the next round")
        daemon.reload_event.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    server = _serve("metrics", cfg.metrics.listen, lambda: serve(daemon.metrics, cfg.metrics.listen), log)
    web = _serve("web page and API", cfg.http.listen, lambda: _serve_web(cfg), log)
    notifier.ready(f"scheduling partition {cfg.slurm.partition} every {cfg.scheduler.round_seconds:g} s")
    try:
        with long_run_gc():  # what exists now lives as long as the daemon; each round allocates per job
            daemon.run_forever(args.rounds, reload=lambda: resolve_config(args.config)[0])
    finally:
        notifier.stopping()
        for s in (server, web):
            if s is not None:
                s.shutdown()
    return 0


def _serve(what: str, listen: str, start: Callable[[], ThreadingHTTPServer],
           log: logging.Logger) -> ThreadingHTTPServer | None:
    """Metrics or the page on `listen` (empty: off). A port in use is logged, never a reason to stop
    scheduling: the jobs matter more than their view."""
    if not listen:
        return None
    try:
        return start()
    except OSError as exc:
        log.error("%s not started on %s: %s", what, listen, exc.strerror or exc)
        return None


def _serve_web(cfg: SiteConfig) -> ThreadingHTTPServer:
    """The read-only page and API (http.listen)."""
    from ..daemon.operators.readers import FirstLook
    from ..daemon.operators.web import serve as serve_web

    return serve_web(cfg.state.database, cfg.http.listen, FirstLook(cfg))
