"""The daemon's state in SQLite through SQLAlchemy 2.x (WAL mode).

Only the daemon writes; admin commands open the file read-only. Actions are recorded as *intent*
before they touch Slurm and marked done or failed after, so a crash between two actions leaves a
trail the next start reconciles (see daemon/round/reconcile.py).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, delete, func, or_, select, update
from sqlalchemy.orm import DeclarativeBase, Mapped, Session

from ...model import InputError
from . import tables
from .database import STATE_DB_MODE as STATE_DB_MODE
from .database import STATE_DIR_MODE as STATE_DIR_MODE
from .database import Database, create_closed, in_chunks
from .job_states import LOST as LOST
from .job_states import PENDING as PENDING
from .job_states import PLACED_STATES as PLACED_STATES
from .job_states import PREEMPTING as PREEMPTING
from .job_states import RUNNING as RUNNING
from .job_states import STARTING as STARTING
from .job_states import TERMINAL_STATES as TERMINAL_STATES


class Base(DeclarativeBase):
    metadata = tables.metadata


# The schema is versioned by Alembic revisions (state/schema.py, state/schema_versions/versions); kv's
# schema_version (3 since revision 0002) only keeps tesserae from before migrations off the file.
# Each row class maps one table of state/tables.py (the columns' meaning is there).


class JobRow(Base):
    __table__ = tables.jobs
    job_id: Mapped[str]
    name: Mapped[str]
    user: Mapped[str]
    num_gpus: Mapped[int]
    model: Mapped[str]
    batch_size: Mapped[str]
    parallelism: Mapped[str]
    no_pack: Mapped[bool]
    meta: Mapped[str]
    submit_time: Mapped[float]
    state: Mapped[str]
    slurm_state: Mapped[str]
    reason: Mapped[str]
    attained_service: Mapped[float]
    executed_time: Mapped[float]
    run_start: Mapped[float | None]
    run_counted: Mapped[float]
    speed: Mapped[float]
    work_done: Mapped[float]
    rounds_run: Mapped[int]
    nodes: Mapped[str]
    gpus: Mapped[str]
    assignment: Mapped[str]
    assign_round: Mapped[int | None]
    placed_at: Mapped[float | None]
    packed_with: Mapped[str]
    strategy: Mapped[str]
    restarts: Mapped[int]
    preemptions: Mapped[int]
    migrations: Mapped[int]
    exit_code: Mapped[int | None]
    first_start: Mapped[float | None]
    last_seen: Mapped[float]
    finished_at: Mapped[float | None]


class _Unset:
    """A column an update leaves alone."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


NO_PLACEMENT: dict[str, Any] = {"nodes": "", "gpus": "", "assignment": "", "assign_round": None, "placed_at": None,
                                "packed_with": ""}  # the columns of a job that holds no GPUs


@dataclass(frozen=True)
class JobUpdate:
    """Columns of one job row to write; fields left ``UNSET`` are not written. ``first_start`` is
    written only where the row has none yet: a job's first start never moves. ``*_added`` add to
    the row's counters."""

    state: str = UNSET
    slurm_state: str = UNSET
    reason: str = UNSET
    name: str = UNSET
    last_seen: float = UNSET
    attained_service: float = UNSET
    executed_time: float = UNSET
    run_start: float | None = UNSET
    run_counted: float = UNSET
    speed: float = UNSET
    work_done: float = UNSET
    restarts: int = UNSET
    first_start: float = UNSET
    exit_code: int | None = UNSET
    finished_at: float = UNSET
    nodes: str = UNSET
    gpus: str = UNSET
    assignment: str = UNSET
    assign_round: int | None = UNSET
    placed_at: float | None = UNSET
    packed_with: str = UNSET
    strategy: str = UNSET
    preemptions_added: int = UNSET  # added to the row's count
    migrations_added: int = UNSET

    def cleared(self) -> JobUpdate:
        """This update, and the job no longer holds GPUs (no nodes, GPUs, assignment or partner)."""
        return replace(self, **NO_PLACEMENT)

    def ended(self, slurm_nodes: Sequence[str] = ()) -> JobUpdate:
        """This update for a job that ended: it holds no GPUs, and its row keeps where it last ran (Slurm's
        node list when it gives one; else the nodes and GPUs the row holds), as squeue shows ended jobs."""
        return replace(self.cleared(), nodes=",".join(slurm_nodes) if slurm_nodes else UNSET, gpus=UNSET)

    def columns(self) -> dict[str, Any]:
        """The SQL values of the fields set."""
        out = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not UNSET}
        if "first_start" in out:
            out["first_start"] = func.coalesce(JobRow.first_start, out["first_start"])
        if "preemptions_added" in out:
            out["preemptions"] = JobRow.preemptions + out.pop("preemptions_added")
        if "migrations_added" in out:
            out["migrations"] = JobRow.migrations + out.pop("migrations_added")
        return out

    def fields_set(self) -> dict[str, Any]:
        """The fields set and their plain values, for ``bulk_job_update``."""
        return {k: v for k, v in vars(self).items() if v is not UNSET}  # a round asks this of every job


