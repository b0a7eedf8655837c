"""Shockwave's 12-column ``.trace`` files (uw-mad-dash/shockwave ``scheduler/traces/reproduce``).

Columns: job_type, command, working_dir, num_steps_arg, needs_data_dir, total_steps, scale_factor,
mode, priority_weight, SLO, duration, arrival. Unlike Gavel's files these carry the duration (s), which
is used as is. ``mode`` (static / accordion / gns) says whether Shockwave let the batch size change
during training; the simulator keeps the job type's batch size throughout, so it is dropped.
File names read ``{jobs}_{min_h}_{max_h}_{n_durations}_{lam}_{seed}_{mode_mix}_{gpu_mix}_...``.
"""

from __future__ import annotations

from pathlib import Path

from ...model import InputError
from .cells import Where
from .gavel_format import gavel_job, read_tsv
from .record import Trace

COLUMNS = ("job_type", "command", "working_dir", "num_steps_arg", "needs_data_dir", "total_steps",
           "scale_factor", "mode", "priority_weight", "SLO", "duration", "arrival")
MODES = frozenset({"static", "accordion", "gns"})


def load_shockwave(path: str | Path, name: str | None = None) -> Trace:
    path = Path(path)
    rows = read_tsv(path)
    if not rows:
        raise InputError(f"{path}: empty trace file")
    jobs = []
    for index, (line, fields) in enumerate(rows):
        at = Where(path, line)
        if len(fields) != len(COLUMNS):
            raise at.error(f"expected {len(COLUMNS)} tab-separated columns (Shockwave trace), got {len(fields)}")
        c = dict(zip(COLUMNS, (f.strip() for f in fields), strict=True))
        if c["mode"] not in MODES:
            raise at.error(f"mode: expected one of {', '.join(sorted(MODES))}, got {c['mode']!r}")
        jobs.append(gavel_job(
            at, str(index), c["job_type"], at.count("scale_factor", c["scale_factor"]),
            at.positive("total_steps", c["total_steps"]), at.time("arrival", c["arrival"]),
            at.positive("priority_weight", c["priority_weight"]),
            duration=at.positive("duration", c["duration"])))
    return Trace.of(name or path.stem, jobs)


def jobs_in_name(path: str | Path) -> int | None:
    """The job count a Shockwave file name starts with (``120_0.2_5_...`` -> 120), if it does."""
    head = Path(path).name.split("_", 1)[0]
    return int(head) if head.isdigit() else None
