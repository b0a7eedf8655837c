"""The profile CSV format: the columns of Tesserae's A100 packing table, read and written.

``index,model1,dataset1,gpu_num1,batch_size1,speed1,co_pipeline_rank,pipeline_strategy,model2,
dataset2,gpu_num2,batch_size2,speed2``. A row with ``model2=Empty`` is ``model1`` alone (under
``pipeline_strategy``); any other row is the two jobs packed on the same GPUs, ``model1`` under the
strategy, ``model2`` without one (the format has one strategy column, so it cannot hold a pair of two
LLMs). ``co_pipeline_rank`` (which ranks of job 1 share GPUs with job 2) is informational: the engine
packs whole jobs on the same GPUs, so every row it reads or writes shares all ranks.

Three optional trailing columns extend the format for other sources: ``gpu_type`` (default ``a100``),
``throughput1`` (absolute steps/s of job 1 alone, isolated rows only) and ``sharing`` (pair rows:
``mps``, the default, or ``timeslice`` for a pair measured time-sliced, as two users' jobs share a
GPU). The writer adds them only when the profile needs them, so the shipped A100 table round-trips
with its own 13 columns.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from ..model import InputError
from .build import build_profile
from .keys import MPS, SHARINGS, STRATEGY_NA, IsolatedRecord, PairOption, PairRecord, ProfileKey, strategy_from_cell
from .table import ThroughputProfile

COLUMNS = ("index", "model1", "dataset1", "gpu_num1", "batch_size1", "speed1", "co_pipeline_rank",
           "pipeline_strategy", "model2", "dataset2", "gpu_num2", "batch_size2", "speed2")
OPTIONAL = ("gpu_type", "throughput1", "sharing")
EMPTY = "Empty"
DEFAULT_GPU = "a100"


def _int(cell: str, col: str, where: str) -> int:
    try:
        value = int(cell)
    except ValueError:
        raise InputError(f"{where}: {col} must be a positive integer, got {cell!r}") from None
    if value <= 0:
        raise InputError(f"{where}: {col} must be a positive integer, got {cell!r}")
    return value


def _float(cell: str, col: str, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise InputError(f"{where}: {col} must be a number, got {cell!r}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: {col} must be a finite number >= 0, got {cell!r}")
    return value


def parse_profile_csv(text: str, source: str, name: str | None = None) -> ThroughputProfile:
    """Parse the CSV text of a profile; errors name ``source`` and the line."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise InputError(f"{source}: empty file, expected a header with columns {','.join(COLUMNS)}")
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    unknown = [c for c in header if c not in COLUMNS + OPTIONAL]
    if missing or unknown:
        lacks = f"lacks {', '.join(missing)}" if missing else ""
        extra = f"has unknown {', '.join(unknown)}" if unknown else ""
        raise InputError(f"{source}:1: header " + lacks + ("; " if missing and unknown else "") + extra)
    col = {c: i for i, c in enumerate(header)}
    isolated: list[IsolatedRecord] = []
    pairs: list[PairRecord] = []
    datasets: dict[str, str] = {}
    for cells in reader:
        where = f"{source}:{reader.line_num}"
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise InputError(f"{where}: expected {len(header)} columns, got {len(cells)}")
        row = {c: cells[i].strip() for c, i in col.items()}
        if not row["model1"]:
            raise InputError(f"{where}: model1 is empty")
        gpu = row.get("gpu_type") or DEFAULT_GPU
        key1 = ProfileKey(row["model1"], row["batch_size1"], _int(row["gpu_num1"], "gpu_num1", where))
        speed1 = _float(row["speed1"], "speed1", where)
        strategy = strategy_from_cell(row["pipeline_strategy"])
        datasets.setdefault(row["model1"], row["dataset1"])
        if row["model2"] == EMPTY:
            tput = row.get("throughput1", "")
            isolated.append(IsolatedRecord(gpu, key1, strategy, speed1,
                                           _float(tput, "throughput1", where) if tput else None))
            continue
        if not row["model2"]:
            raise InputError(f"{where}: model2 is empty (write {EMPTY} for a job alone)")
        key2 = ProfileKey(row["model2"], row["batch_size2"], _int(row["gpu_num2"], "gpu_num2", where))
        if key2.num_gpus != key1.num_gpus:
            raise InputError(f"{where}: gpu_num1 {key1.num_gpus} != gpu_num2 {key2.num_gpus}; packed jobs "
                             "share the same GPUs")
        datasets.setdefault(row["model2"], row["dataset2"])
        sharing = row.get("sharing") or MPS
        if sharing not in SHARINGS:
            raise InputError(f"{where}: sharing must be {' or '.join(SHARINGS)}, got {sharing!r}")
        pairs.append(PairRecord(gpu, key1, key2, PairOption(strategy, None, speed1,
                                                            _float(row["speed2"], "speed2", where)),
                                sharing=sharing))
    try:
        return build_profile(name or Path(source).stem, isolated, pairs, datasets)
    except InputError as e:
        raise InputError(f"{source}: {e}") from None


