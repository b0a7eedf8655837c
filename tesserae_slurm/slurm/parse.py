"""Pure parsers of Slurm client output (22.05 to 26.05), tested on recorded and source-built output.

No I/O here: every function takes text (or already-decoded JSON) and returns typed data.
Malformed output raises SlurmParseError with one line naming what was wrong; a JSON document
whose `errors` list is non-empty (what squeue/sinfo print when the controller is down, with exit
status 0) raises SlurmReportedError so the caller can treat it like an unreachable controller.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .runner import SlurmError
from .types import NodeGpus, SlurmJob, SlurmJobState, SlurmNode


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
_HOSTLIST_SYNTAX = frozenset("[](),")


def parse_nodelist(text: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist: `node[1-3,5]` -> node1 node2 node3 node5; keeps zero padding."""
    text = (text or "").strip()
    if not text or text in ("(null)", "None"):
        return ()
    if not _HOSTLIST_SYNTAX.intersection(text):  # one plain name: what most jobs print
        return (text,)
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
        if fields and fields[0] == "gres":  # tres_per_node style `gres:gpu:2` (22.05)
            fields = fields[1:]
        elif fields and fields[0].startswith("gres/"):  # `gres/gpu:2` (23.11 and later)
            fields[0] = fields[0][len("gres/"):]
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


def parse_squeue_poll(text: str) -> tuple[tuple[str, str], ...]:
    """`squeue -h -o "%i %t"`: (job id, compact state) per line, e.g. ("4711", "PD")."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if len(words) != 2:
            raise SlurmParseError(f"squeue printed {line.strip()[:80]!r}, expected 'JOBID STATE'")
        out.append((words[0], words[1]))
    return tuple(out)


def parse_squeue_brief(text: str) -> tuple[SlurmJob, ...]:
    """`commands.squeue_brief`'s lines (`|` after each field, times in epoch seconds) as SlurmJobs that
    carry those fields alone: id, state, owner, run count, start, end, exit code and nodes; the rest keep
    their defaults. 22.05 prints the exit code as the raw wait status, 24.11 and later as `code:signal`."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.strip().split("|")
        if len(fields) != 9 or fields[-1] or not fields[0].isdigit():
            raise SlurmParseError(f"squeue printed {line.strip()[:80]!r}, expected 8 fields each ended by '|'")
        job_id, state_name, user, restarts, start, end, code, nodes, _ = fields
        where = f"squeue --jobs job {job_id}"
        state = job_state(state_name, where)
        exit_code = exit_signal = None
        if state.is_finished:
            exit_code, exit_signal = _brief_exit(code, where)
        out.append(SlurmJob(
            job_id=int(job_id), name="", user=user, state=state, nodes=parse_nodelist(nodes),
            restart_count=_i(restarts) or 0,
            start_time=None if state is SlurmJobState.PENDING else _epoch(start),
            end_time=_epoch(end) if state.is_finished else None,
            exit_code=exit_code, exit_signal=exit_signal,
        ))
    return tuple(out)


def _epoch(text: str) -> int | None:
    """Seconds, or None for what squeue prints for no time (N/A, Unknown, None, NONE)."""
    return int(text) if text.isdigit() and int(text) > 0 else None


def _brief_exit(text: str, where: str) -> tuple[int, int] | tuple[None, None]:
    code, sep, sig = text.partition(":")
    if sep and code.isdigit() and sig.isdigit():
        return int(code), int(sig)
    if not text.strip():  # 24.11+: no exit code recorded (NO_VAL) prints nothing
        return None, None
    status = _i(text)
    if status is None or status < 0:  # 22.05 prints NO_VAL as a negative int
        raise SlurmParseError(f"{where}: cannot read exit code {text!r}")
    return exit_status(status, where)


_KILL_REFUSED = re.compile(r"Kill job error on job id (\d+)\S*: (.*)$")


