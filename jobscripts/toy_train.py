#!/usr/bin/env python3
"""A small PyTorch training program that behaves like a real preemptible DL job.

Runs on CPU (or the GPUs in CUDA_VISIBLE_DEVICES), checkpoints at a step boundary when it gets
SIGUSR1 or SIGTERM and exits, resumes from the checkpoint on restart, and appends one JSON line per
event (start, progress, checkpoint, done) to --log so tests and users can follow it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import time
from pathlib import Path

import torch
from torch import nn

stop_requested = False


def _request_stop(signum: int, _frame: object) -> None:
    global stop_requested
    stop_requested = True


def log_event(path: Path, **fields: object) -> None:
    fields.update(time=time.time(), host=socket.gethostname(), job=os.environ.get("SLURM_JOB_ID", ""),
                  restart=int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0))
    for key in ("CUDA_VISIBLE_DEVICES", "SLURMD_NODENAME", "TESSERAE_PARTNER", "TESSERAE_STRATEGY",
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
    args = p.parse_args()
    signal.signal(signal.SIGUSR1, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    torch.manual_seed(0)
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
    t0, s0 = time.time(), step
    while step < args.steps:
        x = torch.randn(64, 32, device=device)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        time.sleep(args.step_time)
        if step % 20 == 0:
            rate = (step - s0) / max(1e-9, time.time() - t0)
            log_event(log, event="progress", step=step, loss=float(loss), steps_per_s=rate)
        if stop_requested:
            break
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
