"""From the configuration to a Slurm backend and the managed partition's shape (shared by daemon and tsbatch)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..model import Cluster, Node
from ..slurm import RetryPolicy, SlurmBackend, SlurmNode, SlurmRunner, make_backend
from .config import DaemonConfig
from .partition import gpu_type_of


def backend_from_config(cfg: DaemonConfig, env: Mapping[str, str] | None = None) -> SlurmBackend:
    """The configured backend, with the configured timeout and retries on every call; ``env`` is laid
    over the process environment for every Slurm client (e.g. SLURM_CONF)."""
    env = dict(env or {})
    if cfg.slurm.bin_dir:
        env["PATH"] = cfg.slurm.bin_dir + os.pathsep + env.get("PATH", os.environ.get("PATH", ""))
    runner = SlurmRunner(env, timeout_s=cfg.slurm.command_timeout_s, retry=RetryPolicy(retries=cfg.slurm.retries))
    return make_backend(cfg.slurm.backend, env, runner=runner)


def cluster_of(cfg: DaemonConfig, nodes: Sequence[SlurmNode]) -> Cluster:
    """Nodes with GPUs, in Slurm's order; the caller picks which nodes (all, or schedulable ones)."""
    return Cluster(tuple(Node(n.name, n.gpus, gpu_type_of(cfg, n.name)) for n in nodes if n.gpus > 0))
