"""Named scheduler configurations: a policy and a placement setup, selectable by one name (the
simulator and the daemon both run them).

A new configuration is one entry in CONFIGS; no code. Policies that choose co-locations themselves
(Gavel's packed LPs, POP) return pairs in their Ranking; the engine places those pairs as units, so
their configurations run the engine with ``packing="off"`` (the engine never adds pairs of its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .engine import EngineConfig, PlacementMode
from .model import InputError
from .placement.migrate import MigrationAlgorithm
from .placement.pack import PackingMode


@dataclass(frozen=True)
class SchedulerConfig:
    name: str
    policy: str
    engine: EngineConfig
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    keeps_running: bool = False  # a running job is never preempted or moved (checked under --check)


def _cfg(name: str, policy: str, packing: PackingMode, migration: MigrationAlgorithm, desc: str,
         placement: PlacementMode = "best-fit", keeps_running: bool = False, paying: bool = True,
         **opts: Any) -> SchedulerConfig:
    """``paying``: moves must pay for themselves (``EngineConfig.moves``; the shells give the costs); off
    for the configurations that stand for another system's rule, or for the paper's plan as published."""
    engine = EngineConfig(packing=packing, migration=migration, placement=placement)
    if not paying:
        engine = replace(engine, moves=None)
    return SchedulerConfig(name, policy, engine, opts, desc, keeps_running)


CONFIGS: dict[str, SchedulerConfig] = {c.name: c for c in (
    _cfg("fifo", "fifo", "off", "tesserae", "FIFO order, consolidated placement, no packing; running jobs stay put",
         placement="sticky"),
    _cfg("las", "las", "off", "tesserae", "least attained service, no packing"),
    _cfg("srtf", "srtf", "off", "tesserae", "shortest remaining time first (oracle durations), no packing"),
    _cfg("tiresias", "tiresias", "off", "tesserae", "Tiresias 2D-LAS, consolidated, no packing"),
    _cfg("tiresias-single", "tiresias", "single", "tesserae",
         "Tiresias + Tesserae packing of 1-GPU jobs only (the paper's Tiresias(Single))"),
    _cfg("tesserae-t", "tiresias", "on", "tesserae", "Tiresias + Tesserae packing + migration minimization"),
    _cfg("tesserae-t-paper", "tiresias", "on", "tesserae",
         "Tesserae-T as the paper publishes it: the plan rebuilt from nothing each round and relabeled, whatever "
         "a move costs", paying=False),
    _cfg("tesserae-t-nomig", "tiresias", "on", "gavel", "Tesserae-T with Gavel's migration rule (no relabeling)",
         paying=False),
    _cfg("tesserae-t-sticky", "tiresias", "on", "tesserae",
         "Tesserae-T, jobs return to last round's node when they fit (beyond the paper)", placement="sticky"),
    _cfg("tesserae-t-sticky-fit", "tiresias", "on", "tesserae",
         "Tesserae-T, jobs return to last round's node when they fit, unless that leaves a job waiting that "
         "best fit would place (beyond the paper; docs/results.md section 9)", placement="sticky-fit"),
    _cfg("tesserae-t-fair", "tiresias", "on", "tesserae",
         "Tesserae-T, Tiresias service charged by progress (speed x GPU time), promotion after waiting 8x the "
         "time run for jobs that ran at most 2 h, sticky placement that never strands a job (beyond the paper; "
         "docs/results.md section 9)",
         placement="sticky-fit", service="progress", promote_knob=8.0, promote_max_run_s=7200.0),
    _cfg("themis", "ftf", "off", "tesserae", "finish-time fairness order (Themis rho), no packing"),
    _cfg("tesserae-ftf", "ftf-lp", "on", "tesserae", "Gavel FTF (non-packed LP) priorities + Tesserae packing"),
    _cfg("gavel", "gavel", "off", "gavel", "Gavel LAS LP with pair variables, Gavel round mechanism", paying=False),
    _cfg("gavel-ftf", "gavel-ftf", "off", "gavel", "Gavel finish-time-fairness LP with packing", paying=False),
    _cfg("pop", "pop", "off", "gavel", "POP: Gavel LAS LP on k random partitions", paying=False),
    _cfg("slurm-priority", "slurm-priority", "off", "tesserae",
         "Slurm's own priority order (the site's fair-share, QOS, age, nice), consolidated, no packing"),
    _cfg("slurm-priority-t", "slurm-priority", "on", "tesserae",
         "Slurm's own priority order + Tesserae packing + migration minimization"),
    _cfg("slurm-backfill", "slurm-backfill", "off", "tesserae",
         "plain Slurm: multifactor priority, whole GPUs, EASY backfill on time limits; nothing preempted or moved",
         placement="pinned", keeps_running=True, paying=False),
)}


def get_config(name: str) -> SchedulerConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise InputError(f"unknown policy configuration {name!r}; known: {', '.join(CONFIGS)}") from None
