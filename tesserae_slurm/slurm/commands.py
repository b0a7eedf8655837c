"""Pure argv builders for the Slurm client commands the scheduler uses (no shell, ever).

Each function validates what it is given (job ids are positive integers, node names and
update keys are plain tokens) so that a bad value fails here with one clear line instead of
becoming a different Slurm request. Values such as comments are passed as single argv items
and arrive in Slurm verbatim, shell metacharacters included.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Iterable, Mapping, Sequence

from ..model.errors import InputError

_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def job_id_arg(job_id: int | str) -> str:
    text = str(job_id).strip()
    if isinstance(job_id, bool) or not text.isdigit() or int(text) <= 0:
        raise InputError(f"invalid Slurm job id {job_id!r} (expected a positive integer)")
    return str(int(text))


def node_list_arg(nodes: Sequence[str]) -> str:
    if isinstance(nodes, str):
        raise InputError(f"node list must be a list of names, got the string {nodes!r}")
    if not nodes:
        raise InputError("empty node list")
    for n in nodes:
        if not _NODE.match(n):
            raise InputError(f"invalid node name {n!r}")
    return ",".join(nodes)


def update_arg(key: str, value: str) -> str:
    if not _KEY.match(key):
        raise InputError(f"invalid scontrol update key {key!r}")
    value = str(value)
    if "\n" in value or "\0" in value:
        raise InputError(f"scontrol update value for {key} must be one line")
    return f"{key}={value}"


def signal_name(sig: int | str | _signal.Signals) -> str:
    """USR1 / SIGUSR1 / 10 / signal.SIGUSR1 -> `USR1` (what scancel --signal takes)."""
    if isinstance(sig, _signal.Signals):
        return sig.name.removeprefix("SIG")
    if isinstance(sig, int) and not isinstance(sig, bool):
        try:
            return _signal.Signals(sig).name.removeprefix("SIG")
        except ValueError:
            raise InputError(f"unknown signal number {sig}") from None
    name = str(sig).strip().upper().removeprefix("SIG")
    if name.isdigit():
        return signal_name(int(name))
    if not hasattr(_signal, f"SIG{name}"):
        raise InputError(f"unknown signal {sig!r}")
    return name


# ---- queries ---------------------------------------------------------------------------------


def squeue_json(job_ids: Iterable[int | str] = ()) -> list[str]:
    """All jobs Slurm still knows, finished ones included (23.02+ drop those without --states=all;
    22.05 ignores -p/-j/-t with --json), or only `job_ids` where the release heeds `--jobs`. The
    parser filters by partition, and its caller by id."""
    ids = [job_id_arg(j) for j in job_ids]
    return ["squeue", "--json", "--states=all", *([f"--jobs={','.join(ids)}"] if ids else [])]


def squeue_poll(partition: str) -> list[str]:
    """The partition's jobs and their compact states, nothing else: the daemon's poll between rounds.
    Plain text filtered by Slurm (unlike --json on 22.05), the same on 22.05 to 26.05."""
    if not partition or any(c.isspace() or c == "," for c in partition):
        raise InputError(f"not one partition name: {partition!r}")
    return ["squeue", "-h", "-p", partition, "-o", "%i %t"]


# What a stop follows of each job it stops: id, state, owner, run count, start, end, exit code, nodes.
# Width 0 prints a field whole and unpadded; `|` ends each (no such character in any of them).
BRIEF_FIELDS = ("JobId", "State", "UserName", "RestartCnt", "StartTime", "EndTime", "exit_code", "NodeList")
BRIEF_ENV = {"SLURM_TIME_FORMAT": "%s"}  # times as epoch seconds (strftime's %s)


def squeue_brief(job_ids: Iterable[int | str]) -> list[str]:
    """Only `job_ids`, in any state, as text: unlike `--json` on 22.05, text heeds `--jobs` on every
    release, so reading the few jobs a round stops costs no parse of the whole queue. Run with
    ``BRIEF_ENV``."""
    ids = [job_id_arg(j) for j in job_ids]
    if not ids:
        raise InputError("squeue --jobs: no job ids")
    fields = ",".join(f"{name}:0|" for name in BRIEF_FIELDS)
    return ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", f"--Format={fields}"]


def squeue_job_states() -> list[str]:
    """Every job's id and compact state through Slurm's lighter REQUEST_JOB_STATE (24.11 and later): no
    partition filter (the partition reads "(null)"), so it only says whether anything came or went."""
    return ["squeue", "-h", "--only-job-state", "-o", "%i %t"]


def sinfo_json() -> list[str]:
    return ["sinfo", "--json"]


def scontrol_nodes_json() -> list[str]:
    """Per-node JSON on 23.02 and later, where `sinfo --json` groups nodes into entries."""
    return ["scontrol", "show", "node", "--json"]


def sinfo_version() -> list[str]:
    return ["sinfo", "--version"]


def scontrol_ping() -> list[str]:
    return ["scontrol", "ping"]


# ---- actions ---------------------------------------------------------------------------------


def sbatch(script_argv: Sequence[str] = (), extra_args: Sequence[str] = ()) -> list[str]:
    """`sbatch --parsable [extra_args] [script [args...]]`; no script means stdin or --wrap."""
    if isinstance(script_argv, str) or isinstance(extra_args, str):
        raise InputError("sbatch arguments must be lists of strings, not one string")
    return ["sbatch", "--parsable", *map(str, extra_args), *map(str, script_argv)]


def scontrol_update_job(job_id: int | str, updates: Mapping[str, str]) -> list[str]:
    if not updates:
        raise InputError(f"scontrol update for job {job_id}: nothing to update")
    return ["scontrol", "update", f"JobId={job_id_arg(job_id)}", *(update_arg(k, v) for k, v in updates.items())]


def scontrol_place(job_id: int | str, nodes: Sequence[str],
                   extra_updates: Mapping[str, str] | None = None) -> list[str]:
    """Pin a held job to `nodes` and make it eligible now (a requeued job otherwise waits ~120 s)."""
    updates = {"NodeList": node_list_arg(nodes), "StartTime": "now"}
    for key, value in (extra_updates or {}).items():
        if key in updates:
            raise InputError(f"extra update {key} conflicts with the placement itself")
        updates[key] = value
    return scontrol_update_job(job_id, updates)


def scontrol_release(job_ids: Iterable[int | str]) -> list[str]:
    ids = [job_id_arg(j) for j in job_ids]
    if not ids:
        raise InputError("scontrol release: no job ids")
    return ["scontrol", "release", ",".join(ids)]


def scontrol_hold(job_ids: Iterable[int | str]) -> list[str]:
    """Hold pending jobs again as their owner would (`uhold`: JobHeldUser, like `sbatch --hold`).

    A plain `scontrol hold` by an operator or root is an *administrator's* hold (JobHeldAdmin), which
    the daemon must tell apart from its own."""
    ids = [job_id_arg(j) for j in job_ids]
    if not ids:
        raise InputError("scontrol uhold: no job ids")
    return ["scontrol", "uhold", ",".join(ids)]


def scontrol_admin_hold(job_ids: Iterable[int | str]) -> list[str]:
    """Hold pending jobs as root or an operator (JobHeldAdmin): their owners cannot release them."""
    ids = [job_id_arg(j) for j in job_ids]
    if not ids:
        raise InputError("scontrol hold: no job ids")
    return ["scontrol", "hold", ",".join(ids)]


def scontrol_requeuehold(job_id: int | str) -> list[str]:
    return ["scontrol", "requeuehold", job_id_arg(job_id)]


def scontrol_requeuehold_incomplete(job_ids: Iterable[int | str]) -> list[str]:
    """`Incomplete`: a job that has finished meanwhile is left ended, never brought back. scontrol
    requeues each job of the list on its own (22.05 to 26.05): one refused does not stop the others."""
    ids = [job_id_arg(j) for j in job_ids]
    if not ids:
        raise InputError("scontrol requeuehold: no job ids")
    return ["scontrol", "requeuehold", "Incomplete", ",".join(ids)]


def scancel(job_id: int | str) -> list[str]:
    return ["scancel", job_id_arg(job_id)]


def scancel_signal(job_ids: Iterable[int | str], sig: int | str | _signal.Signals,
                   batch_only: bool = True) -> list[str]:
    """Signal the batch shell only (`--batch`) or the batch shell and every step (`--full`) of each job;
    scancel signals each on its own, so one that has ended does not keep the others from theirs."""
    ids = [job_id_arg(j) for j in job_ids]
    if not ids:
        raise InputError("scancel --signal: no job ids")
    scope = "--batch" if batch_only else "--full"
    return ["scancel", f"--signal={signal_name(sig)}", scope, *ids]
