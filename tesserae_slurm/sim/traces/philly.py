"""Gavel's Philly-derived traces: one 7-column ``<vc>.trace`` per Philly virtual cluster.

Gavel (``traces/msr/seed=N/``) replayed each virtual cluster (VC) of Microsoft's Philly trace with a
Gavel job type drawn per job; arrival times and GPU counts (up to 64) are Philly's. Durations follow
the Gavel rule in gavel_format.py: total_steps / solo v100 throughput of (job type, scale factor),
with unmeasured scale factors standing in as described in ``models.gavel_table_key``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from ...model import InputError
from .gavel_format import column_count, load_gavel
from .record import Trace

PHILLY_COLUMNS = 7


def load_philly(path: str | Path, name: str | None = None) -> Trace:
    """One VC file; refuses other Gavel layouts so a mixed-up path fails loudly."""
    path = Path(path)
    width = column_count(path)
    if width != PHILLY_COLUMNS:
        raise InputError(f"{path}: a Philly-derived trace has {PHILLY_COLUMNS} tab-separated columns, got {width}")
    return load_gavel(path, name or f"philly-{path.stem}")


def load_philly_dir(directory: str | Path) -> tuple[Trace, ...]:
    """Every ``*.trace`` in a ``seed=N`` directory, one trace per VC, ordered by VC name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory of Philly VC traces")
    files = sorted(directory.glob("*.trace"))
    if not files:
        raise InputError(f"{directory}: no *.trace files")
    return tuple(load_philly(f) for f in files)


def merge_vcs(traces: Sequence[Trace], name: str) -> Trace:
    """All VCs as one trace on one cluster (ids become ``<vc>-<id>``; each VC's clock starts at 0)."""
    jobs = []
    for t in traces:
        vc = t.name.removeprefix("philly-")
        jobs += [dataclasses.replace(j, job_id=f"{vc}-{j.job_id}") for j in t]
    return Trace.of(name, jobs)
