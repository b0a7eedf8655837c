"""Pure parsers of Slurm client output (22.05, openapi v0.0.38 JSON), tested on recorded output.

No I/O here: every function takes text (or already-decoded JSON) and returns typed data.
Malformed output raises SlurmParseError with one line naming what was wrong; a JSON document
whose `errors` list is non-empty (what squeue/sinfo print when the controller is down, with exit
status 0) raises SlurmReportedError so the caller can treat it like an unreachable controller.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .runner import SlurmError
from .types import NodeGpus, SlurmJob, SlurmJobState, SlurmNode

log = logging.getLogger(__name__)


class SlurmParseError(SlurmError):
    """Slurm printed something this parser does not understand."""


class SlurmReportedError(SlurmError):
    """Slurm's JSON output carried an `errors` entry (e.g. controller unreachable)."""


# ---- small grammars --------------------------------------------------------------------------


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets/parentheses: `gpu:2(IDX:0,2),shard:1` -> 2 items."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_index_ranges(text: str) -> tuple[int, ...]:
    """`0-1,3` -> (0, 1, 3); `N/A` or empty -> ()."""
    text = text.strip()
    if not text or text.upper() == "N/A":
        return ()
    out: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                out.append(int(lo))
        except ValueError:
            raise SlurmParseError(f"bad index range {part!r} in {text!r}") from None
    return tuple(out)


_BRACKET = re.compile(r"\[([^\]]*)\]")


def parse_nodelist(text: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist: `node[1-3,5]` -> node1 node2 node3 node5; keeps zero padding."""
    text = (text or "").strip()
    if not text or text in ("(null)", "None"):
        return ()
    names: list[str] = []
    for item in split_top_level(text):
        names.extend(_expand_host(item))
    return tuple(dict.fromkeys(names))


def _expand_host(item: str) -> list[str]:
    pieces = _BRACKET.split(item)  # literal, range, literal, range, ..., literal
    if "[" in pieces[-1] or "]" in "".join(pieces[0::2]):
        raise SlurmParseError(f"bad node list {item!r}")
    choices: list[list[str]] = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            choices.append([piece])
        else:
            choices.append(_expand_range_set(piece, item))
    return ["".join(combo) for combo in itertools.product(*choices)]


def _expand_range_set(body: str, item: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise SlurmParseError(f"bad node range {part!r} in {item!r}")
        if not sep:
            out.append(lo)
            continue
        width = len(lo) if lo.startswith("0") else 0
        a, b = int(lo), int(hi)
        if b < a:
            raise SlurmParseError(f"descending node range {part!r} in {item!r}")
        out.extend(str(n).zfill(width) for n in range(a, b + 1))
    return out


@dataclass(frozen=True)
class GresEntry:
    """One item of a gres string: `gpu:a100:2(IDX:0-1)` -> name gpu, type a100, count 2, (0, 1)."""

    name: str
    type: str | None
    count: int
    indices: tuple[int, ...] | None


_GRES_TAIL = re.compile(r"^(?P<head>.*?)(?:\((?P<detail>[^()]*)\))?$")


def parse_gres(text: str) -> tuple[GresEntry, ...]:
    """Parse `gpu:4,shard:8`, `gpu:2(IDX:0-1)`, `gpu:(null):4(IDX:0-3)`, `shard:(null):0(IDX:N/A)`."""
    text = (text or "").strip()
    if not text or text in ("(null)", "N/A"):
        return ()
    entries: list[GresEntry] = []
    for item in split_top_level(text):
        m = _GRES_TAIL.match(item)
        assert m is not None  # the pattern matches any string
        head, detail = m.group("head"), m.group("detail")
        fields = head.split(":")
        if fields and fields[0] == "gres":  # tres_per_node style `gres:gpu:2`
            fields = fields[1:]
        if len(fields) < 2 or not fields[-1].isdigit():
            if len(fields) == 1 and fields[0]:
                entries.append(GresEntry(fields[0], None, 1, None))  # bare `gpu` means one
                continue
            raise SlurmParseError(f"bad gres entry {item!r} in {text!r}")
        gtype = ":".join(fields[1:-1]) or None
        if gtype == "(null)":
            gtype = None
        indices = None
        if detail is not None and detail.startswith("IDX:"):
            indices = parse_index_ranges(detail[4:])
        entries.append(GresEntry(fields[0], gtype, int(fields[-1]), indices))
    return tuple(entries)


def gres_count(text: str, name: str = "gpu") -> int:
    return sum(e.count for e in parse_gres(text) if e.name == name)


def gres_indices(text: str, name: str = "gpu") -> tuple[int, ...] | None:
    """Indices of `name` in a gres string, or None when Slurm gave none (e.g. plain `gpu:4`)."""
    found: list[int] = []
    seen = False
    for e in parse_gres(text):
        if e.name == name and e.indices is not None:
            seen = True
            found.extend(e.indices)
    return tuple(sorted(set(found))) if seen else None


# ---- command outputs -------------------------------------------------------------------------


def parse_sbatch_parsable(text: str) -> int:
    """`sbatch --parsable` prints `<id>` or `<id>;<cluster>`."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    head = line.split(";", 1)[0].strip()
    if not head.isdigit():
        raise SlurmParseError(f"sbatch --parsable printed {text.strip()!r}, expected a job id")
    return int(head)


_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int]:
    """`slurm-wlm 22.05.8` / `slurm 23.11.1` / `22.5.0` -> (22, 5)."""
    m = _VERSION.search(text)
    if m is None:
        raise SlurmParseError(f"no version in {text.strip()!r}")
    return int(m.group(1)), int(m.group(2))