def unchanged_dropped(values: dict[str, Any], row: Any) -> dict[str, Any]:
    """``values`` (``JobUpdate.fields_set``) without what ``row`` (the job's columns as attributes) holds already: a
    field equal to the row's, and ``first_start`` where the row has one (it is written only where none is). A field
    the row does not carry counts as a change, and so do the ``*_added`` counters."""
    for k in [k for k, v in values.items()
              if (getattr(row, k, None) is not None if k == "first_start" else
                  not k.endswith("_added") and getattr(row, k, UNSET) == v)]:
        del values[k]
    return values


def bulk_job_update(keys: Sequence[str]) -> Any:
    """One UPDATE of job rows setting the fields ``keys`` (as ``JobUpdate.columns`` does), executed for many jobs
    at once with parameters ``b_job_id`` and ``b_<field>``: a round updates every active job's row."""
    table = tables.jobs
    t = table.c
    values: dict[str, Any] = {}
    for k in keys:
        p: Any = bindparam(f"b_{k}")
        if k == "first_start":
            values[k] = func.coalesce(t.first_start, p)
        elif k == "preemptions_added":
            values["preemptions"] = t.preemptions + p
        elif k == "migrations_added":
            values["migrations"] = t.migrations + p
        else:
            values[k] = p
    return update(table).where(t.job_id == bindparam("b_job_id")).values(values)


class RoundRow(Base):
    __table__ = tables.rounds
    round_id: Mapped[int]
    started_at: Mapped[float]
    finished_at: Mapped[float | None]
    policy: Mapped[str]
    dry_run: Mapped[bool]
    status: Mapped[str]
    kind: Mapped[str]
    error: Mapped[str]
    scheduling_ms: Mapped[float]
    placement_ms: Mapped[float]
    packing_ms: Mapped[float]
    migration_ms: Mapped[float]
    decision_json: Mapped[str]
    observe_ms: Mapped[float]
    apply_ms: Mapped[float]
    jobs_active: Mapped[int]
    running: Mapped[int]
    started: Mapped[int]
    preempted: Mapped[int]
    migrated: Mapped[int]
    kept: Mapped[int]
    packed_pairs: Mapped[int]
    pending: Mapped[int]


class PlacementRow(Base):
    __table__ = tables.placements
    id: Mapped[int]
    round_id: Mapped[int]
    job_id: Mapped[str]
    gpus: Mapped[str]
    partner: Mapped[str]
    strategy: Mapped[str]
    speed: Mapped[float]


class ActionRow(Base):
    __table__ = tables.actions
    id: Mapped[int]
    round_id: Mapped[int]
    seq: Mapped[int]
    job_id: Mapped[str]
    kind: Mapped[str]
    status: Mapped[str]
    detail: Mapped[str]
    created_at: Mapped[float]
    finished_at: Mapped[float | None]
    error: Mapped[str]


class EventRow(Base):
    __table__ = tables.events
    id: Mapped[int]
    time: Mapped[float]
    kind: Mapped[str]
    job_id: Mapped[str]
    round_id: Mapped[int | None]
    message: Mapped[str]


class SlurmCallRow(Base):
    """Every Slurm call that changes something (place, release, signal, ...), for audit and `round show`."""

    __table__ = tables.slurm_calls
    id: Mapped[int]
    round_id: Mapped[int | None]
    time: Mapped[float]
    method: Mapped[str]
    job_ids: Mapped[str]
    ok: Mapped[bool]
    error: Mapped[str]
    ms: Mapped[float]


class KvRow(Base):
    """Small daemon state that is not a table: schema version, policy state, shadow placement."""

    __table__ = tables.kv
    key: Mapped[str]
    value: Mapped[bytes]


class AdminRow(Base):
    """An operator's request (`tesserae hold|release|requeue|cancel|pin|keep-off|unpin|drain|resume`) as the
    daemon took it in: who (the request file's owner, set by the kernel) and when, and what became of it."""

    __table__ = tables.admin_actions
    id: Mapped[int]
    time: Mapped[float]
    user: Mapped[str]
    uid: Mapped[int]
    command: Mapped[str]
    target: Mapped[str]
    status: Mapped[str]
    round_id: Mapped[int | None]
    note: Mapped[str]
    nodes: Mapped[str]


