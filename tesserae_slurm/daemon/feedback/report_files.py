"""Online feedback in the daemon: read the throughput reports jobs append, check each against the
daemon's own records, and fold the accepted ones into the online state (``estimators/online.py``).

Trust: a job writes only its own report file, ``<feedback.reports_dir>/<job id>.jsonl``, in a shared
sticky directory; the daemon reads a file only when it is a regular file (no symlink) owned by the
job's Slurm user, at most ``MAX_BYTES`` per job per round, and takes nothing from a line but a
window of wall time and a step count. What the job ran with -- model, batch, GPU count, strategy,
partner (and that partner's strategy), GPU type -- comes from the daemon's records of the run the
line names (``round``) and of the rounds the window overlaps: a window during which the job was
moved, restarted or got a different partner is dropped. Speeds derived from reports are clamped
(``provenance.folded_profile``). So a user can misstate only how fast their own jobs ran.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pwd
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...estimators.entries import Endpoint
from ...estimators.online import OnlineState, ThroughputReport
from ...harness.report import REPORT_VERSION
from ...profiles import ProfileKey
from ..state.store import JobRow, Store

log = logging.getLogger(__name__)

MAX_BYTES = 64 * 1024  # read per job per round; the rest waits for the next round
MAX_STEPS_PER_S = 1e5
MAX_WINDOW_S = 86400.0
CLOCK_SKEW_S = 300.0  # a window may end this far in the daemon's future (compute nodes' clocks)


@dataclass(frozen=True)
class RawReport:
    """One line as the job wrote it, checked for form only."""

    job: str
    round_id: int
    t0: float
    t1: float
    steps: int

    @property
    def steps_per_s(self) -> float:
        return self.steps / (self.t1 - self.t0)


def parse_line(text: str, job: str, now: float, min_window_s: float) -> RawReport | str:
    """The report, or why the line is refused (one short phrase)."""
    try:
        body = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(body, dict) or body.get("v") != REPORT_VERSION:
        return f"not a version-{REPORT_VERSION} report"
    rnd, t0, t1, steps = body.get("round"), body.get("t0"), body.get("t1"), body.get("steps")
    if str(body.get("job", "")) != job:
        return "names another job"
    if not isinstance(rnd, int) or isinstance(rnd, bool) or rnd < 1:
        return "round must be a positive integer"
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        return "steps must be a positive integer"
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in (t0, t1)):
        return "t0 and t1 must be finite times"
    assert isinstance(t0, (int, float)) and isinstance(t1, (int, float))
    if not min_window_s <= t1 - t0 <= MAX_WINDOW_S:
        return f"window of {t1 - t0:.3g} s outside [{min_window_s:g}, {MAX_WINDOW_S:g}] s"
    if t1 > now + CLOCK_SKEW_S:
        return "window ends in the future"
    r = RawReport(job, rnd, float(t0), float(t1), steps)
    if r.steps_per_s > MAX_STEPS_PER_S:
        return f"{r.steps_per_s:.3g} steps/s is implausible"
    return r


class ReportFileError(Exception):
    """The file is not one the daemon may trust (link, not a regular file, wrong owner)."""


def read_new(path: Path, offset: int, owner_uid: int, max_bytes: int = MAX_BYTES) -> tuple[list[str], int]:
    """Complete lines appended since ``offset`` (at most ``max_bytes``) and the new offset.

    A file shorter than ``offset`` was replaced: it is read from the start."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return [], offset
    except OSError as exc:
        raise ReportFileError(f"cannot open ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReportFileError("not a regular file")
        if st.st_uid != owner_uid:
            raise ReportFileError(f"owned by uid {st.st_uid}, not by the job's user (uid {owner_uid})")
        if st.st_size < offset:
            offset = 0
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, max_bytes)
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    return data[:end].decode("utf-8", errors="replace").splitlines(), offset + end + 1


def uid_of(user: str) -> int | None:
    """The Slurm user's uid on this host; None when the name is unknown here (then no file is trusted)."""
    try:
        return pwd.getpwnam(user).pw_uid
    except (KeyError, TypeError):
        return None


# ---- attribution (pure) -------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One start of a job by the daemon (a done start / migrate-start action)."""

    round_id: int
    strategy: str
    gpus: str  # format_gpus of where it started


@dataclass(frozen=True)
class History:
    """What the daemon recorded, as attribution needs it."""

    rounds: Sequence[tuple[int, float, float]]  # (round id, started, finished) of rounds that decided, ascending
    placed: Mapping[tuple[int, str], tuple[str, str]]  # (round, job) -> (gpus, partner) in that decision
    runs: Mapping[str, Sequence[Run]]  # job -> its starts, ascending
    keys: Mapping[str, ProfileKey]  # job -> profile key (jobs the profile knows)
    gpu_type: Callable[[str], str]  # node -> GPU type
    run_start: Mapping[str, float] = field(default_factory=dict)  # job -> Slurm's start of its current run
    ended: Mapping[str, float] = field(default_factory=dict)  # job -> Slurm's end of a job that finished


def covering_rounds(rounds: Sequence[tuple[int, float, float]], t0: float, t1: float) -> list[int]:
    """Rounds whose decision may have been in force at some time in [t0, t1].

    A round's decision holds from when it started until the *next* round's actions were applied
    (its finish): the changes of a round happen during its apply, so that stretch belongs to both."""
    out = []
    for i, (rid, start, _) in enumerate(rounds):
        end = rounds[i + 1][2] if i + 1 < len(rounds) else math.inf
        if start < t1 and end > t0:
            out.append(rid)
    return out


