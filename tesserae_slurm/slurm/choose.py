"""Which backend talks to Slurm: the CLI, or pyslurm when it is importable, built for the running Slurm
and (for `auto`) live-tested on that release.

A module of its own, above both backends: pyslurm's backend extends the CLI one, so the choice cannot
live in either without an import loop. pyslurm itself is imported only when ``create`` tries it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..model.errors import InputError
from .backend import SlurmBackend, SlurmBackendError, SlurmCliBackend
from .pyslurm_backend import PyslurmBackend
from .runner import SlurmRunner

log = logging.getLogger(__name__)


def make_backend(
    prefer: str = "auto",
    env: Mapping[str, str] | None = None,
    *,
    runner: SlurmRunner | None = None,
) -> SlurmBackend:
    """`auto`: pyslurm if importable, matching the running Slurm and live-tested on its release, else
    the CLI; `cli`; `pyslurm` (any matching release)."""
    if prefer not in ("auto", "cli", "pyslurm"):
        raise InputError(f"unknown Slurm backend {prefer!r} (choose auto, cli or pyslurm)")
    cli = SlurmCliBackend(env, runner=runner)
    if prefer == "cli":
        return cli
    try:
        return PyslurmBackend.create(cli, env=env, live_tested_only=prefer == "auto")
    except SlurmBackendError as exc:
        if prefer == "pyslurm":
            raise
        log.info("using the CLI Slurm backend: %s", exc)
        return cli

