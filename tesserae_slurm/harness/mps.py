"""Per-job CUDA MPS control daemon for packed jobs (the NERSC wrapper pattern).

Each packed job gets its own node-local pipe and log directories; the first local task starts
`nvidia-cuda-mps-control -d` there and quits it on exit. Without a GPU or the MPS binary the
launcher logs one line and runs the payload without MPS (CPU tests, nodes without MPS).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
MPS_CONTROL = "nvidia-cuda-mps-control"


@dataclass(frozen=True)
class MpsSetup:
    env: dict[str, str]  # variables every client process needs
    started: bool  # whether this process started the control daemon (and must quit it)
    pipe_dir: Path


def mps_dirs(job_id: str, base: str | None = None) -> tuple[Path, Path]:
    root = Path(base or os.environ.get("TMPDIR") or "/tmp") / f"tesserae-mps-{job_id}"
    return root / "pipe", root / "log"


def mps_available() -> tuple[bool, str]:
    if shutil.which(MPS_CONTROL) is None:
        return False, f"{MPS_CONTROL} not found"
    if not Path("/dev/nvidia0").exists() and not Path("/dev/nvidiactl").exists():
        return False, "no NVIDIA device on this node"
    return True, ""


def start_mps(job_id: str, percentage: int, local_rank: int = 0, base: str | None = None) -> MpsSetup:
    pipe, logdir = mps_dirs(job_id, base)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logdir)}
    if percentage:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percentage)
    ok, why = mps_available()
    if not ok:
        log.warning("MPS skipped for job %s: %s (payload runs without MPS)", job_id, why)
        return MpsSetup(env, False, pipe)
    if local_rank != 0:
        return MpsSetup(env, False, pipe)
    pipe.mkdir(parents=True, exist_ok=True)
    logdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([MPS_CONTROL, "-d"], env={**os.environ, **env}, check=True, timeout=30)
    log.info("started MPS control daemon for job %s in %s", job_id, pipe)
    return MpsSetup(env, True, pipe)


def stop_mps(setup: MpsSetup) -> None:
    if not setup.started:
        return
    try:
        subprocess.run([MPS_CONTROL], input="quit\n", text=True, env={**os.environ, **setup.env}, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not stop MPS control daemon in %s: %s", setup.pipe_dir, exc)