def parse_scancel_refusals(stderr: str) -> dict[int, str] | None:
    """The jobs a failed multi-job `scancel` names as refused (`Kill job error on job id N: why`), or None
    when some line is not such a refusal: then scancel may have stopped before signalling any job. An
    empty stderr is no refusal named: scancel refuses a job that ended under it without a word."""
    refused: dict[int, str] = {}
    for line in stderr.splitlines():
        if not line.strip():
            continue
        m = _KILL_REFUSED.search(line)
        if m is None:
            return None
        refused[int(m.group(1))] = m.group(2).strip()
    return refused


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


# ---- versioned JSON --------------------------------------------------------------------------
#
# One reader per document, tolerant of the shapes the supported releases print (see
# docs/slurm-versions.md), strict about presence: a field the daemon needs that is missing fails
# with one line naming the Slurm version and the field, and a job state it cannot name is an error.

Version = tuple[int, int]
FIRST_SCONTROL_NODE_JSON: Version = (23, 2)  # sinfo --json lost its per-node list in 23.02


def version_label(version: Version | None) -> str:
    return f"Slurm {version[0]}.{version[1]:02d}" if version else "Slurm (version unknown)"


def nodes_source(version: Version) -> str:
    """Which command lists nodes on `version`: `sinfo` (22.05) or `scontrol` (23.02 and later)."""
    return "scontrol" if version >= FIRST_SCONTROL_NODE_JSON else "sinfo"


_JOB_FIELDS = (
    "job_id", "job_state", "name", "user_name", "partition", "nodes", "gres_detail", "comment",
    "admin_comment", "restart_cnt", "priority", "submit_time", "start_time", "end_time",
    "tres_per_node", "required_nodes", "batch_host", "requeue", "exit_code", "state_reason", "account", "nice",
)
_JOB_FIELD_SET = frozenset(_JOB_FIELDS)
_NODE_FIELDS = ("name", "state", "partitions", "cpus", "alloc_cpus", "gres", "gres_used", "reason")


def parse_squeue_json(text: str, partition: str | None = None, version: Version | None = None) -> tuple[SlurmJob, ...]:
    """Jobs from `squeue --json` (22.05 ignores -p/-j/-t there, so filter here)."""
    what = f"{version_label(version)}: squeue --json"
    doc = load_json(text, what)
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise SlurmParseError(f"{what} has no 'jobs' list")
    out = [job_from_json(j, version) for j in jobs]
    if partition is not None:
        out = [j for j in out if partition in j.partition.split(",")]
    return tuple(out)


def parse_sinfo_json(text: str, partition: str | None = None, version: Version | None = None) -> tuple[SlurmNode, ...]:
    """Nodes from 22.05's `sinfo --json` (23.02+ print grouped `sinfo` entries instead: use scontrol)."""
    return _parse_nodes_doc(text, partition, version, "sinfo --json")


def parse_scontrol_nodes_json(text: str, partition: str | None = None,
                              version: Version | None = None) -> tuple[SlurmNode, ...]:
    """Nodes from `scontrol show node --json` (23.02 and later)."""
    return _parse_nodes_doc(text, partition, version, "scontrol show node --json")


def _parse_nodes_doc(text: str, partition: str | None, version: Version | None, cmd: str) -> tuple[SlurmNode, ...]:
    what = f"{version_label(version)}: {cmd}"
    doc = load_json(text, what)
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        hint = (" (it has a 'sinfo' list: Slurm 23.02+ lists nodes with scontrol show node --json)"
                if "sinfo" in doc else "")
        raise SlurmParseError(f"{what} has no 'nodes' list{hint}")
    out = [node_from_json(n, version, cmd) for n in nodes]
    if partition is not None:
        out = [n for n in out if partition in n.partitions]
    return tuple(out)


