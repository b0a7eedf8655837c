#!/usr/bin/env python3
"""A small PyTorch training program that behaves like a real preemptible DL job.

Runs on CPU (or the GPUs in CUDA_VISIBLE_DEVICES), checkpoints at a step boundary when it gets
SIGUSR1 or SIGTERM and exits, resumes from the checkpoint on restart, and appends one JSON line per
event (start, progress, checkpoint, done) to --log so tests and users can follow it. When the daemon
asks for throughput reports (online feedback), it reports its steps/s through ThroughputReporter. The signal
handlers are installed before torch is imported: a job preempted while still starting up must
checkpoint (at step 0) rather than die.
"""

from __future__ import annotations

import signal

stop_requested = False


def _request_stop(signum: int, _frame: object) -> None:
    global stop_requested
    stop_requested = True


signal.signal(signal.SIGUSR1, _request_stop)
signal.signal(signal.SIGTERM, _request_stop)

import argparse  # noqa: E402 - after the handlers on purpose (see above)
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

try:  # online feedback: measured steps/s to the daemon (tesserae_slurm/harness/report.py)
    from tesserae_slurm.harness.report import ThroughputReporter  # noqa: E402
except ImportError:  # running where tesserae-slurm is not installed: no reports
    ThroughputReporter = None  # type: ignore[assignment,misc]


def log_event(path: Path, **fields: object) -> None:
    fields.update(time=time.time(), host=socket.gethostname(), job=os.environ.get("SLURM_JOB_ID", ""),
                  restart=int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0))
    for key in ("CUDA_VISIBLE_DEVICES", "SLURMD_NODENAME", "TESSERAE_ROUND", "TESSERAE_PARTNER", "TESSERAE_STRATEGY",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PIPE_DIRECTORY"):
        if key in os.environ:
            fields[key.lower()] = os.environ[key]
    with path.open("a") as fh:
        fh.write(json.dumps(fields) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=200, help="total training steps")
    p.add_argument("--step-time", type=float, default=0.05, help="extra seconds per step (simulates a bigger model)")
    p.add_argument("--checkpoint", required=True, help="checkpoint file (resumed from when present)")
    p.add_argument("--log", required=True, help="JSON-lines event log (appended)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--report-every", type=int, default=20, help="log a progress event every N steps")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("TOY_THREADS", "1")))  # a toy: one thread, many jobs per core
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ckpt, log = Path(args.checkpoint), Path(args.log)
    step = 0
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = int(state["step"])
    log_event(log, event="start", step=step, device=device)
    reporter = ThroughputReporter.from_env() if ThroughputReporter is not None else None
    t0, s0 = time.time(), step
    while step < args.steps and not stop_requested:
        x = torch.randn(64, 32, device=device)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        time.sleep(args.step_time)
        if reporter is not None:
            reporter.step()
        if step % args.report_every == 0:
            rate = (step - s0) / max(1e-9, time.time() - t0)
            log_event(log, event="progress", step=step, loss=loss.item(), steps_per_s=rate)
    tmp = ckpt.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    tmp.replace(ckpt)  # atomic: a kill mid-write never leaves a torn checkpoint
    if step < args.steps:
        log_event(log, event="checkpoint", step=step)
        return 0
    log_event(log, event="done", step=step)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
