"""Where profiles come from: the two shipped tables by name, a file by path, or an inline object.

The only I/O of the package. Shipped tables are found with importlib.resources (they are package
data of ``tesserae_slurm.data``) and parsed once per process: a profile is immutable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..model import InputError
from .csv_format import parse_profile_csv
from .gavel_json import parse_gavel, parse_gavel_text
from .inline_json import profile_from_json
from .table import ThroughputProfile

DEFAULT_PROFILE = "a100"
SHIPPED = {
    "a100": "a100_packing_norm_speed.csv",  # Tesserae's A100 packing table (msr-fiddle/blox, MIT)
    "gavel": "gavel_simulation_throughputs.json",  # Gavel's K80/P100/V100 table (stanford-futuredata/gavel, MIT)
}


@cache
def _shipped(name: str) -> ThroughputProfile:
    res = resources.files("tesserae_slurm.data").joinpath(SHIPPED[name])
    text = res.read_text(encoding="utf-8")
    source = f"<shipped {SHIPPED[name]}>"
    if name == "gavel":
        return parse_gavel_text(text, source)
    return parse_profile_csv(text, source, name=name)


def _json_profile(text: str, source: str) -> ThroughputProfile:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source}:{e.lineno}: invalid JSON: {e.msg}") from None
    if isinstance(data, Mapping) and ("isolated" in data or "pairs" in data):
        return profile_from_json(data, source)
    return parse_gavel(data, source, name=Path(source).stem)


def load_profile(name_or_path: str | Path = DEFAULT_PROFILE) -> ThroughputProfile:
    """``a100`` (default) / ``gavel``, or a path: ``.csv`` = profile CSV, ``.json`` = inline or Gavel."""
    spec = str(name_or_path).strip()
    if spec.lower() in SHIPPED:
        return _shipped(spec.lower())
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"unknown profile {spec!r}: not a shipped name ({', '.join(SHIPPED)}) and no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read profile: {e.strerror}") from None
    if path.suffix.lower() == ".json":
        return _json_profile(text, str(path))
    if path.suffix.lower() == ".csv":
        return parse_profile_csv(text, str(path))
    raise InputError(f"{path}: unknown profile format (expected .csv or .json)")


def profile_from_spec(spec: str | Path | Mapping[str, Any] | None) -> ThroughputProfile:
    """What a config or state file's ``profile`` value means: a name, a path, or an inline table."""
    if spec is None:
        return load_profile(DEFAULT_PROFILE)
    if isinstance(spec, Mapping):
        return profile_from_json(spec, "profile")
    if isinstance(spec, (str, Path)):
        return load_profile(spec)
    raise InputError(f"profile must be a name, a path or an inline table, got {type(spec).__name__}")