# job_state_string()'s precedence: a flag that names the state wins over the base state.
_STATE_FLAG_ORDER = (
    "COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING",
)
_BASE_STATES = frozenset(
    {"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
     "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
)


def job_state_names(raw: Any) -> tuple[str, ...]:
    """`"RUNNING"` (22.05/23.02) or `["PENDING", "REQUEUED"]` (23.11+) -> upper-case names."""
    if isinstance(raw, str):
        names = raw.split()
    elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        names = list(raw)
    else:
        names = []
    return tuple(n.strip().upper() for n in names if n.strip())


def job_state(raw: Any, where: str = "job") -> SlurmJobState:
    """The state the daemon acts on; raises SlurmParseError when none of the names is known."""
    names = job_state_names(raw)
    for flag in _STATE_FLAG_ORDER:
        if flag in names:
            return SlurmJobState(flag)
    base = [n for n in names if n in _BASE_STATES]
    if len(base) != 1:
        raise SlurmParseError(f"{where}: cannot read job_state {raw!r}")
    return SlurmJobState(base[0])


def _require(obj: Mapping[str, Any], fields: tuple[str, ...], where: str) -> None:
    for f in fields:
        if f not in obj:
            raise SlurmParseError(f"{where} has no {f!r}")


def job_from_json(j: Mapping[str, Any], version: Version | None = None) -> SlurmJob:
    where = f"{version_label(version)}: squeue --json job"
    if not isinstance(j, Mapping):
        raise SlurmParseError(f"{where} entry is not an object: {str(j)[:80]}")
    try:
        job_id = int(j["job_id"])
    except (KeyError, TypeError, ValueError):
        raise SlurmParseError(f"{where} without a valid job_id: {str(j)[:80]}") from None
    where = f"{where} {job_id}"
    if not _JOB_FIELD_SET <= j.keys():
        _require(j, _JOB_FIELDS, where)
    state = job_state(j["job_state"], where)
    flags = job_state_names(j["job_state"])
    nodes = parse_nodelist(_s(j["nodes"]))
    details = j["gres_detail"] or []
    gpus: list[NodeGpus] = []
    for node, detail in zip(nodes, details):
        idx = gres_indices(str(detail), "gpu")
        if idx:
            gpus.append(NodeGpus(node, idx))
    reason = _s(j.get("state_description")) or _s(j["state_reason"])
    if reason == "None":
        reason = ""
    exit_code = exit_signal = None
    if state.is_finished:
        exit_code, exit_signal = exit_status(j["exit_code"], where)
    tres = _s(j["tres_per_node"])
    return SlurmJob(
        job_id=job_id,
        name=_s(j["name"]),
        user=_s(j["user_name"]),
        state=state,
        reason=reason,
        partition=_s(j["partition"]),
        nodes=nodes,
        gpus=tuple(gpus),
        comment=_s(j["comment"]),
        admin_comment=_s(j["admin_comment"]),
        restart_count=_i(j["restart_cnt"]) or 0,
        priority=job_priority(j["priority"], where),
        submit_time=_t(j["submit_time"]),
        eligible_time=_t(j.get("eligible_time")),
        start_time=None if state is SlurmJobState.PENDING else _t(j["start_time"]),
        end_time=_t(j["end_time"]) if state.is_finished else None,
        tres_per_node=tres,
        gpus_per_node=gres_count(tres, "gpu") if tres else 0,
        required_nodes=parse_nodelist(_s(j["required_nodes"])),
        batch_host=_s(j["batch_host"]),
        requeue=bool(j["requeue"]),
        exit_code=exit_code,
        exit_signal=exit_signal,
        state_reason="" if _s(j["state_reason"]) == "None" else _s(j["state_reason"]),
        state_flags=tuple(n for n in flags if n != state.value),
        account=_s(j["account"]),
        nice=_nice(j["nice"]),
    )


INFINITE = 0xFFFFFFFF  # Slurm's INFINITE (uint32): a job raised to the top


def job_priority(raw: Any, where: str = "job") -> int:
    """Slurm's priority: 22.05 an int; 23.02+ `{set, infinite, number}` (UINT32_NO_VAL: infinite is
    `set: false, infinite: true`, unset is `set: false`); a held job has 0."""
    if isinstance(raw, Mapping):
        if raw.get("infinite"):
            return INFINITE
        if "number" not in raw:
            raise SlurmParseError(f"{where}: cannot read priority {raw!r}")
        return int(raw["number"]) if raw.get("set") else 0
    if raw is None:
        return 0
    if isinstance(raw, str) and raw.lower() in ("infinite", "infinity"):
        return INFINITE
    value = _i(raw)
    if value is None:
        raise SlurmParseError(f"{where}: cannot read priority {raw!r}")
    return value


def _nice(raw: Any) -> int:
    """22.05 prints nice as uint32 (-20 is 4294967276) and null for 0; 23.02+ a signed int."""
    value = _i(raw) or 0
    return value - (1 << 32) if value >= (1 << 31) else value


def exit_status(raw: Any, where: str = "job") -> tuple[int, int]:
    """(exit code, signal) from a raw wait status (22.05 int, 23.02 `{set, number}`) or 23.11+'s
    `{"status": [...], "return_code": {..}, "signal": {"id": {..}, "name": ..}}`."""
    if isinstance(raw, Mapping) and ("return_code" in raw or "signal" in raw):
        sig = raw.get("signal")
        sig_id = _i(sig.get("id")) if isinstance(sig, Mapping) else None
        return _i(raw.get("return_code")) or 0, sig_id or 0
    if isinstance(raw, Mapping):
        if "number" not in raw:
            raise SlurmParseError(f"{where}: cannot read exit_code {raw!r}")
        status = _i(raw) or 0
    elif isinstance(raw, int) and not isinstance(raw, bool):
        status = raw
    else:
        raise SlurmParseError(f"{where}: cannot read exit_code {raw!r}")
    return (status >> 8) & 0xFF, status & 0x7F


# Node base states (22.05: `state` is the lower-case base, `state_flags` the rest; 23.02+: `state`
# is one list of base and flags).
_NODE_BASE = frozenset({"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"})


def node_from_json(n: Mapping[str, Any], version: Version | None = None, cmd: str = "sinfo --json") -> SlurmNode:
    where = f"{version_label(version)}: {cmd} node"
    if not isinstance(n, Mapping):
        raise SlurmParseError(f"{where} entry is not an object: {str(n)[:80]}")
    name = _s(n.get("name"))
    if not name:
        raise SlurmParseError(f"{where} without a name: {str(n)[:80]}")
    where = f"{where} {name}"
    _require(n, _NODE_FIELDS, where)
    raw_state = n["state"]
    if isinstance(raw_state, list):
        names = [str(x).upper() for x in raw_state]
        bases = [x for x in names if x in _NODE_BASE]
        if len(bases) != 1:
            raise SlurmParseError(f"{where}: cannot read state {raw_state!r}")
        state, flags = bases[0].lower(), tuple(x for x in names if x != bases[0])
    elif isinstance(raw_state, str) and raw_state:
        state = raw_state.lower()
        flags = tuple(str(f).upper() for f in n.get("state_flags") or ())
    else:
        raise SlurmParseError(f"{where}: cannot read state {raw_state!r}")
    parts = n["partitions"]
    partitions = (tuple(p.strip() for p in parts.split(",") if p.strip()) if isinstance(parts, str)
                  else tuple(str(p) for p in parts or ()))
    gres, used = _s(n["gres"]), _s(n["gres_used"])
    return SlurmNode(
        name=name,
        state=state,
        state_flags=flags,
        partitions=partitions,
        cpus=_i(n["cpus"]) or 0,
        alloc_cpus=_i(n["alloc_cpus"]) or 0,
        gpus=gres_count(gres, "gpu"),
        gpus_used=gres_count(used, "gpu"),
        gpu_indices_used=gres_indices(used, "gpu"),
        shards=gres_count(gres, "shard"),
        shards_used=gres_count(used, "shard"),
        gres=gres,
        gres_used=used,
        reason=_s(n["reason"]),
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
