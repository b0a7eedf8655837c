"""The Slurm backend the site's configuration names, with its timeout and retries: what `tesserae daemon`
and tsbatch talk to Slurm through."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..slurm import RetryPolicy, SlurmBackend, SlurmRunner, make_backend
from .config import SiteConfig


def backend_from_config(cfg: SiteConfig, env: Mapping[str, str] | None = None) -> SlurmBackend:
    """The configured backend, with the configured timeout and retries on every call; ``env`` is laid
    over the process environment for every Slurm client (e.g. SLURM_CONF)."""
    env = dict(env or {})
    if cfg.slurm.bin_dir:
        env["PATH"] = cfg.slurm.bin_dir + os.pathsep + env.get("PATH", os.environ.get("PATH", ""))
    runner = SlurmRunner(env, timeout_s=cfg.slurm.command_timeout_s, retry=RetryPolicy(retries=cfg.slurm.retries))
    return make_backend(cfg.slurm.backend, env, runner=runner)