@dataclass
class Store(Database):
    """The database as the daemon writes it: ORM rows in sessions (``Database`` opens it)."""

    def get_kv(self, key: str) -> bytes | None:
        with self.session() as s:
            row = s.get(KvRow, key)
            return None if row is None else row.value

    def set_kv(self, key: str, value: bytes) -> None:
        with self.session() as s:
            s.merge(KvRow(key=key, value=value))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed on success, rolled back on any exception."""
        with Session(self.engine, expire_on_commit=False) as s:
            with s.begin():
                yield s

    # --- queries used by the admin CLI and the loop ----------------------------------------------
    def jobs(self, states: Sequence[str] | None = None) -> list[JobRow]:
        with self.session() as s:
            q = select(JobRow).order_by(JobRow.submit_time, JobRow.job_id)
            if states:
                q = q.where(JobRow.state.in_(list(states)))
            return list(s.scalars(q))

    def jobs_by_id(self, ids: Sequence[str]) -> list[JobRow]:
        out: list[JobRow] = []
        with self.session() as s:
            for chunk in in_chunks(ids):
                out += list(s.scalars(select(JobRow).where(JobRow.job_id.in_(chunk))))
        return out

    def job(self, job_id: str) -> JobRow | None:
        with self.session() as s:
            return s.get(JobRow, job_id)

    def rounds(self, limit: int = 20) -> list[RoundRow]:
        with self.session() as s:
            return list(s.scalars(select(RoundRow).order_by(RoundRow.round_id.desc()).limit(limit)))

    def round(self, round_id: int) -> RoundRow | None:
        with self.session() as s:
            return s.get(RoundRow, round_id)

    def actions(self, round_id: int | None = None, status: str | None = None,
                job_id: str | None = None) -> list[ActionRow]:
        with self.session() as s:
            q = select(ActionRow).order_by(ActionRow.round_id, ActionRow.seq)
            if round_id is not None:
                q = q.where(ActionRow.round_id == round_id)
            if status is not None:
                q = q.where(ActionRow.status == status)
            if job_id is not None:
                q = q.where(ActionRow.job_id == job_id)
            return list(s.scalars(q))

    def placements(self, round_id: int) -> list[PlacementRow]:
        with self.session() as s:
            return list(s.scalars(select(PlacementRow).where(PlacementRow.round_id == round_id)))

    def round_spans(self, first: int, statuses: Sequence[str]) -> list[tuple[int, float, float | None]]:
        """(round, started, finished) of the rounds from ``first`` in these statuses, in order."""
        with self.session() as s:
            return [(int(r), float(t0), None if t1 is None else float(t1)) for r, t0, t1 in s.execute(
                select(RoundRow.round_id, RoundRow.started_at, RoundRow.finished_at)
                .where(RoundRow.round_id >= first, RoundRow.status.in_(list(statuses))).order_by(RoundRow.round_id))]

    def done_actions(self, job_ids: Sequence[str], kinds: Sequence[str]) -> list[ActionRow]:
        """The done actions of these kinds on these jobs, each job's in round and sequence order."""
        out: list[ActionRow] = []
        with self.session() as s:
            for chunk in in_chunks(job_ids):
                out += s.scalars(select(ActionRow).where(
                    ActionRow.job_id.in_(chunk), ActionRow.kind.in_(list(kinds)),
                    ActionRow.status == "done").order_by(ActionRow.round_id, ActionRow.seq))
        return out

    def slurm_calls(self, round_id: int | None = None, job_id: str | None = None) -> list[SlurmCallRow]:
        with self.session() as s:
            q = select(SlurmCallRow).order_by(SlurmCallRow.id)
            if round_id is not None:
                q = q.where(SlurmCallRow.round_id == round_id)
            rows = list(s.scalars(q))
        if job_id is not None:
            rows = [r for r in rows if job_id in r.job_ids.split(",")]
        return rows

    def events(self, job_id: str | None = None, limit: int = 50) -> list[EventRow]:
        with self.session() as s:
            q = select(EventRow).order_by(EventRow.id.desc()).limit(limit)
            if job_id is not None:
                q = q.where(EventRow.job_id == job_id)
            return list(s.scalars(q))

    def add_rows(self, rows: Iterable[Base]) -> None:
        """Rows built elsewhere, in one transaction: the benchmarks fill a database the way the daemon would."""
        with self.session() as s:
            s.add_all(rows)

    # --- operators' actions (daemon/operators/admin.py) ----------------------------------------------------
    def add_admin_actions(self, rows: Sequence[AdminRow]) -> None:
        with self.session() as s:
            s.add_all(rows)

    def admin_actions(self, target: str | None = None, statuses: Sequence[str] | None = None) -> list[AdminRow]:
        """Operators' actions in the order the daemon took them in."""
        with self.session() as s:
            q = select(AdminRow).order_by(AdminRow.id)
            if target is not None:
                q = q.where(AdminRow.target == target)
            if statuses is not None:
                q = q.where(AdminRow.status.in_(list(statuses)))
            return list(s.scalars(q))

    def finish_admin_actions(self, ids: Sequence[int], status: str, note: str = "") -> None:
        if ids:
            with self.session() as s:
                s.execute(update(AdminRow).where(AdminRow.id.in_(list(ids))).values(status=status, note=note))

    # --- retention (daemon/state/retention.py) ---------------------------------------------------------
    def prunable_rounds(self, started_before: float | None, keep_newest: int | None, limit: int) -> list[int]:
        """The oldest ``limit`` rounds that started before ``started_before`` or are not among the
        ``keep_newest`` newest (None: that bound is off), leaving out rounds with open intents."""
        with self.session() as s:
            conds = []
            if started_before is not None:
                conds.append(RoundRow.started_at < started_before)
            if keep_newest is not None:
                newest = s.scalar(select(func.max(RoundRow.round_id))) or 0
                conds.append(RoundRow.round_id <= newest - keep_newest)
            if not conds:
                return []
            open_ = select(ActionRow.round_id).where(ActionRow.status == "intent")
            return list(s.scalars(select(RoundRow.round_id).where(or_(*conds), RoundRow.round_id.not_in(open_))
                                  .order_by(RoundRow.round_id).limit(limit)))

    def delete_rounds(self, ids: Sequence[int]) -> None:
        """These rounds with their placements, actions, Slurm calls and events, in one transaction."""
        with self.session() as s:
            for table in (PlacementRow, ActionRow, SlurmCallRow, EventRow):
                s.execute(delete(table).where(table.round_id.in_(list(ids))))
            s.execute(delete(RoundRow).where(RoundRow.round_id.in_(list(ids))))

    def ended_jobs(self, finished_before: float, limit: int) -> list[str]:
        """Up to ``limit`` jobs in a terminal state that finished before ``finished_before``."""
        with self.session() as s:
            return list(s.scalars(select(JobRow.job_id).where(
                JobRow.state.in_(TERMINAL_STATES), JobRow.finished_at.is_not(None),
                JobRow.finished_at < finished_before).limit(limit)))

    def delete_jobs(self, ids: Sequence[str], events_before: float) -> None:
        """These jobs, and their events with no round (round events go with the rounds) from before
        ``events_before``."""
        with self.session() as s:
            s.execute(delete(JobRow).where(JobRow.job_id.in_(list(ids))))
            s.execute(delete(EventRow).where(EventRow.job_id.in_(list(ids)), EventRow.round_id.is_(None),
                                             EventRow.time < events_before))


