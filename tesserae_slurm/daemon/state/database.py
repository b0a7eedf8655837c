"""Opening the state database, and the reads that need no ORM objects.

``Store`` (store.py) adds the ORM rows and sessions the daemon writes with. The read commands open a
plain ``Database``: `tesserae jobs` lists thousands of rows, and SQLAlchemy's ORM (its import, its
mapped classes, an object per row) was most of that command's time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError, OperationalError

from ...model import InputError
from . import tables

STATE_DIR_MODE = 0o750  # the daemon's user and its group (operators); other users read through the API
STATE_DB_MODE = 0o640
CHUNK = 500  # ids per IN (...): SQLite's bound on parameters


def in_chunks(ids: Sequence[Any]) -> Iterator[list[Any]]:
    """``ids`` in lists of at most ``CHUNK``, one per ``IN (...)`` of a read or write of many rows."""
    for i in range(0, len(ids), CHUNK):
        yield list(ids[i:i + CHUNK])


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


@dataclass
class Database:
    engine: Engine
    read_only: bool = False

    @classmethod
    def open(cls, path: str | Path, read_only: bool = False) -> Self:
        """The state database; a file this user may not read or a directory it may not write is one
        line (InputError), not a traceback."""
        path = Path(path).expanduser()
        try:
            return cls._open(path, read_only)
        except DatabaseError as exc:  # OperationalError, or a file that is not a database at all
            why = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        except OSError as exc:
            why = exc.strerror or str(exc)
        if read_only:
            raise InputError(f"cannot read state database {path}: {why} (may this user read it?)")
        raise InputError(f"cannot open state database {path} for writing: {why} "
                         f"(may this user write to {path.parent}?)")

    @classmethod
    def _open(cls, path: Path, read_only: bool) -> Self:
        if read_only:
            if not path.exists():
                raise InputError(f"state database {path} does not exist (has the daemon run yet?)")
            url = f"sqlite:///file:{path.resolve()}?mode=ro&uri=true"
        else:
            create_closed(path)  # whoever opens it first for writing, never the umask's 0644
            url = f"sqlite:///{path}"
        engine = create_engine(url, future=True)
        event.listen(engine, "connect", _sqlite_pragmas)
        if not read_only:
            with engine.begin() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            from .schema import upgrade
            upgrade(engine, path)  # every schema change is a migration: never create_all here
        db = cls(engine, read_only)
        try:
            db._check_schema(path)
        except OperationalError:
            if not read_only:
                raise
            # A WAL database whose daemon is stopped has no -shm file, and a reader without write access to
            # the state directory cannot create one: read the file as immutable (nobody is writing it).
            engine = create_engine(f"sqlite:///file:{path.resolve()}?mode=ro&immutable=1&uri=true", future=True)
            db = cls(engine, read_only)
            db._check_schema(path)
        return db

    def close(self) -> None:
        """Close the pooled connections now. SQLite checkpoints the WAL into the database file when its
        last connection closes; leaving that to the garbage collector makes the moment unpredictable."""
        self.engine.dispose()

    def _check_schema(self, path: Path) -> None:
        from .schema import check_readable
        with self.engine.connect() as conn:
            check_readable(conn, path)

    def job_columns(self, names: Sequence[str], states: Sequence[str] | None = None,
                    ids: Sequence[str] | None = None) -> list[Any]:
        """The named columns of the job rows (rows with those attributes) in ``states`` and with ``ids``
        (None: any), ordered by submit time and id (with ``ids``, within each 500 of them): no ORM object
        per row where thousands are read."""
        t = tables.jobs.c
        q = select(*(t[n] for n in names))
        if states is not None:
            q = q.where(t.state.in_(list(states)))
        q = q.order_by(t.submit_time, t.job_id)
        with self.engine.connect() as conn:
            if ids is None:
                return list(conn.execute(q).all())
            out: list[Any] = []
            for chunk in in_chunks(ids):
                out += conn.execute(q.where(t.job_id.in_(chunk))).all()
            return out

    def round_columns(self, names: Sequence[str], limit: int) -> list[Any]:
        """The named columns of the ``limit`` newest rounds, newest first."""
        t = tables.rounds.c
        with self.engine.connect() as conn:
            return list(conn.execute(select(*(t[n] for n in names)).order_by(t.round_id.desc()).limit(limit)).all())

    def action_columns(self, names: Sequence[str], job_ids: Sequence[str], kinds: Sequence[str]) -> list[Any]:
        """The named columns of the actions of these kinds on these jobs, each job's in round and sequence order."""
        t = tables.actions.c
        q = select(*(t[n] for n in names)).where(t.kind.in_(list(kinds))).order_by(t.round_id, t.seq)
        out: list[Any] = []
        with self.engine.connect() as conn:
            for chunk in in_chunks(job_ids):
                out += conn.execute(q.where(t.job_id.in_(chunk))).all()
        return out

    def placements_of(self, round_ids: Sequence[int], job_ids: Sequence[str]) -> list[Any]:
        """The placement rows of these jobs in these rounds (rows with ``PlacementRow``'s attributes, not ORM
        objects: a round reads those of every placed job)."""
        out: list[Any] = []
        if round_ids:
            t = tables.placements.c
            q = select(tables.placements).where(t.round_id.in_(list(round_ids)))
            with self.engine.connect() as conn:
                for chunk in in_chunks(job_ids):
                    out += conn.execute(q.where(t.job_id.in_(chunk))).all()
        return out


def create_closed(path: Path) -> None:
    """A missing state directory 0750 and database 0640 (SQLite gives the WAL and shared-memory files the
    database's mode); what exists is left as it is."""
    d = path.parent
    if not d.exists():
        d.mkdir(parents=True, mode=STATE_DIR_MODE)
        os.chmod(d, STATE_DIR_MODE)
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, STATE_DB_MODE)
        except FileExistsError:  # another process made it first
            return
        os.fchmod(fd, STATE_DB_MODE)
        os.close(fd)
