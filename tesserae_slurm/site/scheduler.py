"""The scheduler a site configures: its named configuration, the policy's options and the engine's
settings, and the check that they exist and that the profile knows the partition's GPU types.

The one place the site's configuration meets the named configurations (``presets.py``): the daemon
schedules with what this module gives, and a configuration loads only when this module accepts it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..engine import EngineConfig
from ..model import InputError, MoveCosts
from ..policies.base import Policy
from ..policies.registry import make_policy
from ..presets import CONFIGS, get_config
from .config import SiteConfig
from .partition import scheduling_profile


def policy_options(cfg: SiteConfig) -> dict[str, Any]:
    """The named configuration's policy options with the site's ``scheduler.policy_options`` over them."""
    named = get_config(cfg.scheduler.policy)
    return {**dict(named.policy_options), **dict(cfg.scheduler.policy_options)}


def site_policy(cfg: SiteConfig) -> Policy:
    return make_policy(get_config(cfg.scheduler.policy).policy, **policy_options(cfg))


def engine_config(cfg: SiteConfig) -> EngineConfig:
    """The named configuration's engine settings with the site's ``packing`` and ``moves`` sections over
    them: two users' pairs are scored time-sliced (``mps.cross_user: timeslice``; ``never`` forms none),
    and a move costs the job its restart, the grace period it waits to checkpoint, and Slurm's requeue
    and relaunch."""
    engine = get_config(cfg.scheduler.policy).engine
    if cfg.packing.min_speed:
        engine = dataclasses.replace(engine, min_speed=cfg.packing.min_speed)
    if cfg.packing.pairs_below_one:
        engine = dataclasses.replace(engine, pairs_below_one=True)
    if engine.moves is not None:
        m = cfg.moves
        costs = MoveCosts(m.restart_s, tuple(m.restart_per_model.items()), cfg.preemption.grace_seconds + m.requeue_s,
                          m.horizon_s or 3 * cfg.scheduler.round_seconds, m.recent_rounds)
        engine = dataclasses.replace(engine, moves=costs if m.enabled else None)
    return dataclasses.replace(engine, cross_user="timeslice")


def check_scheduler(cfg: SiteConfig, where: str) -> None:
    """The named configuration exists, its options make a policy, and the profile loads and knows every
    GPU type of the partition: a configuration that would fail the first round fails when loaded."""
    if cfg.scheduler.policy not in CONFIGS:
        raise InputError(f"{where}: scheduler.policy {cfg.scheduler.policy!r} unknown; known: {', '.join(CONFIGS)}")
    if cfg.scheduler.policy_options:
        try:
            site_policy(cfg)
        except InputError as exc:
            raise InputError(f"{where}: scheduler.policy_options: {exc}") from None
    try:
        profile = scheduling_profile(cfg.scheduler.profile)
    except InputError as exc:
        raise InputError(f"{where}: scheduler.profile: {exc}") from None
    types = _gpu_types(cfg.scheduler.gpu_type, cfg.scheduler.node_gpu_types)
    unknown = sorted(types - set(profile.gpu_types))
    if unknown:
        raise InputError(f"{where}: GPU type(s) {', '.join(unknown)} not in profile {profile.name} (known: "
                         f"{', '.join(profile.gpu_types)}); set scheduler.profile or scheduler.gpu_type")


def _gpu_types(default: str, per_node: Mapping[str, str]) -> set[str]:
    return {default.lower(), *(t.lower() for t in per_node.values())}
