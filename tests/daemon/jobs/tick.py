#!/usr/bin/env python3
"""A light preemptible payload for the crash/outage tests (no torch): counts steps, checkpoints its
step on SIGUSR1/SIGTERM, resumes from it, and logs the same JSON events as jobscripts/toy_train.py.

After a checkpoint on the signal it does not exit but waits for the daemon's requeue-hold to end it
(its launcher then records nothing: the stop takes the grace). ``TICK_ON_SIGNAL=exit`` makes it exit 0
after its checkpoint instead (its launcher then waits for the requeue-hold and records the checkpoint, or,
told not to wait, ends the job), and ``TICK_ON_SIGNAL=ignore`` makes it ignore the checkpoint signal (a
stuck stop)."""

from __future__ import annotations

import signal

stop = False


def _stop(_signum: int, _frame: object) -> None:
    global stop
    stop = True


ON_SIGNAL = __import__("os").environ.get("TICK_ON_SIGNAL", "wait")
signal.signal(signal.SIGUSR1, signal.SIG_IGN if ON_SIGNAL == "ignore" else _stop)
signal.signal(signal.SIGTERM, _stop)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

KEYS = ("CUDA_VISIBLE_DEVICES", "SLURMD_NODENAME", "TESSERAE_ROUND", "TESSERAE_PARTNER", "TESSERAE_STRATEGY",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")


def log(path: Path, **fields: object) -> None:
    fields.update(time=time.time(), job=os.environ.get("SLURM_JOB_ID", ""))
    fields.update({k.lower(): os.environ[k] for k in KEYS if k in os.environ})
    with path.open("a") as fh:
        fh.write(json.dumps(fields) + "\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-time", type=float, default=0.1)
    p.add_argument("--out", required=True)
    p.add_argument("extra", nargs="*", help="logged verbatim (tests of argument passing)")
    a = p.parse_args()
    job = os.environ.get("SLURM_JOB_ID", "x")
    state, events = Path(a.out) / f"ckpt-{job}.json", Path(a.out) / f"events-{job}.jsonl"
    step = json.loads(state.read_text())["step"] if state.exists() else 0
    log(events, event="start", step=step, argv=sys.argv[1:])
    from tesserae_slurm.harness.report import ThroughputReporter  # online feedback, when the daemon asks
    reporter = ThroughputReporter.from_env()
    while step < a.steps and not stop:
        time.sleep(a.step_time)
        step += 1
        if reporter is not None:
            reporter.step()
        if step % 10 == 0:
            log(events, event="progress", step=step)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step}))
    tmp.replace(state)
    log(events, event="done" if step >= a.steps else "checkpoint", step=step)
    if step < a.steps and ON_SIGNAL == "wait":
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the requeue-hold's SIGTERM ends the wait at once
        while True:
            time.sleep(1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
