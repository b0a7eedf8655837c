"""Policy state as versioned JSON, so reading the state database never runs code (pickle could).

Every policy keeps either ``None`` or a frozen dataclass tree built from a few known classes; they are
written field by field under their class name, mappings as ordered key/value pairs (keys may be
tuples: Gavel's pair entries), tuples tagged so they come back as tuples. Reading accepts only the
classes in ``_CLASSES``; anything else is an error, and the daemon then starts the policy afresh.

``unpickle_legacy`` reads a state pickled by tesserae before this format, with an unpickler that
resolves only the names such states contain; the schema migration calls it once per stored state.
"""

from __future__ import annotations

import io
import json
import pickle
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import Any

from ..model import InputError
from .ftf import Contention, ThemisState
from .gavel import FtfMemory, GavelState
from .gavel_rounds import RoundState
from .tiresias import QueuedJob, TiresiasState

VERSION = 1

# Every class a policy state may hold; the JSON names them by these keys.
_CLASSES: dict[str, type] = {
    "TiresiasState": TiresiasState, "QueuedJob": QueuedJob,
    "GavelState": GavelState, "RoundState": RoundState, "FtfMemory": FtfMemory,
    "ThemisState": ThemisState, "Contention": Contention,
}
_NAMES = {cls: name for name, cls in _CLASSES.items()}


def _field_names(cls: type) -> tuple[str, ...]:
    if is_dataclass(cls):
        return tuple(f.name for f in fields(cls))
    return tuple(cls._fields)  # type: ignore[attr-defined]  # a NamedTuple class


def _enc(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    name = _NAMES.get(type(x))
    if name is not None:
        return {"c": name, "f": {k: _enc(getattr(x, k)) for k in _field_names(type(x))}}
    if isinstance(x, tuple):
        return {"t": [_enc(v) for v in x]}
    if isinstance(x, list):
        return [_enc(v) for v in x]
    if isinstance(x, Mapping):
        return {"m": [[_enc(k), _enc(v)] for k, v in x.items()]}
    raise InputError(f"policy state: cannot store a {type(x).__name__}")


def _dec(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [_dec(v) for v in x]
    if isinstance(x, dict):
        if "t" in x:
            return tuple(_dec(v) for v in x["t"])
        if "m" in x:
            return MappingProxyType({_dec(k): _dec(v) for k, v in x["m"]})
        if "c" in x:
            cls = _CLASSES.get(x["c"])
            if cls is None:
                raise InputError(f"policy state: unknown class {x['c']!r}")
            known = set(_field_names(cls))
            return cls(**{k: _dec(v) for k, v in x["f"].items() if k in known})
    raise InputError(f"policy state: unreadable value {str(x)[:40]!r}")


def encode(state: Any) -> bytes:
    return json.dumps({"version": VERSION, "state": _enc(state)}, separators=(",", ":")).encode()


def decode(raw: bytes) -> Any:
    """The state written by ``encode``; InputError for anything else (a pickle, another version)."""
    try:
        doc = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError):
        raise InputError("policy state: not JSON (a pickled state from before schema 0002?)") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise InputError(f"policy state: version {doc.get('version') if isinstance(doc, dict) else None!r}, "
                         f"this tesserae reads {VERSION}")
    try:
        return _dec(doc.get("state"))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InputError(f"policy state: does not fit this tesserae's classes ({exc})") from None


def _queues(ids: tuple, bounds: tuple, seqs: list, sbs: list, ebs: list, pends: list) -> Mapping:
    """What an old pickle of Tiresias' column store (``_Queues.__reduce__``) held, as a plain mapping."""
    out = {}
    for q in range(len(bounds) - 1):
        for i in range(bounds[q], bounds[q + 1]):
            out[ids[i]] = QueuedJob(q, seqs[i], sbs[i], ebs[i], pends[i])
    return MappingProxyType(out)


def _mappingproxy(d: dict) -> Mapping:
    return MappingProxyType(d)


_LEGACY = {
    **{("tesserae_slurm.policies.tiresias", n): c for n, c in (("TiresiasState", TiresiasState),
                                                               ("QueuedJob", QueuedJob), ("_Queues", _queues))},
    ("tesserae_slurm.policies.gavel", "GavelState"): GavelState,
    ("tesserae_slurm.policies.gavel", "FtfMemory"): FtfMemory,
    ("tesserae_slurm.policies.gavel_rounds", "RoundState"): RoundState,
    ("tesserae_slurm.policies.ftf", "ThemisState"): ThemisState,
    ("tesserae_slurm.policies.ftf", "Contention"): Contention,
    ("tesserae_slurm.daemon.journal", "_mappingproxy"): _mappingproxy,
}


class _LegacyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        target = _LEGACY.get((module, name))
        if target is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a tesserae policy state")
        return target


def unpickle_legacy(raw: bytes) -> Any:
    """A pickled state from before the JSON format, resolving only the state classes (see module doc)."""
    return _LegacyUnpickler(io.BytesIO(raw)).load()
