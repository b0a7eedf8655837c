"""Benchmark: the daemon's job listing (observe's `list_jobs`) through the CLI backend and through
pyslurm, on a dev cluster of its own with many queued jobs. Needs a pyslurm built for the running
Slurm, so it runs inside the pyslurm lane's root (scripts/slurm-lane.sh, docs/slurm-versions.md):

    TESSERAE_ROOTS_DIR=... bash scripts/slurm-lane.sh 24.11 shell \\
        python benchmarks/observe_backends.py [--jobs 500] [--running 8] [--requeued 50] [--repeats 21]

Two states are timed: `--jobs` held jobs plus `--running` running ones, then the same after
`--requeued` of the held jobs were started and requeue-held, then held by an administrator (the
jobs whose reason code pyslurm hides under a description, which the pyslurm backend reads again
with squeue). Before timing, both listings must agree on every job. Not a test: it prints times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path

from tesserae_slurm.devcluster import DevCluster
from tesserae_slurm.slurm import SlurmBackend, SlurmJob, make_backend

PARTITION = "tesserae"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=500, help="held jobs queued (default 500)")
    ap.add_argument("--running", type=int, default=8, help="jobs running, 2 GPUs each (default 8)")
    ap.add_argument("--requeued", type=int, default=50, help="held jobs started, requeue-held, admin-held (default 50)")
    ap.add_argument("--repeats", type=int, default=21, help="listings timed per backend and state (default 21)")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=None, help="the cluster's directory (default: a temporary one)")
    args = ap.parse_args(argv)
    if min(args.jobs, args.running, args.requeued, args.repeats) < 0 or args.requeued > args.jobs:
        print("observe_backends: counts must be >= 0 and --requeued at most --jobs", file=sys.stderr)
        return 2
    root = args.dir or Path(tempfile.mkdtemp(prefix="tesserae-bench-observe-"))
    cluster = DevCluster(root, nodes=args.nodes, gpus_per_node=args.gpus, job_submit=False)
    cluster.up()
    try:
        env = cluster.env()
        cli, py = make_backend("cli", env), make_backend("pyslurm", env)
        major, minor = cli.slurm_version()
        print(f"Slurm {major}.{minor:02d}, {args.nodes} nodes x {args.gpus} GPUs, "
              f"backends: {type(cli).__name__}, {type(py).__name__}")
        t0 = time.perf_counter()
        held = [_sbatch(env, i, hold=True) for i in range(args.jobs)]
        running = [_sbatch(env, args.jobs + i, hold=False) for i in range(args.running)]
        print(f"submitted {len(held)} held + {len(running)} running in {time.perf_counter() - t0:.1f}s")
        _wait(cli, lambda jobs: sum(j.state.value == "RUNNING" for j in jobs) >= min(args.running, _slots(args)))
        _report("held + running", cli, py, args.repeats)
        for job_id in held[: args.requeued]:
            _cycle(cli, job_id, env)
        _report(f"... + {args.requeued} requeue-held, then admin-held", cli, py, args.repeats)
    finally:
        cluster.down()
    return 0


def _slots(args: argparse.Namespace) -> int:
    return int(args.nodes) * int(args.gpus) // 2


def _sbatch(env: dict[str, str], i: int, *, hold: bool) -> int:
    argv = ["sbatch", "--parsable", "-p", PARTITION, "-J", f"bench{i}", "--gres=gpu:2", "--requeue",
            "-o", "/dev/null", *(["--hold"] if hold else []), "--wrap", "sleep 3600"]
    out = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
    return int(out.strip().split(";")[0])


def _cycle(cli: SlurmBackend, job_id: int, env: dict[str, str]) -> None:
    """Start a held job, requeue-hold it once it runs, then hold it as an administrator."""
    free = [n.name for n in cli.list_nodes(PARTITION) if n.gpus - n.gpus_used >= 2]
    if not free:  # make room: the first running job goes back to held
        victim = next(j for j in cli.list_jobs(PARTITION) if j.state.value == "RUNNING")
        cli.requeue_hold([victim.job_id])
        _wait(cli, lambda jobs: _state(jobs, victim.job_id) == "PENDING")
        free = [n.name for n in cli.list_nodes(PARTITION) if n.gpus - n.gpus_used >= 2]
    cli.place(job_id, [free[0]])
    cli.release([job_id])
    _wait(cli, lambda jobs: _state(jobs, job_id) == "RUNNING")
    cli.requeue_hold([job_id])
    _wait(cli, lambda jobs: _state(jobs, job_id) == "PENDING")
    cli.admin_hold([job_id])


def _state(jobs: tuple[SlurmJob, ...], job_id: int) -> str:
    return next((j.state.value for j in jobs if j.job_id == job_id), "")


def _wait(cli: SlurmBackend, done: Callable[[tuple[SlurmJob, ...]], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done(cli.list_jobs(PARTITION)):
        if time.monotonic() > deadline:
            raise SystemExit("observe_backends: the cluster did not reach the state in time")
        time.sleep(0.5)


def _report(label: str, cli: SlurmBackend, py: SlurmBackend, repeats: int) -> None:
    a, b = cli.list_jobs(PARTITION), py.list_jobs(PARTITION)
    diff = _differences(a, b)
    if diff:
        raise SystemExit(f"observe_backends: the listings differ ({len(diff)} jobs), e.g. {diff[:3]}")
    times: dict[str, list[float]] = {"cli": [], "pyslurm": []}
    for _ in range(repeats):  # interleaved, so a slow spell of the machine hits both
        for name, backend in (("cli", cli), ("pyslurm", py)):
            t = time.perf_counter()
            backend.list_jobs(PARTITION)
            times[name].append(time.perf_counter() - t)
    hidden = sum(1 for j in b if j.held and " " in j.reason)
    print(f"\n{label}: {len(a)} jobs, listings agree; {hidden} with the reason code under a description")
    for name, ts in times.items():
        print(f"  {name:8s} median {1000 * statistics.median(ts):7.1f} ms   min {1000 * min(ts):7.1f}   "
              f"max {1000 * max(ts):7.1f}   ({len(ts)} listings)")


def _differences(a: tuple[SlurmJob, ...], b: tuple[SlurmJob, ...]) -> list[tuple[int, str]]:
    """Jobs whose fields differ between the two listings, beyond what docs/slurm-versions.md names."""
    by_id = {j.job_id: j for j in b}
    out: list[tuple[int, str]] = []
    for j in a:
        k = by_id.get(j.job_id)
        if k is None:
            out.append((j.job_id, "missing from pyslurm"))
            continue
        # state_flags: pyslurm gives one state name; state_reason: known for held jobs only
        fields = [f for f, x, y in zip(SlurmJob.__dataclass_fields__, astuple(j), astuple(k), strict=True)
                  if x != y and f not in ("state_flags",) and not (f == "state_reason" and not j.held)]
        if fields:
            out.append((j.job_id, ",".join(f"{f}: {getattr(j, f)!r} vs {getattr(k, f)!r}" for f in fields)))
    out.extend((jid, "missing from the CLI") for jid in set(by_id) - {j.job_id for j in a})
    return out


if __name__ == "__main__":
    sys.exit(main())
