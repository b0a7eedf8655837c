"""Latency of the admin commands as a user sees it: whole `tesserae` processes against a state DB.

The database is written through the daemon's store (its ORM rows and sessions), shaped like a daemon
that has run a while: 1,000 jobs (most finished), a few hundred rounds each with its decision JSON,
actions and events. Each command runs as a fresh subprocess, so interpreter start and imports count.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

GPUS_PER_NODE = 4
MODELS = ("resnet50", "vgg19", "dcgan", "pointnet", "GPT2-Medium")


def build_db(path: Path, jobs: int = 1000, rounds: int = 300, nodes: int = 64, seed: int = 0) -> dict[str, str]:
    """Write a state DB at ``path``; returns {"job": an active job id, "round": the last round id}."""
    from ..daemon.state.store import ActionRow, Base, EventRow, JobRow, PlacementRow, RoundRow, Store, dumps
    from ..model import PackedPair, PendingJob, PendingReason, Placement, RoundDecision
    from ..model.codec import decision_to_json

    rng = random.Random(seed)
    if path.exists():
        path.unlink()
    store = Store.open(path)
    t0 = 1_700_000_000.0
    n_active = max(1, jobs * 3 // 10)
    ids = [str(1000 + i) for i in range(jobs)]
    active = ids[-n_active:]
    running = active[: min(len(active), nodes * GPUS_PER_NODE // 3)]
    job_rows = []
    for i, jid in enumerate(ids):
        state = ("RUNNING" if jid in running else "PENDING") if jid in active else \
            rng.choice(("COMPLETED", "COMPLETED", "COMPLETED", "FAILED", "CANCELLED"))
        job_rows.append(JobRow(job_id=jid, name=f"train-{rng.choice(MODELS)}-{i}", user=f"user{i % 17}",
                               num_gpus=rng.choice((1, 1, 2, 4)), model=rng.choice(MODELS), batch_size="64",
                               submit_time=t0 + 30 * i, state=state, slurm_state=state,
                               reason="" if state == "RUNNING" else "Resources: needs 4 GPUs; 2 free",
                               executed_time=rng.uniform(0, 20000), attained_service=rng.uniform(0, 50000),
                               nodes=f"node{i % nodes}" if state == "RUNNING" else "",
                               gpus=f"node{i % nodes}:0-1" if state == "RUNNING" else ""))
    store.add_rows(job_rows)
    slots: list[list[list[str]]] = [[[] for _ in range(GPUS_PER_NODE)] for _ in range(nodes)]
    for k, jid in enumerate(running):
        slots[(k // GPUS_PER_NODE) % nodes][k % GPUS_PER_NODE].append(jid)
    placement = Placement.from_lists({f"node{n}": g for n, g in enumerate(slots)})
    pending = tuple(PendingJob(j, PendingReason.RESOURCES, "needs 4 GPUs; 2 free") for j in active[len(running):])
    pairs = tuple(PackedPair(running[k], running[k + 1], 0.8, 0.7, "", None)
                  for k in range(0, min(20, len(running) - 1), 2))
    for rid in range(1, rounds + 1):  # a new database numbers its rounds from 1
        now = t0 + 30 * jobs + 360 * (rid - 1)
        dec = RoundDecision(placement, tuple(running[:3]), (), tuple(running[3:5]), tuple(running[5:]), pairs, pending,
                            {}, {j: 1.0 for j in running})
        body = {**decision_to_json(dec), "order": list(active), "sources": {}}
        store.add_rows([RoundRow(
            round_id=rid, started_at=now, finished_at=now + 2.0, policy="tesserae-t", status="applied",
            decision_json=dumps(body), scheduling_ms=3.0, placement_ms=2.0, packing_ms=1.5, migration_ms=0.5,
            jobs_active=len(active), running=len(running), started=3, migrated=2, kept=len(running) - 5,
            packed_pairs=len(pairs), pending=len(pending))])
        rows: list[Base] = []  # rows that name the round: written after it
        for k, jid in enumerate(running[:5]):
            rows.append(PlacementRow(round_id=rid, job_id=jid, gpus=f"node{k}:0-1", speed=1.0))
            rows.append(ActionRow(round_id=rid, seq=k, job_id=jid, kind="start" if k < 3 else "migrate",
                                  status="done", detail=dumps({"gpus": f"node{k}:0-1"}), created_at=now,
                                  finished_at=now + 1))
        rows.append(EventRow(time=now, kind="round", job_id=running[0], round_id=rid, message="applied"))
        store.add_rows(rows)
    store.close()
    return {"job": running[0] if running else active[0], "round": str(rounds)}


@dataclass(frozen=True)
class Timing:
    label: str
    argv: tuple[str, ...]
    median_s: float
    runs: tuple[float, ...]


def commands(db: Path, job: str, round_arg: str) -> list[tuple[str, list[str]]]:
    d = ["--db", str(db)]
    return [("--help", ["--help"]), ("jobs", ["jobs", *d]), ("jobs --all --json", ["jobs", "--all", "--json", *d]),
            ("rounds", ["rounds", *d]),
            (f"round show {round_arg}", ["round", "show", round_arg, *d]), (f"explain {job}", ["explain", job, *d])]


def tesserae_argv() -> list[str]:
    """The installed `tesserae` console script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("tesserae")
    if script.exists():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "tesserae_slurm.cli.main"]


def measure(argv: Sequence[str], repeats: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        p = subprocess.run(list(argv), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[2:])} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return times


def run(db: Path, repeats: int = 5, checkout: str | None = None, jobs: int = 1000, rounds: int = 300,
        progress: Callable[[str], None] | None = None) -> list[Timing]:
    """Median wall time of each command; ``checkout``: run that source tree's code (PYTHONPATH) instead."""
    info = build_db(db, jobs, rounds)
    env = dict(os.environ)
    if checkout:
        env["PYTHONPATH"] = str(Path(checkout).resolve()) + os.pathsep + env.get("PYTHONPATH", "")
    base = tesserae_argv()
    round_arg = "last"
    probe = subprocess.run([*base, "round", "show", "last", "--db", str(db)], env=env, capture_output=True)
    if probe.returncode != 0:  # a tree from before `round show last`: ask for the same round by number
        round_arg = info["round"]
    out = []
    for label, args in commands(db, info["job"], round_arg):
        if progress:
            progress(label)
        argv = (*base, *args)
        measure(argv, 1, env)  # warm the page cache and .pyc files; not counted
        times = measure(argv, repeats, env)
        out.append(Timing(label, tuple(args), statistics.median(times), tuple(times)))
    return out