def load_a100_csv(path: str | Path, name: str | None = None) -> ThroughputProfile:
    """Tesserae's A100 table, or any profile CSV in the same columns."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{p}: cannot read profile: {e.strerror}") from None
    return parse_profile_csv(text, str(p), name)


def _batch(key: ProfileKey, written: str) -> str:
    return written or key.batch_size


def profile_csv_text(profile: ThroughputProfile) -> str:
    """The profile in CSV form; ``parse_profile_csv`` of it gives an equal profile."""
    extra_gpu = any(g != DEFAULT_GPU for g in profile.gpu_types)
    extra_tput = any(r.throughput is not None for r in profile.isolated)
    extra_sharing = any(p.sharing != MPS for p in profile.pairs)
    header = list(COLUMNS) + (["gpu_type"] if extra_gpu else []) + (["throughput1"] if extra_tput else []) + (
        ["sharing"] if extra_sharing else [])
    paired = {(p.gpu_type, k) for p in profile.pairs for k in (p.a, p.b)}
    rows: list[list[str]] = []

    def emit(cells: list[str], gpu: str, tput: float | None, sharing: str = "") -> None:
        cells = [str(len(rows))] + cells
        if extra_gpu:
            cells.append(gpu)
        if extra_tput:
            cells.append("" if tput is None else repr(tput))
        if extra_sharing:
            cells.append(sharing)
        rows.append(cells)

    def ds(model: str) -> str:
        return profile.datasets.get(model, "NA") or "NA"

    for r in profile.isolated:
        implicit = r.strategy is None and r.speed == 1.0 and r.throughput is None
        if implicit and (r.gpu_type, r.key) in paired:
            continue  # reloading re-creates it from the pair rows
        k = r.key
        emit([k.model, ds(k.model), str(k.num_gpus), _batch(k, r.written_batch), repr(r.speed), "NA",
              r.strategy or STRATEGY_NA, EMPTY, "NA", "0", "0", "0.0"], r.gpu_type, r.throughput)
    for p in profile.pairs:
        a, b, opt, wa, wb = p.a, p.b, p.option, p.a_written_batch, p.b_written_batch
        if opt.b_strategy is not None:
            if opt.a_strategy is not None:
                raise InputError(f"profile {profile.name}: pair {a} + {b} has two strategies; the CSV format "
                                 "holds one (write it as JSON)")
            a, b, opt, wa, wb = b, a, opt.swapped(), wb, wa
        ranks = ",".join(str(i) for i in range(a.num_gpus))
        emit([a.model, ds(a.model), str(a.num_gpus), _batch(a, wa), repr(opt.a_speed), ranks,
              opt.a_strategy or STRATEGY_NA, b.model, ds(b.model), str(b.num_gpus), _batch(b, wb),
              repr(opt.b_speed)], p.gpu_type, None, p.sharing)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def write_profile_csv(profile: ThroughputProfile, path: str | Path) -> None:
    Path(path).write_text(profile_csv_text(profile), encoding="utf-8")
