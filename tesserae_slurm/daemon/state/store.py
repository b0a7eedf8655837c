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
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from ...model import InputError


class Base(DeclarativeBase):
    pass


# The schema is versioned by Alembic revisions (state/schema.py, state/schema_versions/versions); kv's
# schema_version (3 since revision 0002) only keeps tesserae from before migrations off the file.

# Job states in the daemon's own accounting (Slurm's state is kept beside them in slurm_state).
PENDING, STARTING, RUNNING, PREEMPTING, LOST = "PENDING", "STARTING", "RUNNING", "PREEMPTING", "LOST"
PLACED_STATES = (STARTING, RUNNING)  # the job holds GPUs in the daemon's accounting
TERMINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                   "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", LOST)


class JobRow(Base):
    __tablename__ = "jobs"
    job_id: Mapped[str] = mapped_column(String, primary_key=True)  # Slurm job id
    name: Mapped[str] = mapped_column(String, default="")
    user: Mapped[str] = mapped_column(String, default="")
    num_gpus: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String, default="")
    batch_size: Mapped[str] = mapped_column(String, default="")
    parallelism: Mapped[str] = mapped_column(Text, default="[]")  # JSON list
    no_pack: Mapped[bool] = mapped_column(Boolean, default=False)
    meta: Mapped[str] = mapped_column(Text, default="")  # the job's tesserae Comment as first seen
    submit_time: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String, default=PENDING, index=True)
    slurm_state: Mapped[str] = mapped_column(String, default="")
    reason: Mapped[str] = mapped_column(String, default="")
    attained_service: Mapped[float] = mapped_column(Float, default=0.0)  # GPU-seconds
    executed_time: Mapped[float] = mapped_column(Float, default=0.0)  # wall seconds run (Slurm times)
    run_start: Mapped[float | None] = mapped_column(Float, nullable=True)  # Slurm start of the run counted
    run_counted: Mapped[float] = mapped_column(Float, default=0.0)  # seconds of that run already counted
    # normalized speed of the current placement (the round's decision: 1 alone on its best GPU type, the
    # pair's speed when packed); each counted second adds that many seconds of work to work_done
    speed: Mapped[float] = mapped_column(Float, default=1.0)
    work_done: Mapped[float] = mapped_column(Float, default=0.0)  # seconds of work at the best speed alone
    rounds_run: Mapped[int] = mapped_column(Integer, default=0)
    nodes: Mapped[str] = mapped_column(String, default="")  # comma-joined physical nodes
    gpus: Mapped[str] = mapped_column(String, default="")  # "node1:0-1;node2:0-3"
    assignment: Mapped[str] = mapped_column(Text, default="")  # encoded Assignment set in AdminComment
    assign_round: Mapped[int | None] = mapped_column(Integer, nullable=True)
    placed_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # when the daemon released it
    packed_with: Mapped[str] = mapped_column(String, default="")
    strategy: Mapped[str] = mapped_column(String, default="")
    restarts: Mapped[int] = mapped_column(Integer, default=0)  # Slurm's restart count
    preemptions: Mapped[int] = mapped_column(Integer, default=0)
    migrations: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    first_start: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_seen: Mapped[float] = mapped_column(Float, default=0.0)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    stop_reason = ""  # not a column: what the daemon is doing to a PREEMPTING job (daemon/operators/readers.py)


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
    table = cast(Table, JobRow.__table__)
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
    __tablename__ = "rounds"
    round_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    started_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    policy: Mapped[str] = mapped_column(String)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String, default="planned")  # planned|applied|failed|skipped
    # round | start: a start between rounds (round/start_between.py), which only starts jobs on free GPUs
    kind: Mapped[str] = mapped_column(String, default="round", server_default="round")
    error: Mapped[str] = mapped_column(Text, default="")
    scheduling_ms: Mapped[float] = mapped_column(Float, default=0.0)
    placement_ms: Mapped[float] = mapped_column(Float, default=0.0)
    packing_ms: Mapped[float] = mapped_column(Float, default=0.0)
    migration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    decision_json: Mapped[str] = mapped_column(Text, default="{}")  # model.codec.decision_to_json
    observe_ms: Mapped[float] = mapped_column(Float, default=0.0)
    apply_ms: Mapped[float] = mapped_column(Float, default=0.0)
    jobs_active: Mapped[int] = mapped_column(Integer, default=0)
    running: Mapped[int] = mapped_column(Integer, default=0)
    started: Mapped[int] = mapped_column(Integer, default=0)
    preempted: Mapped[int] = mapped_column(Integer, default=0)
    migrated: Mapped[int] = mapped_column(Integer, default=0)
    kept: Mapped[int] = mapped_column(Integer, default=0)
    packed_pairs: Mapped[int] = mapped_column(Integer, default=0)
    pending: Mapped[int] = mapped_column(Integer, default=0)


class PlacementRow(Base):
    __tablename__ = "placements"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.round_id"), index=True)
    job_id: Mapped[str] = mapped_column(String, index=True)
    gpus: Mapped[str] = mapped_column(String)
    partner: Mapped[str] = mapped_column(String, default="")
    strategy: Mapped[str] = mapped_column(String, default="")
    speed: Mapped[float] = mapped_column(Float, default=0.0)


class ActionRow(Base):
    __tablename__ = "actions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.round_id"), index=True)
    seq: Mapped[int] = mapped_column(Integer)  # order of execution within the round
    job_id: Mapped[str] = mapped_column(String, index=True)
    kind: Mapped[str] = mapped_column(String)  # start|preempt|migrate|hold (reconcile: requeue|hold)
    # intent|done|failed|skipped|interrupted (a crash left it as intent; the next start reconciled it)
    status: Mapped[str] = mapped_column(String, default="intent", index=True)
    detail: Mapped[str] = mapped_column(Text, default="{}")  # JSON: target gpus, partner, strategy ...
    created_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")


