"""Finding and opening the daemon's state database read-only (admin commands never write)."""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...daemon.store import Store


def add_db_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="state database (default $TESSERAE_DB, else the config's state.database)")
    p.add_argument("--config", default=None, help="daemon config to find the database in (default $TESSERAE_CONFIG, "
                                                  "else /etc/tesserae/tesserae.yaml)")


def open_store(args: argparse.Namespace) -> Store:
    from ...daemon.store import Store

    path = args.db or os.environ.get("TESSERAE_DB")
    if not path:
        from ...daemon.config import resolve_config
        path = resolve_config(args.config, check_policy=False)[0].state.database
    return Store.open(path, read_only=True)


def when(t: float | None) -> str:
    """Local time for tables, squeue style (no zone)."""
    if t is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def iso(t: float | None) -> str | None:
    """ISO 8601 with the zone offset, for --json."""
    if t is None:
        return None
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def json_meta() -> dict[str, Any]:
    """The ``meta`` object of every --json answer: which tool and version wrote it, and when."""
    from ... import __version__

    return {"tool": "tesserae-slurm", "version": __version__, "generated_at": iso(time.time())}


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
