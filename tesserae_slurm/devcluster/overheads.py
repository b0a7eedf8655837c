"""The overheads a real run on the dev cluster had, read from what its run directory keeps: the values
behind ``sim/overheads.py``'s ``REAL_DAEMON`` and ``REAL_PLAIN`` (wall seconds; docs/simulator.md,
"Overheads of a real run").

Daemon runs, each start by the round that released it: a start at a round counts from the round's start
to its payload's ``start`` event, as a launch when its GPUs were free, as a start onto vacated GPUs when
a job the round stopped held them (its ``checkpoint`` event fell in between), and apart when the round
migrated a job (the migrated jobs and the starts onto vacated GPUs of such a round: the daemon starts
them together once every stop of the round has ended, and a migrated job's stop ends only when Slurm has
requeued it); a start between rounds counts from the later of the job's submission and the moment its
GPUs came free (the last ``done`` or ``checkpoint`` event of a run on one of them) to its payload's
``start``; a stop is the checkpoint signal to the stop's end (``stop_seconds``: the job requeue-held,
its GPUs free); rounds are the rounds' own durations and periods. Plain runs: every start counts as a
start between rounds does (Slurm starts jobs when they fit).

The model's values (``RunOverheads.model``) are *means*: a job's JCT, and the avg JCT, add up every
delay it meets, so a long tail counts as much as it costs. A start between rounds that came more than
a round after its GPUs came free waited for the policy, not for Slurm (the simulator makes that choice
itself), so that mean is of the starts within a round.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sim.overheads import Overheads
from .runs import _read, read_events, stop_seconds


@dataclass(frozen=True)
class RunOverheads:
    """Wall seconds, one entry per start, stop and round of one real run."""

    launches: tuple[float, ...] = ()  # starts at rounds onto free GPUs (daemon) or by Slurm (plain)
    between: tuple[float, ...] = ()  # starts between rounds (daemon): GPUs free or submission -> running
    stops: tuple[float, ...] = ()  # signal -> requeue-held
    rounds: tuple[float, ...] = ()  # the daemon's rounds (kind round), started -> finished
    periods: tuple[float, ...] = ()  # one round's start to the next's
    vacated: tuple[float, ...] = ()  # starts at rounds onto GPUs the round's stops freed, rounds that migrate none
    migrating: tuple[float, ...] = ()  # migrated jobs and starts onto vacated GPUs in rounds that migrate

    @staticmethod
    def median(xs: Sequence[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    @staticmethod
    def mean(xs: Sequence[float]) -> float:
        return statistics.fmean(xs) if xs else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"launches": len(self.launches), "launch_median_s": self.median(self.launches),
                "launch_mean_s": self.mean(self.launches),
                "between": len(self.between), "between_median_s": self.median(self.between),
                "between_mean_s": self.mean(self.between),
                "stops": len(self.stops), "stop_median_s": self.median(self.stops),
                "vacated": len(self.vacated), "vacated_mean_s": self.mean(self.vacated),
                "migrating": len(self.migrating), "migrating_mean_s": self.mean(self.migrating),
                "rounds": len(self.rounds), "round_median_s": self.median(self.rounds),
                "period_mean_s": self.mean(self.periods)}

    def model(self, round_s: float) -> Overheads:
        """The simulator's overheads of a daemon run with rounds of ``round_s`` wall seconds: means of
        what each of its delays was (module docstring); a delay with no start to measure it is 0."""
        def mean(xs: Sequence[float]) -> float:
            return statistics.fmean(xs) if xs else 0.0

        launch = mean(self.launches)
        return Overheads(launch_s=launch, stop_s=max(0.0, mean(self.vacated) - launch) if self.vacated else 0.0,
                         between_s=mean([b for b in self.between if b <= round_s]),
                         round_over_s=max(0.0, mean(self.periods) - round_s) if self.periods else 0.0,
                         migrate_s=max(0.0, mean(self.migrating) - launch) if self.migrating else None)


Start = tuple[float, str, str, frozenset[str]]  # (time, Slurm id, node list, GPUs) of a payload's start
End = tuple[float, str, str, frozenset[str], bool]  # (time, Slurm id, node list, GPUs, a checkpoint) of a run's end


def _starts_and_ends(jobs: Path) -> tuple[list[Start], list[End]]:
    starts: list[Start] = []
    ends: list[End] = []
    for p in sorted(jobs.glob("events-*.jsonl")):
        job = p.stem.removeprefix("events-")
        for e in read_events(p):
            gpus = frozenset(str(e.get("gpus", "")).split(","))
            if e.get("event") == "start":
                starts.append((float(e["time"]), job, str(e.get("nodelist", "")), gpus))
            elif e.get("event") in ("done", "checkpoint"):
                ends.append((float(e["time"]), job, str(e.get("nodelist", "")), gpus, e.get("event") == "checkpoint"))
    return starts, ends


def _since_free(start: Start, ends: Sequence[End], submitted: float) -> float:
    """Seconds from the later of the submission and the last end of a run on one of the start's GPUs."""
    t, _, nodes, gpus = start
    return t - max([submitted, *(d for d, _, n, g, _ in ends if d <= t and n == nodes and g & gpus)])


