"""What retention buys: database size and admin command latency after many rounds, with and without it.

The database is written through the daemon's store the way the daemon fills it (a round row with its
decision JSON, a placement row per placed job, a few actions, Slurm calls and events per round; jobs
arriving and ending), many rounds per transaction so 10,000 rounds take minutes, not hours. With
retention, ``retention.prune`` runs after every round exactly as the daemon runs it between rounds,
and its time per call is reported (it must stay far below a round).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .cli_latency import measure, tesserae_argv

if TYPE_CHECKING:  # SQLAlchemy and the daemon load only when the benchmark runs
    from ..site.config import RetentionSection

GPUS_PER_NODE = 4
ROUND_S = 360.0


@dataclass(frozen=True)
class Result:
    label: str
    rounds_kept: int
    jobs_kept: int
    size_mb: float
    build_s: float
    prune_ms_median: float
    prune_ms_max: float
    commands: dict[str, float]  # label -> median seconds


def build(path: Path, rounds: int, jobs: int, nodes: int, retention: RetentionSection | None,
          progress: Callable[[str], None] | None = None) -> tuple[list[float], dict[str, str]]:
    """Fill ``path``; returns prune times (s) per round and {"job", "round"} for the commands."""
    from ..daemon.state.journal import Journal
    from ..daemon.state.retention import prune
    from ..daemon.state.store import (
        ActionRow,
        Base,
        EventRow,
        JobRow,
        JobUpdate,
        PlacementRow,
        RoundRow,
        SlurmCallRow,
        Store,
        dumps,
    )

    if path.exists():
        path.unlink()
    store = Store.open(path)
    journal = Journal(store)
    t0 = 1_700_000_000.0
    gpus = nodes * GPUS_PER_NODE
    ended_per_round = 2
    active = [str(100000 + i) for i in range(jobs)]
    next_id = 100000 + jobs
    store.add_rows(JobRow(job_id=j, name=f"train-{j}", user=f"user{i % 17}", num_gpus=1, model="resnet50",
                          batch_size="64", submit_time=t0, state="PENDING") for i, j in enumerate(active))
    prune_s: list[float] = []
    chunk = 50
    rid = 0
    for start in range(0, rounds, chunk):
        round_rows: list[RoundRow] = []
        rows: list[Base] = []  # rows that name a round: written after the rounds
        ended: dict[str, JobUpdate] = {}
        for r in range(start, min(rounds, start + chunk)):
            now = t0 + ROUND_S * r
            rid = r + 1  # a new database numbers its rounds from 1
            running = active[:gpus]
            body = {"placement": {f"node{n}": [[j] for j in running[n * 4:(n + 1) * 4]] for n in range(nodes)},
                    "started": running[:3], "preempted": running[3:5], "migrated": [], "kept": running[5:],
                    "pending": [{"job": j, "reason": "resources", "detail": "needs 1 GPU; 0 free"}
                                for j in active[gpus:]],
                    "order": active, "sources": {}}
            round_rows.append(RoundRow(round_id=rid, started_at=now, finished_at=now + 2.0, policy="tesserae-t",
                                       status="applied", decision_json=dumps(body), jobs_active=len(active),
                                       running=len(running), started=3, preempted=2, kept=len(running) - 5,
                                       pending=len(active) - len(running)))
            rows += [PlacementRow(round_id=rid, job_id=j, gpus=f"node{k // 4}:{k % 4}", speed=1.0)
                     for k, j in enumerate(running)]
            rows += [ActionRow(round_id=rid, seq=k, job_id=j, kind="start" if k < 3 else "preempt", status="done",
                               detail=dumps({"gpus": "node0:0"}), created_at=now, finished_at=now + 1)
                     for k, j in enumerate(running[:5])]
            rows += [SlurmCallRow(round_id=rid, time=now, method="release", job_ids=j, ms=12.0) for j in running[:5]]
            rows.append(EventRow(time=now, kind="round", job_id="", round_id=rid, message="applied"))
            # jobs end and new ones arrive: the oldest running ones finish this round
            gone, active = active[:ended_per_round], active[ended_per_round:]
            ended.update({j: JobUpdate(state="COMPLETED", finished_at=now, slurm_state="COMPLETED") for j in gone})
            new = [str(next_id + k) for k in range(ended_per_round)]
            next_id += ended_per_round
            rows += [JobRow(job_id=j, name=f"train-{j}", user="user1", num_gpus=1, model="resnet50",
                            batch_size="64", submit_time=now, state="PENDING") for j in new]
            active += new
        store.add_rows(round_rows)
        store.add_rows(rows)
        journal.update_jobs(ended)
        if retention is not None:  # as the daemon does: between rounds (here: after each chunk's rounds)
            for r in range(start, min(rounds, start + chunk)):
                t = time.perf_counter()
                prune(store, retention, t0 + ROUND_S * r + 3.0)
                prune_s.append(time.perf_counter() - t)
        if progress and (start // chunk) % 20 == 0:
            progress(f"{start + chunk} rounds")
    store.close()
    return prune_s, {"job": active[0], "round": str(rid)}


def run(workdir: Path, rounds: int = 10_000, jobs: int = 1_000, nodes: int = 64, repeats: int = 3,
        retention: RetentionSection | None = None, progress: Callable[[str], None] | None = None) -> list[Result]:
    import sqlite3

    from ..site.config import RetentionSection

    keep = retention or RetentionSection(rounds_days=7.0, jobs_days=7.0)
    out = []
    for label, ret in (("no retention", None), (f"rounds_days={keep.rounds_days:g} jobs_days={keep.jobs_days:g}"
                                                f" max_rounds={keep.max_rounds}", keep)):
        db = workdir / f"state-{'pruned' if ret else 'full'}.db"
        if progress:
            progress(f"building {label}")
        t = time.perf_counter()
        prune_s, info = build(db, rounds, jobs, nodes, ret, progress)
        build_s = time.perf_counter() - t
        with sqlite3.connect(db) as c:
            kept_rounds = c.execute("select count(*) from rounds").fetchone()[0]
            kept_jobs = c.execute("select count(*) from jobs").fetchone()[0]
        env = dict(os.environ)
        base = tesserae_argv()
        cmds = {"jobs": ["jobs"], "rounds": ["rounds"], "round show last": ["round", "show", "last"],
                f"explain {info['job']}": ["explain", info["job"]]}
        medians = {}
        for name, args in cmds.items():
            argv = (*base, *args, "--db", str(db))
            measure(argv, 1, env)  # warm the page cache, not counted
            medians[name] = statistics.median(measure(argv, repeats, env))
        out.append(Result(label, kept_rounds, kept_jobs, db.stat().st_size / 1e6, build_s,
                          1000 * statistics.median(prune_s) if prune_s else 0.0,
                          1000 * max(prune_s) if prune_s else 0.0, medians))
    return out


def report(results: list[Result], rounds: int, jobs: int, nodes: int, repeats: int) -> str:
    lines = [f"{rounds} rounds at {jobs} active jobs, {4 * nodes} GPUs; admin commands: median of {repeats}"]
    for r in results:
        lines.append(f"\n{r.label}: {r.rounds_kept} rounds and {r.jobs_kept} job rows kept, database "
                     f"{r.size_mb:.1f} MB (built in {r.build_s:.0f} s)"
                     + (f"; prune per round median {r.prune_ms_median:.2f} ms, max {r.prune_ms_max:.1f} ms"
                        if r.prune_ms_max else ""))
        lines += [f"  tesserae {name:<22} {s:.3f} s" for name, s in r.commands.items()]
    return "\n".join(lines)
