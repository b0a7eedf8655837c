"""One entry point for every trace format, and the switch between model namespaces.

``load_trace`` picks the parser from the extension or the column count; ``models`` then maps the jobs
onto the profile the simulation will use ("a100" for Tesserae's A100 table, "gavel" for Gavel's
V100/P100/K80 table; None keeps the names the file uses).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from ...model import InputError
from .csv_format import load_csv
from .gavel_format import LAYOUTS, load_gavel, read_tsv
from .models import NAMESPACES, map_model
from .philly import load_philly
from .record import Trace
from .shockwave_format import COLUMNS as SHOCKWAVE_COLUMNS
from .shockwave_format import load_shockwave

log = logging.getLogger(__name__)

FORMATS = ("auto", "csv", "gavel", "philly", "shockwave")


def detect_format(path: str | Path) -> str:
    """csv by extension or commas; tab-separated files by their column count (12 Shockwave, 7 Philly)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory (load Philly VC directories with load_philly_dir)")
    if path.suffix.lower() == ".csv":
        return "csv"
    rows = read_tsv(path)
    if not rows:
        raise InputError(f"{path}: empty trace file")
    line, first = rows[0]
    width = len(first)
    if width == len(SHOCKWAVE_COLUMNS):
        return "shockwave"
    if width == 7:
        return "philly"
    if width in LAYOUTS:
        return "gavel"
    if width == 1 and "," in first[0]:
        return "csv"
    raise InputError(f"{path}:{line}: cannot tell the trace format: not a .csv and {width} tab-separated "
                     f"column(s) (Gavel has 10 or 9, Philly-derived 7, Shockwave 12)")


def load_trace(path: str | Path, fmt: str = "auto", *, models: str | None = None, name: str | None = None) -> Trace:
    """Read a trace file; ``models`` ("a100" | "gavel" | None) maps model names onto that profile."""
    if fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
    if not Path(path).exists():
        raise InputError(f"{path}: no such file")
    kind = detect_format(path) if fmt == "auto" else fmt
    log.debug("loading %s as %s", path, kind)
    if kind == "csv":
        trace = load_csv(path, name)
    elif kind == "gavel":
        trace = load_gavel(path, name)
    elif kind == "philly":
        trace = load_philly(path, name)
    else:
        trace = load_shockwave(path, name)
    return trace if models is None else to_models(trace, models)


def to_models(trace: Trace, namespace: str) -> Trace:
    """The same jobs with (model, batch) in ``namespace``; the old model is kept as ``source_type``."""
    if namespace not in NAMESPACES:
        raise InputError(f"unknown model namespace {namespace!r} (known: {', '.join(NAMESPACES)})")
    jobs = []
    for j in trace:
        try:
            model, batch = map_model(j.model, j.batch_size, j.num_gpus, namespace)
        except ValueError as exc:
            raise InputError(f"trace {trace.name!r}, job {j.job_id!r}: {exc}") from None
        if (model, batch) == (j.model, j.batch_size):
            jobs.append(j)
        else:
            jobs.append(dataclasses.replace(j, model=model, batch_size=batch, source_type=j.source_type or j.model))
    return Trace(trace.name, tuple(jobs))
