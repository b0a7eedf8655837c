"""Gavel's tab-separated ``.trace`` files (and the Philly-derived 7-column variant).

Column layouts, one job per line, no header (Gavel ``scheduler/utils.py:parse_trace``):

* 10 columns (current Gavel): job_type, command, working_directory, num_steps_arg, needs_data_dir,
  total_steps, scale_factor, priority_weight, SLO, arrival_time
* 9 columns (Gavel before working_directory was added): the same without working_directory
* 7 columns (``traces/msr/seed=*/<vc>.trace``, derived from Philly): job_type, command, num_steps_arg,
  needs_data_dir, total_steps, arrival_time, scale_factor

These files give steps, not time. A job's isolated duration is ``total_steps`` divided by its solo
throughput on Gavel's reference worker (v100) for its (job type, scale factor), the inverse of how
Gavel's generator made the steps. Scale factors Gavel never measured (Philly asks for up to 64 GPUs;
Recommendation/A3C/CycleGAN were measured on 1 GPU only) use ``models.gavel_table_key``. Job ids are
the 0-based line order, as Gavel numbers them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from ...model import InputError
from .cells import Where
from .models import gavel_table_key, split_gavel_type
from .record import Trace, TraceJob

REFERENCE_WORKER = "v100"
LAYOUTS: dict[int, tuple[str, ...]] = {
    10: ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
         "scale_factor", "priority_weight", "SLO", "arrival_time"),
    9: ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "scale_factor",
        "priority_weight", "SLO", "arrival_time"),
    7: ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time",
        "scale_factor"),
}
_KEY_RE = re.compile(r"^\('(?P<type>.+)', (?P<sf>\d+)\)$")

Throughputs = Mapping[tuple[str, int], float]


@lru_cache(maxsize=8)
def solo_throughputs(worker: str = REFERENCE_WORKER) -> Throughputs:
    """Isolated steps/s by (job type, scale factor) from the shipped Gavel table (read once)."""
    text = resources.files("tesserae_slurm.data").joinpath("gavel_simulation_throughputs.json").read_text()
    table = json.loads(text)
    if worker not in table:
        raise InputError(f"Gavel throughput table has no worker type {worker!r} (known: {', '.join(table)})")
    out: dict[tuple[str, int], float] = {}
    for key, row in table[worker].items():
        m = _KEY_RE.match(key)
        if m and row.get("null"):
            out[(m["type"], int(m["sf"]))] = float(row["null"])
    return MappingProxyType(out)


def read_tsv(path: str | Path) -> list[tuple[int, list[str]]]:
    """(line number, fields) for each non-blank line; the file is read whole (traces are small)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None
    return [(i, line.split("\t")) for i, line in enumerate(lines, start=1) if line.strip()]


def column_count(path: str | Path) -> int:
    rows = read_tsv(path)
    if not rows:
        raise InputError(f"{path}: empty trace file")
    return len(rows[0][1])


def steps_duration(at: Where, job_type: str, num_gpus: int, steps: float, throughputs: Throughputs) -> float:
    key = gavel_table_key(job_type, num_gpus)
    rate = throughputs.get(key)
    if not rate:
        raise at.error(f"no solo throughput for {key} in the Gavel table")
    return steps / rate


def gavel_job(at: Where, job_id: str, job_type: str, num_gpus: int, steps: float, arrival: float,
              priority: float = 1.0, duration: float | None = None,
              throughputs: Throughputs | None = None) -> TraceJob:
    """A Gavel-namespace record (model = the job type string) for one parsed line."""
    try:
        _, batch = split_gavel_type(job_type)
    except ValueError as exc:
        raise at.error(f"job_type: {exc}") from None
    if duration is None:
        duration = steps_duration(at, job_type, num_gpus, steps, throughputs or solo_throughputs())
    return TraceJob(job_id=job_id, submit_time=arrival, num_gpus=num_gpus, duration=duration, model=job_type,
                    batch_size="" if batch is None else str(batch), priority=priority,
                    total_steps=max(1, round(steps)), source_type=job_type)


def load_gavel(path: str | Path, name: str | None = None, throughputs: Throughputs | None = None) -> Trace:
    """A Gavel 10/9-column or Philly-derived 7-column trace (the layout is chosen by column count)."""
    path = Path(path)
    rows = read_tsv(path)
    if not rows:
        raise InputError(f"{path}: empty trace file")
    width = len(rows[0][1])
    if width not in LAYOUTS:
        raise InputError(f"{path}:{rows[0][0]}: expected {', '.join(map(str, sorted(LAYOUTS)))} tab-separated "
                         f"columns (Gavel trace), got {width}")
    cols = LAYOUTS[width]
    jobs = []
    for index, (line, fields) in enumerate(rows):
        at = Where(path, line)
        if len(fields) != width:
            raise at.error(f"expected {width} tab-separated columns like line {rows[0][0]}, got {len(fields)}")
        c = dict(zip(cols, (f.strip() for f in fields), strict=True))
        jobs.append(gavel_job(
            at, str(index), c["job_type"], at.count("scale_factor", c["scale_factor"]),
            at.positive("total_steps", c["total_steps"]), at.time("arrival_time", c["arrival_time"]),
            at.positive("priority_weight", c["priority_weight"]) if "priority_weight" in c else 1.0,
            throughputs=throughputs))
    return Trace.of(name or path.stem, jobs)
