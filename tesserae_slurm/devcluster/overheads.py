"""The overheads a real run on the dev cluster had, read from what its run directory keeps: the values
behind ``sim/overheads.py``'s ``REAL_DAEMON`` and ``REAL_PLAIN`` (wall seconds; docs/simulator.md,
"Overheads of a real run").

Daemon runs: a round's start's launch is the time from the start of the round that released the job
to its payload's ``start`` event, for rounds that stopped no job (a stop's wait is measured apart); a
start between rounds counts from the later of the job's submission and the moment its GPUs came free
(the last ``done`` or ``checkpoint`` event of a run on one of them) to its payload's ``start``; a stop
is the checkpoint signal to the stop's end (``stop_seconds``: the job requeue-held, its GPUs free);
rounds are the rounds' own durations and periods. Plain runs: every start counts as a start between
rounds does (Slurm starts jobs when they fit).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .runs import _read, read_events, stop_seconds


@dataclass(frozen=True)
class RunOverheads:
    """Wall seconds, one entry per start, stop and round of one real run."""

    launches: tuple[float, ...] = ()  # starts at rounds (daemon) or by Slurm (plain)
    between: tuple[float, ...] = ()  # starts between rounds (daemon): GPUs free or submission -> running
    stops: tuple[float, ...] = ()
    rounds: tuple[float, ...] = ()  # the daemon's rounds (kind round), started -> finished
    periods: tuple[float, ...] = ()  # one round's start to the next's

    @staticmethod
    def median(xs: Sequence[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"launches": len(self.launches), "launch_median_s": self.median(self.launches),
                "between": len(self.between), "between_median_s": self.median(self.between),
                "stops": len(self.stops), "stop_median_s": self.median(self.stops),
                "rounds": len(self.rounds), "round_median_s": self.median(self.rounds),
                "period_mean_s": statistics.fmean(self.periods) if self.periods else float("nan")}


Start = tuple[float, str, str, frozenset[str]]  # (time, Slurm id, node list, GPUs) of a payload's start


def _starts_and_ends(jobs: Path) -> tuple[list[Start], list[tuple[float, str, frozenset[str]]]]:
    starts: list[Start] = []
    done: list[tuple[float, str, frozenset[str]]] = []
    for p in sorted(jobs.glob("events-*.jsonl")):
        job = p.stem.removeprefix("events-")
        for e in read_events(p):
            gpus = frozenset(str(e.get("gpus", "")).split(","))
            if e.get("event") == "start":
                starts.append((float(e["time"]), job, str(e.get("nodelist", "")), gpus))
            elif e.get("event") in ("done", "checkpoint"):
                done.append((float(e["time"]), str(e.get("nodelist", "")), gpus))
    return starts, done


def _since_free(start: Start, done: Sequence[tuple[float, str, frozenset[str]]], submitted: float) -> float:
    """Seconds from the later of the submission and the last end of a run on one of the start's GPUs."""
    t, _, nodes, gpus = start
    return t - max([submitted, *(d for d, n, g in done if d <= t and n == nodes and g & gpus)])


def daemon_overheads(workdir: Path, submitted: Mapping[str, float]) -> RunOverheads:
    """A daemon run's launches, stops and rounds from its state database and its jobs' events;
    ``submitted``: Slurm id -> submission (wall clock)."""
    db = workdir / "state.db"
    rounds = {int(r): (float(s), float(f) if f is not None else None, k) for r, s, f, k in
              _read(db, "SELECT round_id, started_at, finished_at, kind FROM rounds")}
    stopping = {int(r) for (r,) in _read(db, "SELECT DISTINCT round_id FROM slurm_calls WHERE method = 'signal' "
                                             "AND round_id IS NOT NULL")}
    releases: dict[str, list[tuple[float, int]]] = {}
    for rid, when, jobs in _read(db, "SELECT round_id, time, job_ids FROM slurm_calls WHERE method = 'release' "
                                     "AND ok AND round_id IS NOT NULL"):
        for j in str(jobs).split(","):
            releases.setdefault(j, []).append((float(when), int(rid)))
    starts, done = _starts_and_ends(workdir / "jobs")
    launches: list[float] = []
    between: list[float] = []
    for st in starts:
        t, job = st[0], st[1]
        before = [(w, r) for w, r in releases.get(job, ()) if w <= t]
        if not before:
            continue
        _, rid = max(before)
        if rid not in rounds:
            continue
        if rounds[rid][2] == "start":
            if job in submitted:
                between.append(_since_free(st, done, submitted[job]))
        elif rid not in stopping:
            launches.append(t - rounds[rid][0])
    stops = [s for ss in stop_seconds(db, sorted({s[1] for s in starts})).values() for s in ss]
    kept = [f - s for s, f, k in rounds.values() if k == "round" and f is not None]
    began = sorted(s for s, _, k in rounds.values() if k == "round")
    return RunOverheads(tuple(launches), tuple(between), tuple(stops), tuple(kept),
                        tuple(b - a for a, b in zip(began, began[1:])))


def plain_overheads(workdir: Path, submitted: Mapping[str, float]) -> RunOverheads:
    """A plain run's launches: ``submitted`` is Slurm id -> submission (wall clock)."""
    starts, done = _starts_and_ends(workdir / "jobs")
    return RunOverheads(tuple(_since_free(st, done, submitted[st[1]]) for st in starts if st[1] in submitted))