def attribute(r: RawReport, h: History) -> ThroughputReport | str:
    """The report with what the job ran with, from the daemon's records; or why it cannot be used."""
    runs = h.runs.get(r.job, ())
    run = next((x for x in runs if x.round_id == r.round_id), None)
    if run is None:
        return f"names round {r.round_id}, which did not start the job"
    started = next((t for rid, t, _ in h.rounds if rid == r.round_id), math.inf)
    covering = [rid for rid in covering_rounds(h.rounds, r.t0, r.t1) if rid >= r.round_id]
    if r.t0 < started or not covering:
        return "window starts before its run"
    if any(r.round_id < x.round_id <= covering[-1] for x in runs):
        return "the job was restarted within the window"
    partners = set()
    for rid in covering:
        placed = h.placed.get((rid, r.job))
        if placed is None or placed[0] != run.gpus:
            return f"not on its run's GPUs in round {rid}"
        partners.add(placed[1])
    if len(partners) != 1:
        return "its partner changed within the window"
    partner = partners.pop()
    key = h.keys.get(r.job)
    if key is None:
        return "the job is not in the profile"
    gpu = h.gpu_type(run.gpus.split(":", 1)[0])
    partner_ep = None
    if partner:
        pkey = h.keys.get(partner)
        prun = [x for x in h.runs.get(partner, ()) if x.round_id <= covering[0]]
        if pkey is None or not prun:
            return f"partner {partner} is not in the profile or was not started"
        # The round that packed them was applied seconds before the partner's process began to compute
        # (its launch, and in a round that migrates the stops first): until then the job ran alone.
        since = h.run_start.get(partner)
        if since is None or r.t0 < since:
            return f"partner {partner} was not started by Slurm when the window began"
        # A partner that finishes mid-round stays the job's partner in the records until the next round.
        if r.t1 > h.ended.get(partner, math.inf):
            return f"partner {partner} ended within the window"
        partner_ep = Endpoint(pkey, prun[-1].strategy)
    return ThroughputReport(gpu, Endpoint(key, run.strategy), partner_ep, r.steps_per_s)


@dataclass
class Collected:
    """One round's reading: reports folded, and refusals per job (the reason of its last one)."""

    folded: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    suspicious: dict[str, str] = field(default_factory=dict)  # refusals a well-behaved job never causes


BENIGN = ("partner changed", "restarted within", "not on its run's GPUs", "before its run", "not in the profile",
          "was not started", "ended within")


def refuse(out: Collected, job: str, why: str) -> None:
    out.refused[job] = why
    if not any(b in why for b in BENIGN):
        out.suspicious[job] = why


def check_lines(job: str, lines: Sequence[str], now: float, min_window_s: float, out: Collected) -> list[RawReport]:
    raws = []
    for text in lines:
        if text.strip():
            got = parse_line(text, job, now, min_window_s)
            if isinstance(got, str):
                refuse(out, job, got)
            else:
                raws.append(got)
    return raws


def fold_reports(state: OnlineState, raws: Sequence[RawReport], h: History, out: Collected) -> OnlineState:
    reports = []
    for raw in raws:
        got = attribute(raw, h)
        if isinstance(got, str):
            refuse(out, raw.job, got)
        else:
            reports.append(got)
    out.folded += len(reports)
    return state.fold(reports) if reports else state


def state_json(state: OnlineState, cursors: Mapping[str, int]) -> bytes:
    return json.dumps({"rows": state.rows(), "cursors": dict(cursors)}, separators=(",", ":")).encode()


def state_from_json(raw: bytes | None, alpha: float) -> tuple[OnlineState, dict[str, int]]:
    if raw is None:
        return OnlineState(alpha), {}
    body = json.loads(raw.decode())
    cursors = {str(k): int(v) for k, v in body.get("cursors", {}).items()}
    return OnlineState.from_rows(body.get("rows", []), alpha), cursors


# ---- reading the daemon's records (I/O) ------------------------------------------------------------
DECIDED = ("applied", "partial")  # rounds whose placements were acted on


def report_files(directory: Path) -> dict[str, Path]:
    """job id -> its report file (``<digits>.jsonl``); anything else in the directory is ignored."""
    out: dict[str, Path] = {}
    with os.scandir(directory) as it:
        for e in it:
            stem = e.name[:-len(".jsonl")]
            if e.name.endswith(".jsonl") and stem.isdigit():
                out[stem] = Path(e.path)
    return out


def load_history(store: Store, raws: Sequence[RawReport], key_of: Callable[[JobRow], ProfileKey | None],
                 gpu_type: Callable[[str], str]) -> History:
    """The rounds, placements, starts and profile keys the reports need, in a few queries."""
    first = min(r.round_id for r in raws)
    rounds = [(rid, t0, math.inf if t1 is None else t1) for rid, t0, t1 in store.round_spans(first, DECIDED)]
    needed = sorted({rid for r in raws for rid in covering_rounds(rounds, r.t0, r.t1)})
    jobs = sorted({r.job for r in raws})
    placed = {(row.round_id, row.job_id): (row.gpus, row.partner) for row in store.placements_of(needed, jobs)}
    everyone = sorted(set(jobs) | {p for _, p in placed.values() if p})
    runs: dict[str, list[Run]] = {}
    for a in store.done_actions(everyone, ("start", "migrate-start")):
        d = json.loads(a.detail or "{}")
        runs.setdefault(a.job_id, []).append(Run(a.round_id, str(d.get("strategy", "")), str(d.get("gpus", ""))))
    rows = store.jobs_by_id(everyone)
    keys = {row.job_id: key for row in rows if (key := key_of(row)) is not None}
    return History(rounds, placed, runs, keys, gpu_type,
                   {row.job_id: row.run_start for row in rows if row.run_start is not None},
                   {row.job_id: row.finished_at for row in rows if row.finished_at is not None})