def parse_ping(text: str) -> bool:
    """`scontrol ping`: True when the (primary) controller is UP."""
    lines = [ln for ln in text.splitlines() if "Slurmctld" in ln or "slurmctld" in ln]
    if not lines:
        raise SlurmParseError(f"unexpected scontrol ping output {text.strip()[:80]!r}")
    return "is UP" in lines[0]


def load_json(text: str, what: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlurmParseError(f"{what}: output is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(doc, dict):
        raise SlurmParseError(f"{what}: expected a JSON object, got {type(doc).__name__}")
    errors = doc.get("errors") or []
    if errors:
        first = errors[0] if isinstance(errors[0], dict) else {"error": str(errors[0])}
        msg = "; ".join(str(first[k]) for k in ("description", "error", "source") if first.get(k))
        raise SlurmReportedError(f"{what} reported: {msg or first}")
    return doc


def parse_squeue_json(text: str, partition: str | None = None) -> tuple[SlurmJob, ...]:
    """Jobs from `squeue --json` (which ignores -p/-j/-t on 22.05, so filter here)."""
    doc = load_json(text, "squeue --json")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise SlurmParseError("squeue --json: no 'jobs' list")
    out = [job_from_json(j) for j in jobs]
    if partition is not None:
        out = [j for j in out if partition in j.partition.split(",")]
    return tuple(out)


def parse_sinfo_json(text: str, partition: str | None = None) -> tuple[SlurmNode, ...]:
    doc = load_json(text, "sinfo --json")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        raise SlurmParseError("sinfo --json: no 'nodes' list")
    out = [node_from_json(n) for n in nodes]
    if partition is not None:
        out = [n for n in out if partition in n.partitions]
    return tuple(out)


def job_state(raw: Any) -> SlurmJobState:
    name = str(raw or "").split()[0].upper() if raw else "UNKNOWN"
    try:
        return SlurmJobState(name)
    except ValueError:
        log.warning("unknown Slurm job state %r", raw)
        return SlurmJobState.UNKNOWN


def job_from_json(j: Mapping[str, Any]) -> SlurmJob:
    try:
        job_id = int(j["job_id"])
    except (KeyError, TypeError, ValueError):
        raise SlurmParseError(f"squeue --json: job without a valid job_id: {str(j)[:80]}") from None
    state = job_state(j.get("job_state"))
    nodes = parse_nodelist(_s(j.get("nodes")))
    details = j.get("gres_detail") or []
    gpus: list[NodeGpus] = []
    for node, detail in zip(nodes, details):
        idx = gres_indices(str(detail), "gpu")
        if idx:
            gpus.append(NodeGpus(node, idx))
    reason = _s(j.get("state_description")) or _s(j.get("state_reason"))
    if reason == "None":
        reason = ""
    raw_exit = j.get("exit_code")
    exit_code = exit_signal = None
    if isinstance(raw_exit, int) and state.is_finished:
        exit_code, exit_signal = (raw_exit >> 8) & 0xFF, raw_exit & 0x7F
    tres = _s(j.get("tres_per_node"))
    return SlurmJob(
        job_id=job_id,
        name=_s(j.get("name")),
        user=_s(j.get("user_name")),
        state=state,
        reason=reason,
        partition=_s(j.get("partition")),
        nodes=nodes,
        gpus=tuple(gpus),
        comment=_s(j.get("comment")),
        admin_comment=_s(j.get("admin_comment")),
        restart_count=_i(j.get("restart_cnt")) or 0,
        priority=_i(j.get("priority")) or 0,
        submit_time=_t(j.get("submit_time")),
        eligible_time=_t(j.get("eligible_time")),
        start_time=None if state is SlurmJobState.PENDING else _t(j.get("start_time")),
        end_time=_t(j.get("end_time")) if state.is_finished else None,
        tres_per_node=tres,
        gpus_per_node=gres_count(tres, "gpu") if tres else 0,
        required_nodes=parse_nodelist(_s(j.get("required_nodes"))),
        batch_host=_s(j.get("batch_host")),
        requeue=bool(j.get("requeue")),
        exit_code=exit_code,
        exit_signal=exit_signal,
        state_reason="" if _s(j.get("state_reason")) == "None" else _s(j.get("state_reason")),
    )


def node_from_json(n: Mapping[str, Any]) -> SlurmNode:
    name = _s(n.get("name"))
    if not name:
        raise SlurmParseError(f"sinfo --json: node without a name: {str(n)[:80]}")
    gres, used = _s(n.get("gres")), _s(n.get("gres_used"))
    return SlurmNode(
        name=name,
        state=_s(n.get("state")).lower(),
        state_flags=tuple(str(f).upper() for f in n.get("state_flags") or ()),
        partitions=tuple(str(p) for p in n.get("partitions") or ()),
        cpus=_i(n.get("cpus")) or 0,
        alloc_cpus=_i(n.get("alloc_cpus")) or 0,
        gpus=gres_count(gres, "gpu"),
        gpus_used=gres_count(used, "gpu"),
        gpu_indices_used=gres_indices(used, "gpu"),
        shards=gres_count(gres, "shard"),
        shards_used=gres_count(used, "shard"),
        gres=gres,
        gres_used=used,
        reason=_s(n.get("reason")),
    )


def _s(v: Any) -> str:
    return "" if v is None else str(v)


def _i(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, dict):  # newer openapi versions wrap numbers: {"set": true, "number": 5}
        return int(v["number"]) if v.get("set") and "number" in v else None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _t(v: Any) -> int | None:
    t = _i(v)
    return t if t else None
