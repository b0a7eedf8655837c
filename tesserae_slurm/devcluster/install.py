"""Install the Debian Slurm packages the dev cluster needs, if they are missing and we are root."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

from .errors import DevClusterError

log = logging.getLogger(__name__)

REQUIRED_BINARIES: tuple[str, ...] = ("slurmctld", "slurmd", "munged", "squeue", "sinfo", "sbatch", "scontrol")
APT_PACKAGES: tuple[str, ...] = ("slurmctld", "slurmd", "slurm-client", "munge")
# Debian puts the daemons in /usr/sbin, which a non-login PATH may lack.
_EXTRA_DIRS = ("/usr/sbin", "/sbin", "/usr/bin")


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in _EXTRA_DIRS:
        candidate = os.path.join(d, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def missing_binaries() -> list[str]:
    return [b for b in REQUIRED_BINARIES if find_binary(b) is None]


def apt_commands() -> list[list[str]]:
    return [
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", *APT_PACKAGES],
    ]


def ensure_slurm_installed(*, timeout_s: float = 600.0) -> None:
    """Make sure slurmctld/slurmd/munged/squeue exist; apt-get install them when root.

    Raises DevClusterError (one line) when they are missing and cannot be installed.
    """
    missing = missing_binaries()
    if not missing:
        return
    if os.geteuid() != 0:
        raise DevClusterError(
            f"Slurm binaries missing ({', '.join(missing)}) and not root: run "
            f"`sudo scripts/install-slurm.sh` (apt-get install {' '.join(APT_PACKAGES)})"
        )
    if shutil.which("apt-get") is None:
        raise DevClusterError(f"Slurm binaries missing ({', '.join(missing)}) and apt-get is not available")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in apt_commands():
        log.info("running %s", " ".join(argv))
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise DevClusterError(f"{' '.join(argv[:2])} timed out after {timeout_s:g}s") from exc
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise DevClusterError(f"{' '.join(argv[:2])} failed (exit {proc.returncode}): {tail}")
    still = missing_binaries()
    if still:
        raise DevClusterError(f"apt-get install finished but {', '.join(still)} still missing")