def daemon_overheads(workdir: Path, submitted: Mapping[str, float]) -> RunOverheads:
    """A daemon run's launches, stops and rounds from its state database and its jobs' events;
    ``submitted``: Slurm id -> submission (wall clock)."""
    db = workdir / "state.db"
    rounds = {int(r): (float(s), float(f) if f is not None else None, k) for r, s, f, k in
              _read(db, "SELECT round_id, started_at, finished_at, kind FROM rounds")}
    releases: dict[str, list[tuple[float, int]]] = {}
    for rid, when, jobs in _read(db, "SELECT round_id, time, job_ids FROM slurm_calls WHERE method = 'release' "
                                     "AND ok AND round_id IS NOT NULL"):
        for j in str(jobs).split(","):
            releases.setdefault(j, []).append((float(when), int(rid)))
    starts, ends = _starts_and_ends(workdir / "jobs")
    between: list[float] = []
    at_rounds: list[tuple[int, str, float]] = []  # (round, how, seconds from its start)
    for st in starts:
        t, job, nodes, gpus = st
        before = [(w, r) for w, r in releases.get(job, ()) if w <= t]
        if not before:
            continue
        _, rid = max(before)
        if rid not in rounds:
            continue
        began, _, kind = rounds[rid]
        if kind == "start":
            if job in submitted:
                between.append(_since_free(st, ends, submitted[job]))
            continue
        stopped = [(j, n, g) for d, j, n, g, ckpt in ends if ckpt and began <= d <= t]
        how = ("migrated" if any(j == job for j, _, _ in stopped) else
               "vacated" if any(n == nodes and g & gpus for _, n, g in stopped) else "free")
        at_rounds.append((rid, how, t - began))
    migrating_rounds = {rid for rid, how, _ in at_rounds if how == "migrated"}
    launches = [s for _, how, s in at_rounds if how == "free"]
    vacated = [s for rid, how, s in at_rounds if how == "vacated" and rid not in migrating_rounds]
    migrating = [s for rid, how, s in at_rounds if how != "free" and rid in migrating_rounds]
    stops = [s for ss in stop_seconds(db, sorted({s[1] for s in starts})).values() for s in ss]
    kept = [f - s for s, f, k in rounds.values() if k == "round" and f is not None]
    began_all = sorted(s for s, _, k in rounds.values() if k == "round")
    return RunOverheads(tuple(launches), tuple(between), tuple(stops), tuple(kept),
                        tuple(b - a for a, b in zip(began_all, began_all[1:])), tuple(vacated), tuple(migrating))


def plain_overheads(workdir: Path, submitted: Mapping[str, float]) -> RunOverheads:
    """A plain run's launches: ``submitted`` is Slurm id -> submission (wall clock)."""
    starts, done = _starts_and_ends(workdir / "jobs")
    return RunOverheads(tuple(_since_free(st, done, submitted[st[1]]) for st in starts if st[1] in submitted))
