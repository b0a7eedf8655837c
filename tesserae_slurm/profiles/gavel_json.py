"""Gavel's simulation throughput table (stanford-futuredata/gavel, MIT) as a profile.

``{worker_type: {"('<job type>', scale_factor)": {"null": solo_steps_per_s,
"('<other type>', sf)": [self_steps_per_s, other_steps_per_s]}}}``. Each worker type is a GPU type;
the ``*_unconsolidated`` ones are skipped because the engine always places consolidated. The model
name is Gavel's job type (``"ResNet-50 (batch size 64)"``, ``"A3C"``), its batch the one in the name
(empty when it has none), and the GPU count the scale factor. Speeds are normalized per GPU type:
packed steps/s divided by the same job's solo steps/s, so every job alone is 1.0 and the absolute
solo steps/s is kept as ``isolated_throughput``. A ``[0, 0]`` pair entry is kept as infeasible. A
job type whose solo throughput is 0 (K80, ResNet-50 batch 128 at 2/4/8 GPUs) was not measured and
is left out, so it takes the unmeasured-key fallback.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..model import InputError
from .build import build_profile
from .keys import IsolatedRecord, PairOption, PairRecord, ProfileKey, embedded_batch
from .table import ThroughputProfile

log = logging.getLogger(__name__)

WORKER_TYPES = ("k80", "p100", "v100")
_JOB_KEY = re.compile(r"^\('(?P<type>[^']+)', (?P<sf>\d+)\)$")


def _key(text: str, where: str) -> ProfileKey:
    m = _JOB_KEY.match(text)
    if not m or int(m["sf"]) <= 0:
        raise InputError(f"{where}: bad job key {text!r}, expected \"('<job type>', <scale factor>)\"")
    job_type = m["type"]
    return ProfileKey(job_type, embedded_batch(job_type) or "", int(m["sf"]))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: expected a finite number >= 0, got {value!r}")
    return float(value)


def parse_gavel(data: Any, source: str, worker_types: tuple[str, ...] = WORKER_TYPES,
                name: str = "gavel") -> ThroughputProfile:
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: expected an object of worker types")
    missing = [w for w in worker_types if w not in data]
    if missing:
        raise InputError(f"{source}: no worker type {', '.join(missing)}; found {', '.join(map(str, data))}")
    isolated: list[IsolatedRecord] = []
    pairs: list[PairRecord] = []
    for worker in worker_types:
        table = data[worker]
        if not isinstance(table, Mapping):
            raise InputError(f"{source}: {worker}: expected an object of job keys")
        solo: dict[ProfileKey, float] = {}
        for text, entry in table.items():
            where = f"{source}: {worker}[{text!r}]"
            if not isinstance(entry, Mapping) or "null" not in entry:
                raise InputError(f"{where}: expected an object with a \"null\" (solo) entry")
            key = _key(text, where)
            tput = _number(entry["null"], f"{where}[\"null\"]")
            if tput == 0.0:
                log.debug("%s: solo throughput 0, job type left out", where)
                continue
            solo[key] = tput
            isolated.append(IsolatedRecord(worker, key, None, 1.0, tput))
        for text, entry in table.items():
            key = _key(text, source)
            if key not in solo:
                continue
            for other_text, value in entry.items():
                if other_text == "null":
                    continue
                where = f"{source}: {worker}[{text!r}][{other_text!r}]"
                other = _key(other_text, where)
                if not isinstance(value, list) or len(value) != 2:
                    raise InputError(f"{where}: expected [self, other] steps/s")
                mine, theirs = _number(value[0], where), _number(value[1], where)
                if other not in solo or other.num_gpus != key.num_gpus:
                    continue
                pairs.append(PairRecord(worker, key, other,
                                        PairOption(None, None, mine / solo[key], theirs / solo[other])))
    try:
        return build_profile(name, isolated, pairs)
    except InputError as e:
        raise InputError(f"{source}: {e}") from None


def parse_gavel_text(text: str, source: str, worker_types: tuple[str, ...] = WORKER_TYPES) -> ThroughputProfile:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source}:{e.lineno}: invalid JSON: {e.msg}") from None
    return parse_gavel(data, source, worker_types)


def load_gavel_json(path: str | Path, worker_types: tuple[str, ...] = WORKER_TYPES) -> ThroughputProfile:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{p}: cannot read profile: {e.strerror}") from None
    return parse_gavel_text(text, str(p), worker_types)
