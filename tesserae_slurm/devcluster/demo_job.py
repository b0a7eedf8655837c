"""The payload of `tesserae devcluster compare` and `tesserae bench responsive`: a torch-free toy job
that sleeps its steps.

    python demo_job.py --out DIR --steps N --step-time S [--checkpoint-s C]

Standard library only: the commands copy this file beside their jobs and run it as a script, so it is
the same payload whichever checkout's daemon and launcher run it. It resumes from its checkpoint
(``DIR/ckpt-<job>.json``), counts steps, and on the checkpoint signal (USR1) or TERM saves its step
(taking ``C`` seconds, as a real checkpoint takes time) and exits; under the daemon `tesserae launch`
forwards the signal and outlives it until the requeue-hold (docs/daemon.md "Job side"). Every run
appends JSON events to ``DIR/events-<job>.jsonl``: ``start`` (with the run's node list, node count,
restart count and GPUs), ``checkpoint`` and ``done``, each with its wall time. The fake GPUs do nothing,
so a step takes the same time wherever the job runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

_stop = False


def _on_signal(_signum: int, _frame: object) -> None:
    global _stop
    _stop = True


def log_event(path: Path, event: str, step: int) -> None:
    env = os.environ
    fields = {
        "event": event,
        "step": step,
        "time": time.time(),
        "job": env.get("SLURM_JOB_ID", ""),
        "restart": int(env.get("SLURM_RESTART_COUNT", "0") or 0),
        "nodelist": env.get("SLURM_JOB_NODELIST", ""),
        "num_nodes": int(env.get("SLURM_JOB_NUM_NODES", "1") or 1),
        "gpus": env.get("CUDA_VISIBLE_DEVICES", ""),
    }
    with path.open("a") as fh:
        fh.write(json.dumps(fields) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    p = argparse.ArgumentParser(prog="demo_job.py")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--steps", required=True, type=int)
    p.add_argument("--step-time", required=True, type=float)
    p.add_argument("--checkpoint-s", type=float, default=0.0, help="seconds a checkpoint takes (default 0)")
    a = p.parse_args(argv)
    job = os.environ.get("SLURM_JOB_ID", "x")
    ckpt, events = a.out / f"ckpt-{job}.json", a.out / f"events-{job}.jsonl"
    step = int(json.loads(ckpt.read_text())["step"]) if ckpt.exists() else 0
    log_event(events, "start", step)
    while step < a.steps and not _stop:
        time.sleep(a.step_time)
        step += 1
    if step < a.steps:
        time.sleep(a.checkpoint_s)
    tmp = ckpt.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step}))
    tmp.replace(ckpt)
    log_event(events, "done" if step >= a.steps else "checkpoint", step)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
