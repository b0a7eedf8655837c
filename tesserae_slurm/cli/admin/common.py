"""Finding and opening the daemon's state database read-only (admin commands never write)."""

from __future__ import annotations

import argparse
import os
import time

from ...daemon.store import Store


def add_db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="state database (default $TESSERAE_DB, else the config's state.database)")
    p.add_argument("--config", default=None, help="daemon config to find the database in (default $TESSERAE_CONFIG, "
                                                  "else /etc/tesserae/tesserae.yaml)")


def open_store(args: argparse.Namespace) -> Store:
    path = args.db or os.environ.get("TESSERAE_DB")
    if not path:
        from ...daemon.config import resolve_config
        path = resolve_config(args.config, check_policy=False)[0].state.database
    return Store.open(path, read_only=True)


def when(t: float | None) -> str:
    if t is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def duration(seconds: float | None) -> str:
    """squeue's TIME style: [days-]hours:minutes:seconds, minutes:seconds under an hour."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
