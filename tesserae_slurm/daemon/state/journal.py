"""The daemon's writes to its state database, one transaction per step of the protocol.

Intent goes in before a Slurm call (action rows with status ``intent`` *and* the job's new state in
the same transaction); the outcome goes in after. So after a crash every job is either in its old
state or in the intended one, and its ``intent`` actions say which calls may or may not have run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from ...model import InputError, Placement, RoundDecision
from ...model.codec import decision_to_json, placement_from_json, placement_to_json
from ...model.meta import JobMeta
from ...slurm import SlurmJob
from ..service.calls import CallRecord
from . import tables
from .database import in_chunks
from .gpuset import format_gpus
from .store import (
    TERMINAL_STATES,
    ActionRow,
    EventRow,
    JobRow,
    JobUpdate,
    RoundRow,
    SlurmCallRow,
    Store,
    bulk_job_update,
    dumps,
    unchanged_dropped,
)

_log = logging.getLogger("tesserae_slurm.daemon.actions")


NEW = "NEW"  # a job not in the database yet


@dataclass(frozen=True)
class JobFacts:
    """What the database says about a job (a frozen copy of the row's relevant columns): what reconciliation
    decides on, then what it may write, so a round writes only the columns that changed."""

    job_id: str
    state: str = NEW
    assignment: str = ""
    placed_at: float | None = None
    num_gpus: int = 1
    executed_time: float = 0.0
    run_start: float | None = None
    run_counted: float = 0.0
    speed: float = 1.0  # normalized speed of its current placement (the round's decision)
    work_done: float = 0.0
    slurm_state: str = ""
    reason: str = ""
    name: str = ""
    restarts: int = 0
    attained_service: float = 0.0
    first_start: float | None = None
    exit_code: int | None = None
    finished_at: float | None = None
    nodes: str = ""
    gpus: str = ""
    assign_round: int | None = None
    packed_with: str = ""
    strategy: str = ""


_FACTS = tuple(f.name for f in fields(JobFacts))


@dataclass(frozen=True)
class Intent:
    kind: str
    job_id: str
    detail: Mapping[str, Any]
    job_update: JobUpdate = JobUpdate()  # columns of the job row set in the same transaction


@dataclass(frozen=True)
class RoundCounts:
    """What a round decided, in numbers and stage times, for its row."""

    scheduling_ms: float = 0.0
    placement_ms: float = 0.0
    packing_ms: float = 0.0
    migration_ms: float = 0.0
    jobs_active: int = 0
    running: int = 0
    kept: int = 0
    started: int = 0
    preempted: int = 0
    migrated: int = 0
    packed_pairs: int = 0
    pending: int = 0


class Journal:
    def __init__(self, store: Store) -> None:
        self.store = store

    # ---- rounds ----------------------------------------------------------------------------------
    def begin_round(self, now: float, policy: str, dry_run: bool, kind: str = "round") -> int:
        """A new round row; ``kind`` "start" for a start between rounds."""
        with self.store.session() as s:
            row = RoundRow(started_at=now, policy=policy, dry_run=dry_run, status="observing", kind=kind)
            s.add(row)
            s.flush()
            return int(row.round_id)

    def update_round(self, round_id: int, *, status: str | None = None, error: str | None = None,
                     finished_at: float | None = None, observe_ms: float | None = None,
                     apply_ms: float | None = None) -> None:
        """Set the given columns of the round's row (None: left alone)."""
        values = {k: v for k, v in (("status", status), ("error", error), ("finished_at", finished_at),
                                    ("observe_ms", observe_ms), ("apply_ms", apply_ms)) if v is not None}
        with self.store.session() as s:
            s.execute(update(RoundRow).where(RoundRow.round_id == round_id).values(**values))

    def record_decision(self, round_id: int, decision: RoundDecision, targets: Mapping[str, Any],
                        counts: RoundCounts, order: Sequence[str] = (),
                        sources: Mapping[str, Any] | None = None, inputs: Mapping[str, Any] | None = None,
                        extra: Mapping[str, Any] | None = None) -> None:
        # the policy's order and where each placed job's speed came from, for `tesserae explain`; with
        # ``inputs``, the engine's request (request_codec.py), to replay the round; ``extra``: more keys
        body = {**decision_to_json(decision), "order": list(order), "sources": dict(sources or {}), **(extra or {})}
        if inputs is not None:
            body["request"] = dict(inputs)
        with self.store.session() as s:
            s.execute(update(RoundRow).where(RoundRow.round_id == round_id)
                      .values(decision_json=dumps(body), **asdict(counts)))
            if targets:  # one executemany: thousands of placed jobs at a big site, no ORM object each
                s.connection().execute(insert(tables.placements), [
                    {"round_id": round_id, "job_id": job, "gpus": format_gpus(t.gpus), "partner": t.partner,
                     "strategy": t.strategy, "speed": t.speed} for job, t in targets.items()])

    # ---- jobs ------------------------------------------------------------------------------------
    def facts(self, ids: Iterable[str], *, active: bool = True) -> dict[str, JobFacts]:
        """Rows of the given ids and (``active``) of every job not finished yet, as frozen facts."""
        wanted = list(ids)
        # the columns, not ORM objects: every active job is read each round
        cols = select(*(getattr(JobRow, c) for c in _FACTS))
        with self.store.session() as s:
            db = s.connection()
            rows = list(db.execute(cols.where(JobRow.state.not_in(TERMINAL_STATES))).all()) if active else []
            for chunk in in_chunks(wanted):
                rows += db.execute(cols.where(JobRow.job_id.in_(chunk))).all()
        return {r[0]: JobFacts(*r) for r in rows}

    def seen_active(self, now: float) -> None:
        """Every active row last seen ``now``, in one statement: a round sees every active job, and most of
        their rows change in nothing else."""
        with self.store.session() as s:
            s.execute(update(JobRow).where(JobRow.state.not_in(TERMINAL_STATES)).values(last_seen=now),
                      execution_options={"synchronize_session": False})

    def rows(self, states: Sequence[str]) -> list[JobRow]:
        return self.store.jobs(states)

    def insert_job(self, sj: SlurmJob, meta: JobMeta | None, now: float) -> None:
        """A row for a managed job seen for the first time (``meta`` None: its Comment does not parse)."""
        self.insert_jobs([(sj, meta)], now)

    def insert_jobs(self, jobs: Sequence[tuple[SlurmJob, JobMeta | None]], now: float) -> None:
        """Rows for managed jobs seen for the first time, in one transaction (a queue of thousands arrives at once)."""
        if not jobs:
            return
        rows = []
        for sj, meta in jobs:
            job_id = str(sj.job_id)
            rows.append(dict(
                job_id=job_id, name=sj.name, user=sj.user, num_gpus=meta.num_gpus if meta else 0,
                model=(meta.job(job_id).model if meta else ""), batch_size=(meta.batch_size if meta else ""),
                parallelism=json.dumps(list(meta.parallelism) if meta else []),
                no_pack=bool(meta and (meta.no_pack or meta.no_profile)), meta=sj.comment,
                submit_time=float(sj.submit_time or now), state=NEW, last_seen=now,
            ))
        with self.store.session() as s:  # one executemany: the ORM's unit of work costs ~0.1 ms a row
            s.connection().execute(insert(tables.jobs), rows)

    def update_job(self, job_id: str, up: JobUpdate) -> None:
        self.update_jobs({job_id: up})

    def update_jobs(self, updates: Mapping[str, JobUpdate], known: Mapping[str, Any] | None = None) -> None:
        """``known``: job id -> its row's columns as last read (``JobFacts``, a row of ``Store.job_columns``);
        a field the row holds already is not written, and a row left with nothing to write is not touched."""
        if not updates:
            return
        with self.store.session() as s:
            _update_jobs(s, updates.items(), known)

    def count_rounds_run(self, ids: Sequence[str]) -> None:
        """One more round run for each of these jobs."""
        if ids:
            with self.store.session() as s:
                s.execute(update(JobRow).where(JobRow.job_id.in_(ids)).values(rounds_run=JobRow.rounds_run + 1))

    # ---- actions ---------------------------------------------------------------------------------
    def record_intents(self, round_id: int, intents: Sequence[Intent], now: float) -> list[int]:
        with self.store.session() as s:
            seq0 = s.scalar(select(func.count()).select_from(ActionRow).where(ActionRow.round_id == round_id)) or 0
            if not intents:
                return []
            # one executemany, and the ids read back by (round, seq): a hold of a whole queue is thousands
            db, t = s.connection(), tables.actions
            db.execute(insert(t), [dict(round_id=round_id, seq=seq0 + i, job_id=it.job_id, kind=it.kind,
                                        status="intent", detail=dumps(dict(it.detail)), created_at=now)
                                   for i, it in enumerate(intents)])
            _update_jobs(s, [(it.job_id, it.job_update) for it in intents])
            ids = [int(i) for i in db.execute(select(t.c.id).where(
                t.c.round_id == round_id, t.c.seq >= seq0, t.c.seq < seq0 + len(intents))
                .order_by(t.c.seq)).scalars()]
            assert len(ids) == len(intents)
            return ids

    def finish_action(self, action_id: int, status: str, now: float, error: str = "",
                      job_id: str = "", job_update: JobUpdate | None = None) -> None:
        with self.store.session() as s:
            s.execute(update(ActionRow).where(ActionRow.id == action_id)
                      .values(status=status, finished_at=now, error=error))
            if job_id and job_update is not None and (values := job_update.columns()):
                s.execute(update(JobRow).where(JobRow.job_id == job_id).values(**values))
            row = s.get(ActionRow, action_id)
        if row is not None:  # one line per action outcome (round, job, action, outcome: --log-format json)
            _log.log(logging.WARNING if status == "failed" else logging.INFO, "round %d: %s of job %s %s%s",
                     row.round_id, row.kind, row.job_id, status, f": {error}" if error else "",
                     extra={"round": row.round_id, "job": row.job_id, "action": row.kind, "outcome": status})

    def finish_actions(self, action_ids: Sequence[int], status: str, now: float, error: str = "") -> None:
        """``finish_action`` for many actions of one outcome in one transaction (a hold of a whole queue)."""
        if not action_ids:
            return
        ids = list(action_ids)
        rows: list[ActionRow] = []
        with self.store.session() as s:
            for chunk in in_chunks(ids):
                s.execute(update(ActionRow).where(ActionRow.id.in_(chunk))
                          .values(status=status, finished_at=now, error=error), execution_options={
                              "synchronize_session": False})
                rows += s.scalars(select(ActionRow).where(ActionRow.id.in_(chunk)))
        level = logging.WARNING if status == "failed" else logging.INFO
        if _log.isEnabledFor(level):
            for row in rows:
                _log.log(level, "round %d: %s of job %s %s%s", row.round_id, row.kind, row.job_id, status,
                         f": {error}" if error else "",
                         extra={"round": row.round_id, "job": row.job_id, "action": row.kind, "outcome": status})

    def interrupt_stale_intents(self, now: float) -> list[ActionRow]:
        """Intents left by a previous process that died mid-round; reconciliation decides their effect."""
        with self.store.session() as s:
            rows = list(s.scalars(select(ActionRow).where(ActionRow.status == "intent")))
            for r in rows:
                r.status, r.finished_at = "interrupted", now
                r.error = "the daemon stopped before recording the outcome; reconciled with Slurm on restart"
            s.execute(update(RoundRow).where(RoundRow.status.in_(("observing", "deciding", "applying")))
                      .values(status="interrupted", finished_at=now))
            return rows

    # ---- calls, events, small state --------------------------------------------------------------
    def record_calls(self, round_id: int | None, records: Sequence[CallRecord]) -> None:
        if not records:
            return
        with self.store.session() as s:
            for r in records:
                s.add(SlurmCallRow(round_id=round_id, time=r.time, method=r.method, job_ids=",".join(r.job_ids),
                                   ok=r.ok, error=r.error, ms=r.ms))

    def event(self, now: float, kind: str, message: str, job_id: str = "", round_id: int | None = None) -> None:
        with self.store.session() as s:
            s.add(EventRow(time=now, kind=kind, job_id=job_id, round_id=round_id, message=message))

    def load_policy_state(self, policy_key: str) -> Any:
        raw = self.store.get_kv(f"policy_state:{policy_key}")
        if raw is None:
            return None
        from ...policies import state_codec
        try:
            return state_codec.decode(raw)  # JSON only: reading the database never runs code
        except InputError:  # code changed under a stored state: start the policy afresh
            return None

    def save_policy_state(self, policy_key: str, state: Any) -> None:
        from ...policies import state_codec
        self.store.set_kv(f"policy_state:{policy_key}", state_codec.encode(state))

    def load_shadow(self) -> Placement | None:
        raw = self.store.get_kv("shadow_placement")
        return None if raw is None else placement_from_json(json.loads(raw.decode()), "shadow placement")

    def save_shadow(self, p: Placement) -> None:
        self.store.set_kv("shadow_placement", dumps(placement_to_json(p)).encode())


def _update_jobs(s: Session, updates: Iterable[tuple[str, JobUpdate]], known: Mapping[str, Any] | None = None) -> None:
    """One executemany per set of fields updated: a round updates thousands of rows. ``known``: as for
    ``Journal.update_jobs``."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for job_id, up in updates:
        values = up.fields_set()
        if known and job_id in known:
            values = unchanged_dropped(values, known[job_id])
        if values:
            params = {"b_job_id": job_id, **{f"b_{k}": v for k, v in values.items()}}
            groups.setdefault(tuple(sorted(values)), []).append(params)
    for keys, rows in groups.items():
        s.connection().execute(bulk_job_update(keys), rows)

