"""What the daemon and tsbatch both need to know of the managed partition (a module of its own, so
that neither imports the other): each node's GPU type from the configuration, and the profile the
daemon schedules with (tsbatch validates against it): the configured table plus one entry for jobs
submitted with ``--no-profile``.

Such a job has no measured speeds, so the engine must still be able to place it: it gets a model of
its own that runs alone at 1.0 on every GPU type (the definition of normalized speed) and is never
packed (its metadata sets no_pack, and the table measures no pair for it).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ..model.meta import UNPROFILED
from ..profiles import IsolatedRecord, ProfileKey, ThroughputProfile, load_profile

if TYPE_CHECKING:
    from .config import DaemonConfig


def gpu_type_of(cfg: DaemonConfig, node: str) -> str:
    return cfg.scheduler.node_gpu_types.get(node, cfg.scheduler.gpu_type).lower()


@cache
def scheduling_profile(spec: str) -> ThroughputProfile:
    base = load_profile(spec)
    extra = tuple(IsolatedRecord(g, ProfileKey(UNPROFILED, "", 1), None, 1.0) for g in base.gpu_types)
    return ThroughputProfile(base.name, base.isolated + extra, base.pairs, dict(base.datasets))
