"""What ``--trace`` means on the command line: a shipped name, a file, or a generator spec.

* ``demo``, ``sample``, ``tesserae-900``, ``shockwave-120``: traces shipped in the package;
* a path: any format ``load_trace`` detects (CSV, Gavel, Shockwave, Philly-derived);
* ``gen:tesserae:JOBS[:RATE[:SEED]]`` / ``gen:gavel:JOBS[:RATE[:SEED]]``: a fresh seeded trace from
  the Tesserae- or Gavel-style generator (RATE jobs/hour, default 80; SEED default 0).

``models`` ("a100" | "gavel" | None) maps the trace's model names onto the profile the simulation
uses (docs/traces.md); None keeps the names the file has.
"""

from __future__ import annotations

from pathlib import Path

from ..model import InputError
from .traces import Trace, generate_gavel, generate_tesserae, to_models, trace_from_arg

GENERATORS = ("tesserae", "gavel")


def resolve_trace(arg: str, models: str | None = None) -> tuple[Trace, str]:
    """(trace, display name) for a ``--trace`` value."""
    if not arg or not arg.strip():
        raise InputError("empty --trace value")
    if arg.startswith("gen:"):
        trace = _generate(arg)
        trace = trace if models is None else to_models(trace, models)
        return trace, arg
    trace = trace_from_arg(arg, models=models)
    name = arg if not Path(arg).exists() else Path(arg).stem
    return trace, name


def _generate(spec: str) -> Trace:
    parts = spec.split(":")[1:]
    usage = f"bad generator spec {spec!r}: expected gen:tesserae|gavel:JOBS[:RATE[:SEED]]"
    if not 2 <= len(parts) <= 4 or parts[0] not in GENERATORS:
        raise InputError(usage)
    try:
        jobs = int(parts[1])
        rate = float(parts[2]) if len(parts) > 2 else 80.0
        seed = int(parts[3]) if len(parts) > 3 else 0
    except ValueError:
        raise InputError(usage) from None
    if jobs <= 0:
        raise InputError(f"{usage} (JOBS must be > 0)")
    if parts[0] == "tesserae":
        return generate_tesserae(jobs, rate, seed).renamed(spec)
    return generate_gavel(jobs, rate, seed).renamed(spec)