def prepare_state(database: str | Path) -> Path:
    """The daemon's state before it opens it, whoever starts it and whatever its umask: a missing
    directory is made 0750 and a missing database 0640 (SQLite gives the WAL and shared-memory files the
    database's mode); a database another user may read, or a directory anyone may write, is refused in
    one line: job names, users and the operators' actions are not everyone's (the API serves what is)."""
    path = Path(database).expanduser()
    d = path.parent
    try:
        create_closed(path)
        mode = os.stat(d).st_mode
        if mode & 0o002 and not mode & 0o1000:
            raise InputError(f"state directory {d} is writable by every user (mode {mode & 0o7777:04o}); "
                             f"chmod 750 {d}")
        for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            if f.exists() and os.stat(f).st_mode & 0o004:
                raise InputError(f"state database {f} is readable by every user (mode "
                                 f"{os.stat(f).st_mode & 0o777:04o}); chmod 640 {path}* and start again")
    except OSError as exc:
        raise InputError(f"cannot open state database {path} for writing: {exc.strerror or exc} "
                         f"(may this user write to {d}?)") from None
    return path


class DaemonRunning(InputError):
    """Another daemon holds the state database's lock."""


_LOCKS: dict[str, int] = {}  # lock file -> descriptor this process holds (forked children share it)


def lock_path(database: str | Path) -> Path:
    return Path(str(Path(database).expanduser()) + ".lock")


def acquire_lock(database: str | Path) -> Path:
    """One daemon per state database: an exclusive flock on ``<database>.lock``, held until the process
    ends (the kernel drops it on kill -9 too). Reentrant within a process and its forked children."""
    path = lock_path(database)
    key = str(path.resolve())
    if key in _LOCKS:
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as exc:
        raise InputError(f"cannot create the daemon's lock file {path}: {exc.strerror or exc} "
                         f"(may this user write to {path.parent}?)") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DaemonRunning(f"another tesserae daemon (pid {holder}) is running on {database}; "
                            "one daemon per state database") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _LOCKS[key] = fd
    return path


def release_lock(database: str | Path) -> None:
    """Give the lock back before the process ends (tests that hand the state to another process)."""
    fd = _LOCKS.pop(str(lock_path(database).resolve()), None)
    if fd is not None:
        os.close(fd)


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
