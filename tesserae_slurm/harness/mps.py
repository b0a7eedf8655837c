"""One CUDA MPS control daemon per user and GPU set on a node, shared by every packable job there.

A packed pair shares its GPUs through one MPS server only when both jobs are clients of the same
control daemon, and a partner may join a job that has run alone for hours. So every packable job
(not --no-pack) is an MPS client from its start: the first one starts ``nvidia-cuda-mps-control -d``
in ``<base>/<uid>/<node>/gpu<i>[_<j>...]`` (node-local pipe and log directories, so the same user's
jobs on the same GPUs find the same server), later ones join it, and the last client to leave quits
it. Clients register under ``clients/`` in that directory, under an flock, so a partner joining
while the other leaves never finds a server that is being stopped; entries of dead processes are
pruned. Without the MPS binary or an NVIDIA device the job runs without MPS and the record says why.

CUDA's MPS runs one server per GPU at a time: clients of *different users* (different servers)
time-slice the GPU instead of sharing it (``mps.cross_user`` in the daemon's config decides whether
such pairs are made at all).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
MPS_CONTROL = "nvidia-cuda-mps-control"
DEFAULT_BASE = "/tmp/tesserae-mps"  # node-local; not $TMPDIR, which Slurm may make per job


@dataclass(frozen=True)
class MpsSetup:
    env: dict[str, str]  # variables every client process needs
    root: Path  # <base>/<uid>/<node>/gpu...: lock, clients/, pipe/, log/
    client: Path | None  # this job's registration (None: MPS not in use)
    record: dict[str, object] = field(default_factory=dict)  # what the launch record says about MPS


def mps_root(gpus: Sequence[int], node: str, base: str | None = None, uid: int | None = None) -> Path:
    uid = os.getuid() if uid is None else uid
    return Path(base or os.environ.get("TESSERAE_MPS_BASE") or DEFAULT_BASE) / str(uid) / (node or "node") / (
        "gpu" + "_".join(str(g) for g in gpus))


def mps_available() -> tuple[bool, str]:
    if shutil.which(MPS_CONTROL) is None:
        return False, f"{MPS_CONTROL} not found"
    if not Path("/dev/nvidia0").exists() and not Path("/dev/nvidiactl").exists():
        return False, "no NVIDIA device on this node"
    return True, ""


def join_mps(job_id: str, gpus: Sequence[int], percentage: int, node: str, local_rank: int = 0,
             base: str | None = None, available: tuple[bool, str] | None = None) -> MpsSetup:
    """Make this job a client of its user's MPS server on these GPUs, starting the server if needed."""
    root = mps_root(gpus, node, base)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(root / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(root / "log")}
    if percentage:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percentage)
    ok, why = mps_available() if available is None else available
    record: dict[str, object] = {"pipe_dir": env["CUDA_MPS_PIPE_DIRECTORY"], "thread_percentage": percentage,
                                 "active": False, "started_server": False}
    if not ok:
        record["skipped"] = why
        log.warning("MPS skipped for job %s: %s (payload runs without MPS)", job_id, why)
        return MpsSetup(env, root, None, record)
    if gpus:  # the server sees only these GPUs and renumbers them from 0 for its clients
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpus)))
    record["active"] = True
    if local_rank != 0:  # the node's first task manages the server
        return MpsSetup(env, root, None, record)
    for d in (root / "pipe", root / "log", root / "clients"):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    client = root / "clients" / f"{job_id}.{os.getpid()}"
    with _locked(root):
        _prune(root)
        if not _server_running(root):
            server_env = {**os.environ, **env}
            if gpus:
                server_env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
            try:
                subprocess.run([MPS_CONTROL, "-d"], env=server_env, check=True, timeout=30)
            except (OSError, subprocess.SubprocessError) as exc:  # the job still runs, without MPS
                log.warning("MPS skipped for job %s: could not start %s: %s", job_id, MPS_CONTROL, exc)
                return MpsSetup({k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"}, root, None,
                                {**record, "active": False, "skipped": f"could not start {MPS_CONTROL}: {exc}"})
            record["started_server"] = True
            log.info("started MPS control daemon for GPUs %s in %s", list(gpus), root)
        client.write_text(str(os.getpid()))
    return MpsSetup(env, root, client, record)


def leave_mps(setup: MpsSetup) -> bool:
    """Unregister; the last client quits the server. Returns whether this call stopped it."""
    if setup.client is None:
        return False
    with _locked(setup.root):
        setup.client.unlink(missing_ok=True)
        if _prune(setup.root):
            return False
        try:
            subprocess.run([MPS_CONTROL], input="quit\n", text=True, timeout=30,
                           env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(setup.root / "pipe"),
                                "CUDA_MPS_LOG_DIRECTORY": str(setup.root / "log")})
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("could not stop the MPS control daemon in %s: %s", setup.root, exc)
            return False
    log.info("stopped the MPS control daemon in %s (last client)", setup.root)
    return True


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    with open(root / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _prune(root: Path) -> int:
    """Drop registrations of processes that are gone (a job killed with SIGKILL); count the rest."""
    alive = 0
    for entry in (root / "clients").glob("*"):
        try:
            pid = int(entry.read_text().strip() or "0")
            os.kill(pid, 0)
            alive += 1
        except (ValueError, ProcessLookupError, FileNotFoundError):
            entry.unlink(missing_ok=True)
        except PermissionError:
            alive += 1
    return alive


def _server_running(root: Path) -> bool:
    pid_file = root / "pipe" / "nvidia-cuda-mps-control.pid"
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


