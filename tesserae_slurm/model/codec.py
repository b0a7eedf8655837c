"""JSON-ready dicts for model objects (CLI output, SQLite rows, state files); schemas in docs/formats.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .cluster import Cluster, Node
from .decision import PackedPair, RoundDecision
from .errors import InputError
from .job import Job
from .moves import MoveReason
from .placement import Placement


def placement_from_json(raw: Any, what: str = "plan") -> Placement:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("nodes"), Mapping):
        raise InputError(f"{what}: expected an object with a \"nodes\" object")
    for node, gpus in raw["nodes"].items():
        if not isinstance(gpus, list) or not all(isinstance(g, list) for g in gpus):
            raise InputError(f"{what}: node {node!r} must be a list of GPUs, each a list of job ids")
    return Placement.from_lists(raw["nodes"])


def placement_to_json(p: Placement) -> dict[str, Any]:
    return {"nodes": p.to_lists()}


def cluster_from_json(raw: Any) -> Cluster:
    if isinstance(raw, str):
        return Cluster.from_spec(raw)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("nodes"), list):
        raise InputError('cluster: expected a spec string like "4x4:a100" or {"nodes": [{"name", "gpus", "type"}]}')
    nodes = []
    for i, n in enumerate(raw["nodes"]):
        if not isinstance(n, Mapping) or "name" not in n or "gpus" not in n:
            raise InputError(f"cluster.nodes[{i}]: needs \"name\" and \"gpus\"")
        gpus = n["gpus"]
        if not isinstance(gpus, int) or isinstance(gpus, bool):
            raise InputError(f"cluster.nodes[{i}].gpus: expected an integer, got {gpus!r}")
        nodes.append(Node(str(n["name"]), gpus, str(n.get("type", "a100")).lower()))
    return Cluster(tuple(nodes))


_JOB_KEYS = {"id", "num_gpus", "model", "batch_size", "user", "parallelism", "no_pack", "group", "account",
             "time_limit"}


def job_from_json(raw: Any, where: str) -> Job:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected an object")
    unknown = set(raw) - _JOB_KEYS
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(_JOB_KEYS)}")
    for key in ("id", "num_gpus", "model"):
        if key not in raw:
            raise InputError(f"{where}: missing {key!r}")
    n = raw["num_gpus"]
    if not isinstance(n, int) or isinstance(n, bool):
        raise InputError(f"{where}.num_gpus: expected an integer, got {n!r}")
    par = raw.get("parallelism", [])
    if not isinstance(par, list) or not all(isinstance(s, str) for s in par):
        raise InputError(f"{where}.parallelism: expected a list of strategy strings")
    limit = raw.get("time_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        raise InputError(f"{where}.time_limit: expected seconds, got {limit!r}")
    return Job(
        id=str(raw["id"]), num_gpus=n, model=str(raw["model"]), batch_size=str(raw.get("batch_size", "")),
        user=str(raw.get("user", "")), parallelism=tuple(par), no_pack=bool(raw.get("no_pack", False)),
        group=str(raw.get("group", "")), account=str(raw.get("account", "")),
        time_limit=None if limit is None else float(limit),
    )


def job_to_json(j: Job) -> dict[str, Any]:
    """``job_from_json``'s input: the fields a job has set (defaults left out)."""
    out: dict[str, Any] = {"id": j.id, "num_gpus": j.num_gpus, "model": j.model}
    for key, value in (("batch_size", j.batch_size), ("user", j.user), ("parallelism", list(j.parallelism)),
                       ("no_pack", j.no_pack), ("group", j.group), ("account", j.account),
                       ("time_limit", j.time_limit)):
        if value:
            out[key] = value
    return out


def cluster_to_json(c: Cluster) -> dict[str, Any]:
    return {"nodes": [{"name": n.name, "gpus": n.num_gpus, "type": n.gpu_type} for n in c.nodes]}


def pair_to_json(p: PackedPair) -> dict[str, Any]:
    return {"placed": p.placed, "partner": p.partner, "placed_speed": p.placed_speed,
            "partner_speed": p.partner_speed, "weight": round(p.weight, 6),
            "placed_strategy": p.placed_strategy, "partner_strategy": p.partner_strategy}


def move_to_json(m: MoveReason) -> dict[str, Any]:
    return {"job": m.job, "action": m.action, "cause": m.cause, "for": list(m.for_jobs), "gain_gpu_s": round(m.gain, 1),
            "cost_gpu_s": round(m.cost, 1), "speed_before": round(m.speed_before, 4),
            "speed_after": round(m.speed_after, 4), "detail": m.detail}


def decision_to_json(d: RoundDecision) -> dict[str, Any]:
    return {
        "placement": placement_to_json(d.placement),
        "started": list(d.started),
        "preempted": list(d.preempted),
        "migrated": list(d.migrated),
        "kept": list(d.kept),
        "migrations": len(d.migrated),
        "migration_cost": d.migration_cost,
        "packed": [pair_to_json(p) for p in d.packed],
        "pending": [{"job": p.job_id, "reason": p.reason.value, "detail": p.detail} for p in d.pending],
        "strategies": dict(d.strategies),
        "speeds": dict(d.speeds),
        "timings_ms": {
            "placement": d.timings.placement * 1e3, "packing": d.timings.packing * 1e3,
            "migration": d.timings.migration * 1e3, "total": d.timings.total * 1e3,
        },
        "moves": [move_to_json(m) for m in d.moves],
    }
