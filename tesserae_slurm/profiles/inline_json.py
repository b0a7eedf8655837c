"""The inline pair-table form of a profile: a small JSON object (state files, hand-made tables).

```json
{"gpu_type": "a100",
 "isolated": [{"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2, "strategy": "10,14",
               "speed": 0.78}],
 "pairs": [{"a": {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2},
            "b": {"model": "resnet50", "batch_size": "64", "num_gpus": 2},
            "a_speed": 0.48, "b_speed": 0.72, "a_strategy": "10,14"}]}
```

``gpu_type`` (default ``a100``) applies to every entry without its own ``gpu_type``. Isolated entries:
``model``, ``num_gpus`` required; ``batch_size`` (default ""), ``speed`` (default 1.0), ``strategy``,
``throughput`` (absolute steps/s) optional. A job without strategies that appears only in pairs
runs alone at 1.0; every strategy a pair names needs an isolated entry. Pairs: ``a``, ``b``,
``a_speed``, ``b_speed`` required (``b.num_gpus`` defaults to ``a``'s); ``a_strategy``,
``b_strategy``, ``gpu_type``, ``sharing`` (``mps``, default, or ``timeslice``) optional.
docs/profiles.md has the full description.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..model import InputError
from .build import build_profile
from .keys import MPS, SHARINGS, IsolatedRecord, PairOption, PairRecord, ProfileKey
from .table import ThroughputProfile

_TOP = {"name", "gpu_type", "isolated", "pairs"}
_ISO = {"model", "batch_size", "num_gpus", "speed", "strategy", "throughput", "gpu_type"}
_PAIR = {"a", "b", "a_speed", "b_speed", "a_strategy", "b_strategy", "gpu_type", "sharing"}
_SIDE = {"model", "batch_size", "num_gpus"}


def _obj(raw: Any, allowed: set[str], required: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected an object")
    unknown = set(raw) - allowed
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(allowed)}")
    for k in required:
        if k not in raw:
            raise InputError(f"{where}: missing {k!r}")
    return raw


def _num(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw < 0:
        raise InputError(f"{where}: expected a finite number >= 0, got {raw!r}")
    return float(raw)


def _str(raw: Any, where: str, optional: bool = False) -> str | None:
    if raw is None and optional:
        return None
    if not isinstance(raw, str) or (not raw.strip() and optional):
        raise InputError(f"{where}: expected a non-empty string, got {raw!r}")
    return raw


def _gpus(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise InputError(f"{where}: expected a positive integer, got {raw!r}")
    return raw


def _key(raw: Any, where: str, default_gpus: int | None = None) -> ProfileKey:
    side = _obj(raw, _SIDE, ("model",) if default_gpus else ("model", "num_gpus"), where)
    batch = side.get("batch_size", "")
    if isinstance(batch, int) and not isinstance(batch, bool):
        batch = str(batch)
    model = _str(side["model"], f"{where}.model")
    if not str(model).strip():
        raise InputError(f"{where}.model: expected a non-empty string")
    return ProfileKey(str(model), str(_str(batch, f"{where}.batch_size")),
                      _gpus(side.get("num_gpus", default_gpus), f"{where}.num_gpus"))


def profile_from_json(raw: Any, where: str = "profile") -> ThroughputProfile:
    top = _obj(raw, _TOP, (), where)
    default_gpu = str(_str(top.get("gpu_type", "a100"), f"{where}.gpu_type"))
    iso_raw, pairs_raw = top.get("isolated", []), top.get("pairs", [])
    if not isinstance(iso_raw, list) or not isinstance(pairs_raw, list):
        raise InputError(f"{where}: \"isolated\" and \"pairs\" must be lists")
    if not iso_raw and not pairs_raw:
        raise InputError(f"{where}: an inline profile needs \"isolated\" or \"pairs\" entries")
    isolated: list[IsolatedRecord] = []
    for i, e in enumerate(iso_raw):
        w = f"{where}.isolated[{i}]"
        e = _obj(e, _ISO, ("model", "num_gpus"), w)
        key = _key({k: e[k] for k in _SIDE if k in e}, w)
        tput = e.get("throughput")
        isolated.append(IsolatedRecord(
            str(_str(e.get("gpu_type", default_gpu), f"{w}.gpu_type")), key,
            _str(e.get("strategy"), f"{w}.strategy", optional=True), _num(e.get("speed", 1.0), f"{w}.speed"),
            None if tput is None else _num(tput, f"{w}.throughput")))
    pairs: list[PairRecord] = []
    for i, e in enumerate(pairs_raw):
        w = f"{where}.pairs[{i}]"
        e = _obj(e, _PAIR, ("a", "b", "a_speed", "b_speed"), w)
        a = _key(e["a"], f"{w}.a")
        b = _key(e["b"], f"{w}.b", default_gpus=a.num_gpus)
        sharing = e.get("sharing", MPS)
        if sharing not in SHARINGS:
            raise InputError(f"{w}.sharing: expected {' or '.join(SHARINGS)}, got {sharing!r}")
        pairs.append(PairRecord(
            str(_str(e.get("gpu_type", default_gpu), f"{w}.gpu_type")), a, b,
            PairOption(_str(e.get("a_strategy"), f"{w}.a_strategy", optional=True),
                       _str(e.get("b_strategy"), f"{w}.b_strategy", optional=True),
                       _num(e["a_speed"], f"{w}.a_speed"), _num(e["b_speed"], f"{w}.b_speed")),
            sharing=str(sharing)))
    name = top.get("name", "inline")
    try:
        return build_profile(str(name), isolated, pairs)
    except InputError as e:
        raise InputError(f"{where}: {e}") from None


def _side(k: ProfileKey, written: str = "") -> dict[str, Any]:
    return {"model": k.model, "batch_size": written or k.batch_size, "num_gpus": k.num_gpus}


def profile_to_json(profile: ThroughputProfile) -> dict[str, Any]:
    """The inline form of any profile; ``profile_from_json`` of it gives an equal profile."""
    paired = {(p.gpu_type, k) for p in profile.pairs for k in (p.a, p.b)}
    iso = []
    for r in profile.isolated:
        if r.strategy is None and r.speed == 1.0 and r.throughput is None and (r.gpu_type, r.key) in paired:
            continue
        e: dict[str, Any] = {**_side(r.key, r.written_batch), "speed": r.speed, "gpu_type": r.gpu_type}
        if r.strategy is not None:
            e["strategy"] = r.strategy
        if r.throughput is not None:
            e["throughput"] = r.throughput
        iso.append(e)
    pairs = []
    for p in profile.pairs:
        e = {"a": _side(p.a, p.a_written_batch), "b": _side(p.b, p.b_written_batch),
             "a_speed": p.option.a_speed, "b_speed": p.option.b_speed, "gpu_type": p.gpu_type}
        if p.option.a_strategy is not None:
            e["a_strategy"] = p.option.a_strategy
        if p.option.b_strategy is not None:
            e["b_strategy"] = p.option.b_strategy
        if p.sharing != MPS:
            e["sharing"] = p.sharing
        pairs.append(e)
    return {"name": profile.name, "isolated": iso, "pairs": pairs}
