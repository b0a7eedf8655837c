"""What the profiler runs, and the results file that makes it resumable.

The plan: every job alone, then every unordered pair of jobs (a job with itself included; two LLMs
excepted, which the engine never packs and the CSV format cannot hold). A pair runs as the device
lets two jobs share it: as clients of one MPS server, time-sliced (a GPU without MPS: what two
users' jobs get), or time-sharing CPU cores; a time-sliced pair has its own run id, so one results
file holds a pair measured both ways (``--mps off --resume`` after an MPS profile). Each run has a stable id, and
each finished run is appended to a JSON-lines results file at once (flushed), so an interrupted
profile loses at most the run in progress; ``--resume`` skips the ids already there. The first line
holds the settings; resuming with different settings is refused (the numbers would not compare).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..model import InputError
from .zoo import ZOO, JobSpec

log = logging.getLogger(__name__)
FORMAT = "tesserae-profile-runs/1"
# how the jobs of a pair shared the device (RunRecord.sharing; "" for a job alone)
MPS, TIMESLICE, CPU = "mps", "timeslice", "cpu"


@dataclass(frozen=True, slots=True)
class PlannedRun:
    run_id: str
    jobs: tuple[JobSpec, ...]


def run_id(jobs: Sequence[JobSpec], sharing: str = MPS) -> str:
    if len(jobs) == 1:
        return f"alone {jobs[0].label}"
    return "pair " + " + ".join(j.label for j in jobs) + (" timesliced" if sharing == TIMESLICE else "")


def plan_runs(jobs: Sequence[JobSpec], sharing: str = MPS) -> list[PlannedRun]:
    """Isolated runs first (pairs are normalized by them), then pairs in a stable order, shared as
    ``sharing`` says (time-sliced pairs have run ids of their own)."""
    unique = list(dict.fromkeys(jobs))
    out = [PlannedRun(run_id([j]), (j,)) for j in unique]
    for i, a in enumerate(unique):
        for b in unique[i:]:
            if ZOO[a.model].llm and ZOO[b.model].llm:
                continue
            out.append(PlannedRun(run_id([a, b], sharing), (a, b)))
    return out


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One finished run: status, per job its median and window rates (steps/s) and peak memory."""

    run_id: str
    jobs: tuple[JobSpec, ...]
    status: str  # ok | oom | error
    throughput: tuple[float, ...] = ()
    windows: tuple[tuple[float, ...], ...] = ()
    peak_mib: tuple[float, ...] = ()
    message: str = ""
    alone: tuple[float, ...] = ()  # pairs: each job's median alone, measured right before the pair
    # pairs: how the two shared the device: mps (one MPS server's clients), timeslice (a GPU without
    # MPS), cpu (cores); "" alone, and in records written before this was kept
    sharing: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["jobs"] = [asdict(j) for j in self.jobs]
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> RunRecord:
        return RunRecord(str(d["run_id"]), tuple(JobSpec(**j) for j in d["jobs"]), str(d["status"]),
                         tuple(float(x) for x in d.get("throughput", ())),
                         tuple(tuple(float(x) for x in w) for w in d.get("windows", ())),
                         tuple(float(x) for x in d.get("peak_mib", ())), str(d.get("message", "")),
                         tuple(float(x) for x in d.get("alone", ())), str(d.get("sharing", "")))


class ResultsFile:
    """Append-only JSON lines: a settings header, then one record per finished run."""

    def __init__(self, path: str | Path, settings: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.settings = dict(settings)

    def load(self, resume: bool) -> dict[str, RunRecord]:
        """Records already there (when resuming); creates the file with its header otherwise."""
        if not self.path.exists():
            self._write_lines([{"format": FORMAT, "settings": self.settings}], "w")
            return {}
        if not resume:
            raise InputError(f"{self.path} exists: pass --resume to continue that profile, or choose another "
                             "results file")
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):  # a write cut short: the next append starts a fresh line
            self._write_lines([], "a", newline=True)
        lines = text.splitlines()
        try:
            header = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            header = {}
        if header.get("format") != FORMAT:
            raise InputError(f"{self.path}:1: not a tesserae profile results file (expected format {FORMAT})")
        diff = [k for k in sorted(set(self.settings) | set(header.get("settings", {})))
                if self.settings.get(k) != header["settings"].get(k)]
        if diff:
            k = diff[0]
            raise InputError(f"{self.path}: made with different settings ({k}: {header['settings'].get(k)!r} there, "
                             f"{self.settings.get(k)!r} now); use another results file")
        out: dict[str, RunRecord] = {}
        for n, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                rec = RunRecord.from_json(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("%s:%d: unreadable record (interrupted write?); that run is redone", self.path, n)
                continue
            out[rec.run_id] = rec
        return out

    def append(self, record: RunRecord) -> None:
        self._write_lines([record.to_json()], "a")

    def _write_lines(self, rows: Iterable[Mapping[str, Any]], mode: str, newline: bool = False) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open(mode, encoding="utf-8") as fh:
            if newline:
                fh.write("\n")
            for row in rows:
                fh.write(json.dumps(row) + "\n")
            fh.flush()