class EventRow(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    kind: Mapped[str] = mapped_column(String)
    job_id: Mapped[str] = mapped_column(String, default="", index=True)
    round_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")


class SlurmCallRow(Base):
    """Every Slurm call that changes something (place, release, signal, ...), for audit and `round show`."""

    __tablename__ = "slurm_calls"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    time: Mapped[float] = mapped_column(Float)
    method: Mapped[str] = mapped_column(String)
    job_ids: Mapped[str] = mapped_column(String, default="")  # comma-joined
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str] = mapped_column(Text, default="")
    ms: Mapped[float] = mapped_column(Float, default=0.0)


class KvRow(Base):
    """Small daemon state that is not a table: schema version, policy state, shadow placement."""

    __tablename__ = "kv"
    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[bytes] = mapped_column(LargeBinary)


class AdminRow(Base):
    """An operator's request (`tesserae hold|release|requeue|cancel|pin|keep-off|unpin|drain|resume`) as the
    daemon took it in: who (the request file's owner, set by the kernel) and when, and what became of it."""

    __tablename__ = "admin_actions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float)  # when the operator asked (the request's own stamp)
    user: Mapped[str] = mapped_column(String)
    uid: Mapped[int] = mapped_column(Integer)
    command: Mapped[str] = mapped_column(String)  # hold|release|requeue|cancel|pin|keep-off|unpin|drain|resume
    target: Mapped[str] = mapped_column(String, index=True)  # job id or node name
    status: Mapped[str] = mapped_column(String, default="accepted")  # accepted|refused|done|failed
    round_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # round that took it in
    note: Mapped[str] = mapped_column(Text, default="")
    nodes: Mapped[str] = mapped_column(Text, default="", server_default="")  # pin|keep-off: Slurm hostlist


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


@dataclass
class Store:
    engine: Engine
    read_only: bool = False

    @staticmethod
    def open(path: str | Path, read_only: bool = False) -> Store:
        """The state database; a file this user may not read or a directory it may not write is one
        line (InputError), not a traceback."""
        path = Path(path).expanduser()
        try:
            return Store._open(path, read_only)
        except DatabaseError as exc:  # OperationalError, or a file that is not a database at all
            why = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        except OSError as exc:
            why = exc.strerror or str(exc)
        if read_only:
            raise InputError(f"cannot read state database {path}: {why} (may this user read it?)")
        raise InputError(f"cannot open state database {path} for writing: {why} "
                         f"(may this user write to {path.parent}?)")

    @staticmethod
    def _open(path: Path, read_only: bool) -> Store:
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
        store = Store(engine, read_only)
        try:
            store._check_schema(path)
        except OperationalError:
            if not read_only:
                raise
            # A WAL database whose daemon is stopped has no -shm file, and a reader without write access to
            # the state directory cannot create one: read the file as immutable (nobody is writing it).
            engine = create_engine(f"sqlite:///file:{path.resolve()}?mode=ro&immutable=1&uri=true", future=True)
            store = Store(engine, read_only)
            store._check_schema(path)
        return store

    def close(self) -> None:
        """Close the pooled connections now. SQLite checkpoints the WAL into the database file when its
        last connection closes; leaving that to the garbage collector makes the moment unpredictable."""
        self.engine.dispose()

    def _check_schema(self, path: Path) -> None:
        from .schema import check_readable
        with self.engine.connect() as conn:
            check_readable(conn, path)

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

    def job_columns(self, names: Sequence[str], states: Sequence[str]) -> list[Any]:
        """The named columns of the rows in ``states`` (rows with those attributes), in ``jobs``'s order:
        no ORM object per row where a round reads every active job."""
        with self.session() as s:
            q = select(*(getattr(JobRow, n) for n in names)).where(JobRow.state.in_(list(states)))
            return list(s.connection().execute(q.order_by(JobRow.submit_time, JobRow.job_id)).all())

    def jobs_by_id(self, ids: Sequence[str]) -> list[JobRow]:
        out: list[JobRow] = []
        with self.session() as s:
            for i in range(0, len(ids), 500):
                out += list(s.scalars(select(JobRow).where(JobRow.job_id.in_(list(ids[i:i + 500])))))
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

    def placements_of(self, round_ids: Sequence[int], job_ids: Sequence[str]) -> list[Any]:
        """The placement rows of these jobs in these rounds (rows with ``PlacementRow``'s attributes, not ORM
        objects: a round reads those of every placed job)."""
        out: list[Any] = []
        if round_ids:
            cols = select(*cast(Table, PlacementRow.__table__).columns)
            with self.session() as s:
                for i in range(0, len(job_ids), 500):
                    out += s.connection().execute(cols.where(PlacementRow.round_id.in_(list(round_ids)),
                                                             PlacementRow.job_id.in_(list(job_ids[i:i + 500])))).all()
        return out

    def done_actions(self, job_ids: Sequence[str], kinds: Sequence[str]) -> list[ActionRow]:
        """The done actions of these kinds on these jobs, each job's in round and sequence order."""
        out: list[ActionRow] = []
        with self.session() as s:
            for i in range(0, len(job_ids), 500):
                out += s.scalars(select(ActionRow).where(
                    ActionRow.job_id.in_(list(job_ids[i:i + 500])), ActionRow.kind.in_(list(kinds)),
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


STATE_DIR_MODE = 0o750  # the daemon's user and its group (operators); other users read through the API
STATE_DB_MODE = 0o640


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
