"""The project's trace CSV: a header line, then one job per row (any column order).

Required: ``job_id, submit_time, num_gpus, duration, model, batch_size`` (seconds for times).
Optional: ``user, priority, no_pack, total_steps, source_type, account, time_limit``. ``priority`` (> 0,
default 1) is Gavel's weight and the order of the ``slurm-priority`` configurations (higher first); ``user``
and ``account`` are what per-user and per-account GPU limits count against; ``time_limit`` is the seconds
the user requested, Slurm's ``--time`` (the ``slurm-backfill`` baseline models it when absent). The
Tesserae/Blox generator's output (``job_id,num_gpus,submit_time,duration,model,batch_size``) is this
format. ``write_csv`` output reads back to equal records.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from ...model import InputError
from .cells import Where, format_number
from .models import resolve_model
from .record import Trace, TraceJob

REQUIRED = ("job_id", "submit_time", "num_gpus", "duration", "model", "batch_size")
OPTIONAL = ("user", "priority", "no_pack", "total_steps", "source_type", "account", "time_limit")
COLUMNS = REQUIRED + OPTIONAL


def load_csv(path: str | Path, name: str | None = None) -> Trace:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None
    return parse_csv(text, str(path), name or path.stem)


def parse_csv(text: str, source: str = "<csv>", name: str = "trace") -> Trace:
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    try:
        for row in reader:
            at = Where(source, reader.line_num)
            if not row or all(not c.strip() for c in row):
                continue
            if header is None:
                header = _header(row, at)
                continue
            if len(row) != len(header):
                raise at.error(f"expected {len(header)} fields (as in the header), got {len(row)}")
            job = _job(dict(zip(header, (c.strip() for c in row), strict=True)), at)
            if job.job_id in seen:
                raise at.error(f"job_id: duplicate {job.job_id!r} (first on line {seen[job.job_id]})")
            seen[job.job_id] = at.line
            jobs.append(job)
    except csv.Error as exc:
        raise InputError(f"{source}:{reader.line_num}: malformed CSV ({exc})") from None
    if header is None:
        raise InputError(f"{source}: empty file (a header line is required: {','.join(REQUIRED)})")
    return Trace.of(name, jobs)


def _header(row: list[str], at: Where) -> list[str]:
    cols = [c.strip().lower() for c in row]
    unknown = [c for c in cols if c not in COLUMNS]
    if unknown:
        raise at.error(f"unknown column(s) {', '.join(map(repr, unknown))} "
                       f"(known: {', '.join(COLUMNS)}; the first line must be the header)")
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise at.error(f"duplicate column(s) {', '.join(dup)}")
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise at.error(f"missing required column(s) {', '.join(missing)}")
    return cols


def _job(cells: dict[str, str], at: Where) -> TraceJob:
    if not cells["job_id"]:
        raise at.error("job_id: empty")
    try:
        model, batch = resolve_model(cells["model"], cells["batch_size"])
    except ValueError as exc:
        raise at.error(f"model: {exc}") from None
    steps = cells.get("total_steps", "")
    return TraceJob(
        job_id=cells["job_id"],
        submit_time=at.time("submit_time", cells["submit_time"]),
        num_gpus=at.count("num_gpus", cells["num_gpus"]),
        duration=at.positive("duration", cells["duration"]),
        model=model,
        batch_size=batch,
        user=cells.get("user", ""),
        priority=at.positive("priority", cells["priority"]) if cells.get("priority") else 1.0,
        no_pack=at.flag("no_pack", cells.get("no_pack", "")),
        total_steps=at.count("total_steps", steps) if steps else None,
        source_type=cells.get("source_type") or None,
        account=cells.get("account", ""),
        time_limit=at.positive("time_limit", cells["time_limit"]) if cells.get("time_limit") else None,
    )


def dumps_csv(jobs: Iterable[TraceJob]) -> str:
    """CSV text for ``jobs``; optional columns appear only when some job differs from the default."""
    jobs = list(jobs)
    cols = list(REQUIRED)
    if any(j.user for j in jobs):
        cols.append("user")
    if any(j.priority != 1.0 for j in jobs):
        cols.append("priority")
    if any(j.no_pack for j in jobs):
        cols.append("no_pack")
    if any(j.total_steps is not None for j in jobs):
        cols.append("total_steps")
    if any(j.source_type for j in jobs):
        cols.append("source_type")
    if any(j.account for j in jobs):
        cols.append("account")
    if any(j.time_limit is not None for j in jobs):
        cols.append("time_limit")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(cols)
    for j in jobs:
        w.writerow([_cell(j, c) for c in cols])
    return out.getvalue()


def _cell(j: TraceJob, col: str) -> str:
    value = getattr(j, col)
    if col in ("submit_time", "duration", "priority") or (col == "time_limit" and value is not None):
        return format_number(value)
    if col == "no_pack":
        return "1" if value else "0"
    if value is None:
        return ""
    return str(value)


def write_csv(jobs: Iterable[TraceJob], path: str | Path) -> None:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps_csv(jobs), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror})") from None
