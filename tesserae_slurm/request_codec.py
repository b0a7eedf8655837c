"""A round's inputs to the engine (``RoundRequest``) as JSON and back: the daemon records them with the
round (``state.record_inputs``), and a test or `tesserae plan --request` replays the round through
``engine.decide`` exactly (model/codec.py has the parts; docs/formats.md the format).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .engine import PLACEMENTS, EngineConfig, RoundRequest
from .model import InputError, MoveCosts
from .model.codec import (
    cluster_from_json,
    cluster_to_json,
    job_from_json,
    job_to_json,
    placement_from_json,
    placement_to_json,
)
from .model.gpu_limits import limits_from
from .placement.migrate import ALGORITHMS
from .placement.node_rules import NodeRule
from .placement.pack import CROSS_USER, MODES, OBJECTIVES

VERSION = 1
_KEYS = {"version", "cluster", "jobs", "current", "pairs", "config", "rules", "limits", "held", "remaining", "recent",
         "profile"}


def request_to_json(req: RoundRequest, profile: str = "") -> dict[str, Any]:
    """``profile``: the name (or path) of the profile the round decided with, for a replay."""
    cfg = req.config
    current = req.current.jobs() if req.current is not None else set()
    out: dict[str, Any] = {
        "version": VERSION,
        "cluster": cluster_to_json(req.cluster),
        "jobs": [job_to_json(j) for j in req.jobs],
        "current": placement_to_json(req.current) if req.current is not None else None,
        "pairs": [list(p) for p in req.pairs],
        "config": {"packing": cfg.packing, "migration": cfg.migration, "objective": cfg.objective,
                   "placement": cfg.placement, "min_speed": cfg.min_speed, "cross_user": cfg.cross_user,
                   "pairs_below_one": cfg.pairs_below_one,
                   "moves": None if cfg.moves is None else _moves_to_json(cfg.moves)},
        "rules": {j: {"nodes": sorted(r.nodes), "keep_off": r.keep_off, "text": r.text} for j, r in req.rules.items()},
        "limits": None if req.limits is None else {
            "users": dict(req.limits.users), "accounts": dict(req.limits.accounts),
            "default_user": req.limits.default_user, "default_account": req.limits.default_account},
        "held": list(req.held),
        "remaining": {j: s for j, s in req.remaining.items()},
        "recent": {j: [[[n, g] for n, g in refs] for refs in req.recent[j]] for j in sorted(current)
                   if j in req.recent},
    }
    if profile:
        out["profile"] = profile
    return out


def _moves_to_json(m: MoveCosts) -> dict[str, Any]:
    return {"restart_s": m.restart_s, "per_model": dict(m.per_model), "stop_s": m.stop_s, "horizon_s": m.horizon_s,
            "recent_rounds": m.recent_rounds}


def request_from_json(raw: Any, where: str = "request") -> tuple[RoundRequest, str]:
    """The request and the profile it names ("" when none); InputError with one line when malformed."""
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected a JSON object")
    unknown = set(raw) - _KEYS
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(_KEYS)}")
    if raw.get("version", VERSION) != VERSION:
        raise InputError(f"{where}: version {raw.get('version')!r}, this tesserae reads {VERSION}")
    for key in ("cluster", "jobs"):
        if key not in raw:
            raise InputError(f"{where}: missing {key!r}")
    if not isinstance(raw["jobs"], list):
        raise InputError(f"{where}.jobs: expected a list in priority order")
    cluster = cluster_from_json(raw["cluster"])
    jobs = tuple(job_from_json(j, f"{where}.jobs[{i}]") for i, j in enumerate(raw["jobs"]))
    current = placement_from_json(raw["current"], f"{where}.current") if raw.get("current") is not None else None
    pairs = raw.get("pairs", [])
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise InputError(f"{where}.pairs: expected a list of [job, job]")
    try:
        config = _config(raw.get("config") or {}, where)
        rules = {str(j): NodeRule(frozenset(map(str, r["nodes"])), bool(r.get("keep_off", False)),
                                  str(r.get("text", ""))) for j, r in (raw.get("rules") or {}).items()}
        recent = {str(j): tuple(tuple((str(n), int(g)) for n, g in refs) for refs in seq)
                  for j, seq in (raw.get("recent") or {}).items()}
        remaining = {str(j): float(s) for j, s in (raw.get("remaining") or {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: malformed config, rules, recent or remaining ({exc})") from None
    req = RoundRequest(cluster, jobs, current, tuple((str(a), str(b)) for a, b in pairs), config, rules,
                       limits=limits_from(raw.get("limits"), where), held=tuple(map(str, raw.get("held", []))),
                       remaining=remaining, recent=recent)
    return req, str(raw.get("profile", ""))


def _config(raw: Mapping[str, Any], where: str) -> EngineConfig:
    for key, choices in (("packing", MODES), ("migration", ALGORITHMS), ("objective", OBJECTIVES),
                         ("placement", PLACEMENTS), ("cross_user", CROSS_USER)):
        if key in raw and raw[key] not in choices:
            raise InputError(f"{where}.config.{key} must be one of {', '.join(choices)}, got {raw[key]!r}")
    kwargs: dict[str, Any] = {k: raw[k] for k in ("packing", "migration", "objective", "placement") if k in raw}
    # a round recorded before two users' pairs were told apart scored them all as MPS pairs, and formed
    # pairs below one: replayed as it was decided
    kwargs["cross_user"] = raw.get("cross_user", "mps")
    kwargs["pairs_below_one"] = bool(raw.get("pairs_below_one", True))
    if "min_speed" in raw:
        kwargs["min_speed"] = float(raw["min_speed"])
    if "moves" in raw:
        m = raw["moves"]
        kwargs["moves"] = None if m is None else MoveCosts(
            float(m.get("restart_s", MoveCosts.restart_s)),
            tuple((str(k), float(v)) for k, v in (m.get("per_model") or {}).items()),
            float(m.get("stop_s", 0.0)), float(m.get("horizon_s", MoveCosts.horizon_s)),
            int(m.get("recent_rounds", MoveCosts.recent_rounds)))
    return EngineConfig(**kwargs)
