"""Schema upgrades of the state database with Alembic (revisions in daemon/state/schema_versions/versions).

The daemon upgrades on start, after a backup copy beside the file (``state.db.bak-<rev>-<UTC time>``),
and refuses a database newer than itself. A database from before migrations (tables, kv
``schema_version`` 2, no ``alembic_version``) is the baseline 0001. Admin commands never migrate: they
compare ``alembic_version`` with ``HEAD`` (no Alembic import on their path, so they stay fast).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from ...model import InputError

if TYPE_CHECKING:  # Alembic loads only when a database is opened for writing
    from alembic.config import Config

log = logging.getLogger(__name__)

# Every migration, oldest first (tests/daemon/test_schema.py checks this against the scripts): readers
# tell an older database from a newer one without importing Alembic.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006")
HEAD = REVISIONS[-1]
LEGACY_SCHEMA_VERSION = b"2"  # kv schema_version of the pre-migration schema = revision 0001


def current_revision(conn: Connection) -> str | None:
    """The database's revision; "" for an empty database, None for one from before migrations."""
    tables = set(inspect(conn).get_table_names())
    if not tables:
        return ""
    if "alembic_version" not in tables:
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar() or ""


def check_readable(conn: Connection, path: Path) -> None:
    """For readers (admin commands, the web page): one line unless the database is at ``HEAD``."""
    rev = current_revision(conn)
    if rev == HEAD:
        return
    if rev == "":
        raise InputError(f"state database {path} has no tesserae schema (not a tesserae state file?)")
    if rev is not None and rev not in REVISIONS:
        raise InputError(f"state database {path} is at schema {rev}, newer than this tesserae ({HEAD}): use the "
                         "newer tesserae")
    raise InputError(f"state database {path} is at schema {rev or 'from before migrations'}, this tesserae "
                     f"reads {HEAD}: start this version's daemon once to upgrade it")


def _alembic_config(conn: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("schema_versions")))
    cfg.attributes["connection"] = conn
    return cfg


def backup(path: Path, rev: str) -> Path:
    """A consistent copy (SQLite's online backup, WAL included) named after the revision it holds."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}.bak-{rev}-{stamp}")
    n = 1
    while dest.exists():
        dest, n = path.with_name(f"{path.name}.bak-{rev}-{stamp}.{n}"), n + 1
    # the copy holds what the database holds: it gets the database's mode, not the umask's
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, os.stat(path).st_mode & 0o777)
    os.close(fd)
    src, dst = sqlite3.connect(path), sqlite3.connect(dest)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal/-shm beside it
    finally:
        dst.close()
        src.close()
    return dest


def upgrade(engine: Engine, path: Path) -> str | None:
    """Bring the database at ``path`` to ``HEAD``; returns the backup's path when it took one."""
    with engine.connect() as conn:
        rev = current_revision(conn)
        legacy = None
        if rev is None:
            legacy = conn.execute(text("SELECT value FROM kv WHERE key = 'schema_version'")).scalar() \
                if "kv" in inspect(conn).get_table_names() else None
    if rev == HEAD:
        return None
    if rev is None and legacy != LEGACY_SCHEMA_VERSION:
        raise InputError(f"state database {path} has schema version {legacy!r}, which this tesserae cannot "
                         "upgrade; move it aside to start afresh")
    if rev and rev not in REVISIONS:
        raise InputError(f"state database {path} is at schema {rev}, newer than this tesserae ({HEAD}): run the "
                         f"newer tesserae, or restore the backup {path.name}.bak-* its upgrade left")
    from alembic import command

    saved = None
    if rev != "":
        saved = backup(path, rev or "0001")
        log.info("upgrading state database %s from schema %s to %s; backup in %s", path, rev or "0001 (legacy)",
                 HEAD, saved)
    with engine.connect() as conn:
        # SQLite alters tables by copying them; foreign keys must be off for that (outside a transaction)
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        cfg = _alembic_config(conn)
        if rev is None:
            command.stamp(cfg, "0001")
        command.upgrade(cfg, HEAD)
        conn.commit()
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
    return None if saved is None else str(saved)
