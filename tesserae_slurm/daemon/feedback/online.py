"""The daemon's online feedback across rounds: read new reports, fold them, persist, and give the
engine the table with the measurements laid over it (docs/profiling.md, "Online feedback").

The online state (EWMA rows) and the read offset of every report file are stored together in one
key of the state database, written in one transaction after each reading: a restarted daemon folds
no report twice and loses none that it had folded.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...estimators.entries import SpeedTable
from ...estimators.online import OnlineState
from ...model import Cluster, InputError, Job, RoundDecision
from ...model.meta import UNPROFILED, JobMeta
from ...profiles import ProfileKey, ThroughputProfile
from ...site.config import SiteConfig
from ...site.partition import gpu_type_of
from ..state.store import TERMINAL_STATES, JobRow, Store
from .provenance import base_table, decision_sources, folded_profile
from .report_files import (
    Collected,
    ReportFileError,
    check_lines,
    fold_reports,
    load_history,
    read_new,
    refuse,
    report_files,
    state_from_json,
    state_json,
    uid_of,
)

log = logging.getLogger(__name__)
KV_KEY = "online_feedback"


class OnlineFeedback:
    def __init__(self, cfg: SiteConfig, store: Store, profile: ThroughputProfile) -> None:
        self.cfg, self.fb, self.store, self.profile = cfg, cfg.feedback, store, profile
        self.table = base_table(profile, cfg.scheduler.profile)
        try:
            state, self.cursors = state_from_json(store.get_kv(KV_KEY), self.fb.alpha)
        except (InputError, ValueError, AttributeError) as exc:
            log.error("stored online feedback unreadable (%s); starting without it", exc)
            state, self.cursors = OnlineState(self.fb.alpha), {}
        self.state = OnlineState(self.fb.alpha, state.alone, state.packed)
        self._folded: tuple[OnlineState, ThroughputProfile, SpeedTable] | None = None
        self._told: dict[str, str] = {}  # job -> the refusal last recorded as an event
        if self.fb.enabled:
            self._ensure_dir(Path(self.fb.reports_dir))

    @staticmethod
    def _ensure_dir(d: Path) -> None:
        if d.is_dir():
            return
        try:
            d.mkdir(parents=True)
            os.chmod(d, 0o1777)  # like /tmp: every user creates files, only the owner (and we) remove them
            log.info("created the throughput reports directory %s (mode 1777)", d)
        except OSError as exc:
            log.error("cannot create the throughput reports directory %s: %s", d, exc)

    # ---- reading --------------------------------------------------------------------------------------
    def key_of(self, row: JobRow) -> ProfileKey | None:
        try:
            job = JobMeta.decode(row.meta).job(row.job_id, row.user)
            if job.model == UNPROFILED:
                return None
            return self.profile.job_class(job).key
        except InputError:
            return None

    def collect(self, now: float) -> Collected:
        """Read what was appended since the last round and fold what checks out; persist."""
        out = Collected()
        try:
            files = report_files(Path(self.fb.reports_dir))
        except OSError as exc:
            refuse(out, "", f"cannot list {self.fb.reports_dir}: {exc.strerror}")
            return out
        rows = {r.job_id: r for r in self.store.jobs_by_id(list(files))}
        raws = []
        cursors = dict(self.cursors)
        for job, path in sorted(files.items()):
            row = rows.get(job)
            if row is None:
                continue  # not a job of ours (yet): its reports wait
            uid = uid_of(row.user)
            if uid is None:
                refuse(out, job, f"report file refused: user {row.user!r} is unknown on this host")
                continue
            try:
                lines, cursors[job] = read_new(path, cursors.get(job, 0), uid)
            except ReportFileError as exc:
                refuse(out, job, f"report file refused: {exc}")
                continue
            raws += check_lines(job, lines, now, self.fb.report_every_s / 2, out)
            if row.state in TERMINAL_STATES and not lines:
                cursors.pop(job, None)
                try:
                    path.unlink()  # finished and read to the end
                except OSError:
                    pass
        for job in set(cursors) - set(files):
            cursors.pop(job)
        state = self.state
        if raws:
            history = load_history(self.store, raws, self.key_of, lambda n: gpu_type_of(self.cfg, n))
            state = fold_reports(state, raws, history, out)
        if state is not self.state or cursors != self.cursors:
            self.store.set_kv(KV_KEY, state_json(state, cursors))
            self.state, self.cursors = state, cursors
        return out

    def suspicious_news(self, out: Collected) -> dict[str, str]:
        """Refusals worth an event: suspicious ones not recorded for the job already."""
        news = {j: why for j, why in out.suspicious.items() if self._told.get(j) != why}
        self._told.update(news)
        return news

    # ---- deciding -------------------------------------------------------------------------------------
    def decision_profile(self) -> tuple[ThroughputProfile, SpeedTable]:
        """The profile the engine decides with (the configured one until a measurement is usable)."""
        if self._folded is None or self._folded[0] is not self.state:
            try:
                profile, table = folded_profile(self.profile, self.table, self.state, self.fb.min_reports,
                                                self.fb.max_speed)
            except Exception:  # noqa: BLE001 - a bad measurement must never stop scheduling
                log.exception("cannot lay the online measurements over the table; deciding with the table alone")
                profile, table = self.profile, self.table
            self._folded = (self.state, profile, table)
        return self._folded[1], self._folded[2]

    def sources(self, decision: RoundDecision, jobs: Mapping[str, Job], cluster: Cluster) -> dict[str, dict[str, Any]]:
        _, table = self.decision_profile()
        return decision_sources(decision, jobs, self.profile, table, self.state,
                                {n.name: n.gpu_type for n in cluster.nodes})

