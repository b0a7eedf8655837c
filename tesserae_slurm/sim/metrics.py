"""Simulation results and the metrics users compare schedulers by (avg JCT, makespan, FTF, ...)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    num_gpus: int
    model: str
    submit_time: float
    start_time: float  # first time placed
    finish_time: float
    duration: float  # isolated run time on the reference GPU (trace), seconds
    preemptions: int
    migrations: int
    rounds_packed: int
    rounds_run: int
    avg_contention: float  # mean active jobs per GPU over the job's life (for the FTF ratio)
    packed_s: float = 0.0  # seconds computed next to a partner
    work_done: float = 0.0  # reference seconds of work done (= duration once finished)
    shifts: int = 0  # migrations between GPUs of its own node(s)
    oscillations: int = 0  # migrations back to GPUs it had left within the last rounds (A -> B -> A)

    @property
    def jct(self) -> float:
        return self.finish_time - self.submit_time

    @property
    def ftf(self) -> float:
        """Finish-time fairness rho = JCT / (T_isolated x max(1, c)) (policies.md §9).

        T_isolated is the job's duration alone; c the mean number of active jobs per GPU over its
        life, so ``T_isolated x max(1, c)`` is its finish time with a fair 1/N share of the cluster
        (Shockwave's "themis" variant). rho <= 1: at least as good as a fair share.
        """
        return self.jct / (self.duration * max(1.0, self.avg_contention))


@dataclass(frozen=True)
class RoundRecord:
    time: float
    active: int
    running: int
    packed_pairs: int
    migrations: int
    preemptions: int
    busy_gpus: int  # GPUs holding at least one job at the start of the round
    scheduling_ms: float  # policy ranking
    placement_ms: float
    packing_ms: float
    migration_ms: float
    busy_gpu_s: float = 0.0  # GPU-seconds a GPU held an unfinished job (exact, finishes inside the round)
    finished: int = 0
    infeasible_pairs: int = 0  # packed pairs the decision thought fit that run out of memory in truth
    reused: bool = False  # nothing changed since last round: last decision kept, the engine not called

    @property
    def decision_ms(self) -> float:
        return self.scheduling_ms + self.placement_ms + self.packing_ms + self.migration_ms


STAGES = ("scheduling", "placement", "packing", "migration")


@dataclass(frozen=True)
class SimResult:
    policy: str
    trace: str
    cluster: str
    round_duration: float
    seed: int
    jobs: tuple[JobRecord, ...]
    rounds: tuple[RoundRecord, ...]
    total_gpus: int
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def avg_jct(self) -> float:
        return statistics.fmean(j.jct for j in self.jobs) if self.jobs else 0.0

    @property
    def makespan(self) -> float:
        """First submission to last completion."""
        if not self.jobs:
            return 0.0
        return max(j.finish_time for j in self.jobs) - min(j.submit_time for j in self.jobs)

    @property
    def migrations(self) -> int:
        return sum(r.migrations for r in self.rounds)

    @property
    def preemptions(self) -> int:
        return sum(r.preemptions for r in self.rounds)

    @property
    def moves_per_job(self) -> float:
        """Migrations and preemptions per job."""
        return (self.migrations + self.preemptions) / len(self.jobs) if self.jobs else 0.0

    def gpu_utilization(self) -> float:
        """Busy GPU-seconds over the cluster's GPU-seconds, from the first round to the last finish."""
        if not self.rounds or not self.jobs:
            return 0.0
        rounds = [r for r in self.rounds if r.active]
        span = len(rounds) * self.round_duration
        last = self.rounds[-1]
        span -= last.time + self.round_duration - max(j.finish_time for j in self.jobs)
        return sum(r.busy_gpu_s for r in rounds) / (self.total_gpus * span) if span > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        ftf = np.array([j.ftf for j in self.jobs]) if self.jobs else np.zeros(1)
        jct = np.array([j.jct for j in self.jobs]) if self.jobs else np.zeros(1)
        decided = [r for r in self.rounds if not r.reused]  # decision-time statistics: engine calls only
        dec = np.array([r.decision_ms for r in decided]) if decided else np.zeros(1)

        def stage(k: str, q: float) -> float:
            return float(np.percentile([getattr(r, f"{k}_ms") for r in decided], q)) if decided else 0.0

        return {
            "policy": self.policy, "trace": self.trace, "cluster": self.cluster,
            "round_s": self.round_duration, "seed": self.seed, "jobs": len(self.jobs),
            "avg_jct_s": self.avg_jct, "median_jct_s": float(np.median(jct)),
            "p99_jct_s": float(np.percentile(jct, 99)), "makespan_s": self.makespan,
            "migrations": self.migrations, "preemptions": self.preemptions, "moves_per_job": self.moves_per_job,
            "same_node_shifts": sum(j.shifts for j in self.jobs),
            "oscillations": sum(j.oscillations for j in self.jobs),
            "ftf": {"worst": float(ftf.max()), "median": float(np.median(ftf)), "mean": float(ftf.mean()),
                    "p90": float(np.percentile(ftf, 90)), "share_above_1": float(np.mean(ftf > 1.0))},
            "gpu_utilization": self.gpu_utilization(),
            "packed_share": (sum(j.packed_s for j in self.jobs) / sum(j.jct for j in self.jobs)) if self.jobs else 0.0,
            "decision_ms": {"median": float(np.median(dec)), "p99": float(np.percentile(dec, 99)),
                            "max": float(dec.max()),
                            "stages_median": {k: stage(k, 50) for k in STAGES},
                            "stages_p99": {k: stage(k, 99) for k in STAGES}},
            "rounds": len(self.rounds), "decided_rounds": len(decided),
            "infeasible_pair_rounds": sum(r.infeasible_pairs for r in self.rounds),
            "settings": self.settings,
        }

    def to_json(self) -> dict[str, Any]:
        out = self.summary()
        out["per_job"] = [
            {"id": j.job_id, "num_gpus": j.num_gpus, "model": j.model, "submit": j.submit_time,
             "start": j.start_time, "finish": j.finish_time, "duration": j.duration, "jct": j.jct,
             "ftf": j.ftf, "preemptions": j.preemptions, "migrations": j.migrations, "shifts": j.shifts,
             "oscillations": j.oscillations, "rounds_packed": j.rounds_packed, "rounds_run": j.rounds_run,
             "packed_s": j.packed_s}
            for j in self.jobs
        ]
        return out


def cdf(values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    xs = np.sort(np.asarray(values, dtype=float))
    return xs, np.arange(1, len(xs) + 1) / max(1, len(xs))
