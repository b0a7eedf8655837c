"""Traces shipped inside the package (tesserae_slurm/data/traces), by short name.

``trace_from_arg`` is what command lines call: a shipped name or a path to any supported file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ...model import InputError
from .loader import load_trace
from .record import Trace

SHOCKWAVE_120 = "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"

# name -> (file, what it is)
SHIPPED: dict[str, tuple[str, str]] = {
    "demo": ("demo_60_s1.csv", "60 Tesserae-style jobs, 80 jobs/hour, seed 1 (README demo)"),
    "sample": ("tesserae_style_sample.csv", "10-job sample of the Tesserae/Blox generator output"),
    "tesserae-900": ("tesserae_900_r80_s0.csv", "900 Tesserae-style jobs, 80 jobs/hour, seed 0 (paper default)"),
    "shockwave-120": (SHOCKWAVE_120, "Shockwave's 120-job reproduce trace (Gavel job types)"),
}


def shipped_path(name: str) -> Path:
    if name not in SHIPPED:
        raise InputError(f"unknown shipped trace {name!r} (known: {', '.join(SHIPPED)})")
    return Path(str(resources.files("tesserae_slurm.data.traces").joinpath(SHIPPED[name][0])))


def load_shipped(name: str, *, models: str | None = None) -> Trace:
    return load_trace(shipped_path(name), models=models, name=name)


def trace_from_arg(arg: str, *, fmt: str = "auto", models: str | None = None) -> Trace:
    """A shipped trace name (``demo``, ``tesserae-900`` ...) or a path to a trace file."""
    if arg in SHIPPED and not Path(arg).exists():
        return load_shipped(arg, models=models)
    return load_trace(arg, fmt, models=models)
