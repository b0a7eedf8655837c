"""Policy names -> factories. ``NAME`` = registry key = the string configs and YAML use.

Modules are imported on first use, so the LP baselines' solvers load only when asked for.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..model import InputError
from .base import Policy

# name -> "module:factory"; the factory takes the policy's options as keyword arguments.
POLICIES: dict[str, str] = {
    "fifo": "fifo:FifoPolicy",
    "las": "las:LasPolicy",
    "srtf": "srtf:SrtfPolicy",
    "tiresias": "tiresias:TiresiasPolicy",
    "ftf": "ftf:ThemisPolicy",
    "ftf-lp": "gavel:GavelFtfPriorityPolicy",
    "gavel": "gavel:GavelLasPolicy",
    "gavel-ftf": "gavel:GavelFtfPolicy",
    "pop": "pop:PopPolicy",
    "slurm-priority": "slurm_priority:SlurmPriorityPolicy",
    "slurm-backfill": "slurm_backfill:SlurmBackfillPolicy",
}


def make_policy(name: str, **options: Any) -> Policy:
    try:
        target = POLICIES[name]
    except KeyError:
        raise InputError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
    module, attr = target.split(":")
    factory = getattr(import_module(f"{__package__}.{module}"), attr)
    try:
        policy: Policy = factory(**options)
        return policy
    except TypeError as exc:
        raise InputError(f"policy {name}: bad options {sorted(options)}: {exc}") from None
