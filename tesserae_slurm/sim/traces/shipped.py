"""Traces shipped inside the package (tesserae_slurm/data/traces), by short name.

``trace_from_arg`` is what command lines call: a shipped name or a path to any supported file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ...model import InputError
from .loader import load_trace, to_models
from .philly import load_philly, load_philly_dir, merge_vcs
from .record import Trace

PHILLY_VCS = ("0e4a51", "103959", "11cb48", "23dbec", "2869ce", "51b7ef", "6214e9", "6c71a0", "795a4c", "7f04ca",
              "925e2b", "b436b2", "e13805", "ed69ec", "ee9e8c")

SHOCKWAVE_120 = "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"

# name -> (file, what it is)
SHIPPED: dict[str, tuple[str, str]] = {
    "demo": ("demo_60_s1.csv", "60 Tesserae-style jobs, 80 jobs/hour, seed 1 (README demo)"),
    "sample": ("tesserae_style_sample.csv", "10-job sample of the Tesserae/Blox generator output"),
    "tesserae-900": ("tesserae_900_r80_s0.csv", "900 Tesserae-style jobs, 80 jobs/hour, seed 0 (paper default)"),
    "shockwave-120": (SHOCKWAVE_120, "Shockwave's 120-job reproduce trace (Gavel job types)"),
}


# Gavel's Philly-derived per-VC traces (directory philly/): "philly" is all 15 VCs merged (15,264 jobs,
# for the 500-V100 cluster of Gavel's cluster_specs.json), "philly-<vc>" one VC.
PHILLY = {"philly": "all 15 Philly-derived VCs merged, 15,264 jobs (Gavel job types; Gavel ran them on 500 V100s)"}
PHILLY.update({f"philly-{vc}": f"Philly-derived VC {vc} (Gavel job types)" for vc in PHILLY_VCS})


def known_names() -> tuple[str, ...]:
    return (*SHIPPED, *PHILLY)


def shipped_path(name: str) -> Path:
    traces = resources.files("tesserae_slurm.data.traces")
    if name == "philly":
        return Path(str(traces.joinpath("philly")))
    if name in PHILLY:
        return Path(str(traces.joinpath("philly", f"{name.removeprefix('philly-')}.trace")))
    if name not in SHIPPED:
        raise InputError(f"unknown shipped trace {name!r} (known: {', '.join(SHIPPED)}, philly, philly-<vc>)")
    return Path(str(traces.joinpath(SHIPPED[name][0])))


def load_shipped(name: str, *, models: str | None = None) -> Trace:
    if name == "philly":
        merged = merge_vcs(load_philly_dir(shipped_path(name)), name)
        return merged if models is None else to_models(merged, models)
    if name in PHILLY:
        trace = load_philly(shipped_path(name), name)
        return trace if models is None else to_models(trace, models)
    return load_trace(shipped_path(name), models=models, name=name)


def trace_from_arg(arg: str, *, fmt: str = "auto", models: str | None = None) -> Trace:
    """A shipped trace name (``demo``, ``tesserae-900``, ``philly`` ...), a path to a trace file, or a
    directory of Philly-derived VC traces (merged)."""
    if arg in known_names() and not Path(arg).exists():
        return load_shipped(arg, models=models)
    if Path(arg).is_dir():
        merged = merge_vcs(load_philly_dir(arg), Path(arg).name)
        return merged if models is None else to_models(merged, models)
    return load_trace(arg, fmt, models=models)
