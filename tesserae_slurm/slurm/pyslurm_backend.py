"""Optional SlurmBackend over pyslurm, used only when it matches the running Slurm.

pyslurm links libslurm of one exact major.minor, and importing it initialises libslurm from
SLURM_CONF for the life of the process: libslurm exits the process when it finds no configuration,
and cannot be initialised again with another one (slurm_fini + slurm_init crash in 24.11). So
`create` loads pyslurm in a child process first (its version, and any fatal error, come back as
text), then imports it bound to this backend's SLURM_CONF, and refuses a second configuration in
the same process.

Through pyslurm: the job listing and the per-job calls whose meaning pyslurm keeps (release,
an administrator's hold, signals, requeue-hold, cancel, comment updates). A list (release, hold,
signal, requeue-hold) is one RPC per job in this process, as scontrol and scancel themselves send
them, with the CLI's meaning: a signal goes to every job and returns the refused ones, a requeue-hold
of a list fails after trying every job. On the CLI, and why:
- a held job whose reason has a description: pyslurm reports the description in place of the
  reason code, so an administrator's hold on a requeue-held job ("job requeued in held state",
  which an update does not clear) looks like its owner's; those jobs are read again with squeue.
- a placement with extra updates (NumNodes): pyslurm sets a node count only at submission.
- an update to an empty comment: pyslurm treats an empty string as "unchanged".
- the owner's hold (`scontrol uhold`): 24.11's Job.hold(mode="user") writes through a null pointer
  (segmentation fault).
- submission, node listing, ping and the version, and a stop's look at its few jobs
  (`list_jobs_brief`: squeue reads only those, where pyslurm's listing loads every job).
Exit codes of 128 and above come back from pyslurm less 128 (its `_get_exit_code`).
docs/slurm-versions.md lists the releases it passed the live tests on (`LIVE_TESTED`).
"""

from __future__ import annotations

import importlib
import os
import signal as _signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from . import commands, parse
from .backend import Signal, SlurmBackendError, SlurmCliBackend
from .commands import job_id_arg, node_list_arg, signal_name
from .runner import SlurmCommandError, SlurmError, SlurmUnavailable, is_transient, one_line
from .types import NodeGpus, SlurmJob, SlurmJobState

T = TypeVar("T")

# Slurm releases on which this backend passed every `every_release` live test; `auto` picks
# pyslurm only on these (an explicit `pyslurm` is used on any matching release).
LIVE_TESTED: frozenset[tuple[int, int]] = frozenset({(22, 5), (24, 11)})

# slurm.h, unchanged from 22.05 to 26.05.
_JOB_RUNNING = 1  # enum job_states: with JOB_REQUEUE_HOLD, `requeuehold Incomplete`
_JOB_REQUEUE_HOLD = 1 << 11
_KILL_JOB_BATCH = 1 << 0
_KILL_FULL_JOB = 1 << 3
_ESLURM_ALREADY_DONE = 2021

_PROBE = "import pyslurm, sys; sys.stdout.write(pyslurm.__version__)"
_PROBE_TIMEOUT_S = 60.0  # an import, and libslurm's look for its configuration

# The configuration libslurm was initialised with in this process (None: its default), once
# this module imported pyslurm; one lock, as libslurm's client state is the process's.
_bound: list[str | None] = []
_lock = threading.Lock()


def pyslurm_version(module: Any) -> tuple[int, int]:
    raw = getattr(module, "__version__", None) or getattr(module, "version", lambda: "")()
    return parse.parse_version(str(raw))


class PyslurmBackend(SlurmCliBackend):
    name = "pyslurm"

    def __init__(self, cli: SlurmCliBackend, module: Any) -> None:
        super().__init__(runner=cli.runner)
        self._version = cli._version  # asked once already by `create`
        self._py = module

    @classmethod
    def create(cls, cli: SlurmCliBackend, env: Mapping[str, str] | None = None,
               *, live_tested_only: bool = False) -> PyslurmBackend:
        """pyslurm for the Slurm behind `cli`, or SlurmBackendError saying why not.

        `live_tested_only` (what `auto` asks): refuse a release not in LIVE_TESTED."""
        conf = (env or {}).get("SLURM_CONF") or os.environ.get("SLURM_CONF") or None
        loaded = sys.modules.get("pyslurm", False)
        if loaded is None:  # a blocked import
            raise SlurmBackendError("pyslurm is not importable (import of pyslurm halted); use prefer=cli")
        mine = pyslurm_version(loaded) if loaded else parse.parse_version(_probe(env, conf))
        theirs = cli.slurm_version()
        if mine != theirs:
            raise SlurmBackendError(
                f"pyslurm {mine[0]}.{mine[1]:02d} does not match Slurm {theirs[0]}.{theirs[1]:02d}; "
                "using the CLI backend requires prefer=cli"
            )
        if live_tested_only and theirs not in LIVE_TESTED:
            raise SlurmBackendError(
                f"pyslurm has not passed the live tests on Slurm {theirs[0]}.{theirs[1]:02d} "
                "(docs/slurm-versions.md); set slurm.backend: pyslurm to use it anyway"
            )
        return cls(cli, _import_bound(conf))

    # ---- queries -----------------------------------------------------------------------------

    def list_jobs(self, partition: str | None = None) -> tuple[SlurmJob, ...]:
        loaded = self._call("load jobs", lambda: self._py.Jobs.load(preload_passwd_info=True))
        jobs = [_job_from_pyslurm(j) for j in loaded.values()]
        if partition is not None:
            jobs = [j for j in jobs if partition in j.partition.split(",")]
        hidden = [j.job_id for j in jobs if j.held and any(c.isspace() for c in j.reason)]
        if hidden:  # their reason code sits under a description: squeue --json has both
            codes = {j.job_id: j.state_reason for j in self._jobs_from_cli(hidden)}
            jobs = [_with_code(j, codes) for j in jobs]
        return tuple(jobs)

    def _jobs_from_cli(self, job_ids: Sequence[int]) -> tuple[SlurmJob, ...]:
        version = self.slurm_version()
        out = self.runner.run(commands.squeue_json(job_ids))
        return parse.parse_squeue_json(out, None, version)

    # ---- actions -----------------------------------------------------------------------------

    def place(self, job_id: int, nodes: Sequence[str], extra_updates: Mapping[str, str] | None = None) -> None:
        if extra_updates:
            super().place(job_id, nodes, extra_updates)
            return
        desc = self._py.JobSubmitDescription(required_nodes=node_list_arg(nodes), begin_time="now")
        self._on_job("place", job_id, lambda job: job.modify(desc))

    def release(self, job_ids: Iterable[int]) -> None:
        for jid in job_ids:  # priority INFINITE, as `scontrol release` sends
            self._on_job("release", jid, lambda job: job.release())

    def admin_hold(self, job_ids: Iterable[int]) -> None:
        for jid in job_ids:  # priority 0 as root or an operator (`scontrol hold`)
            self._on_job("admin hold", jid, lambda job: job.hold())

    def signal(self, job_ids: Iterable[int], sig: Signal = "USR1", batch_only: bool = True) -> dict[int, str]:
        # The raw call, as Job.send_signal reads Slurm's errno even after a successful RPC.
        number = _signal_number(sig)
        flags = _KILL_JOB_BATCH if batch_only else _KILL_FULL_JOB
        refused: dict[int, str] = {}
        for job_id in job_ids:
            jid = int(job_id_arg(job_id))
            try:
                self._call(f"signal job {jid}", partial(self._py.slurm_kill_job, jid, number, flags))
            except SlurmCommandError as exc:
                refused[jid] = str(exc)
        return refused

    def evict(self, job_id: int) -> None:
        self.requeue_hold([job_id])

    def requeue_hold(self, job_ids: Iterable[int]) -> None:
        """`requeuehold Incomplete`: a job that has ended meanwhile is left ended, never run again; every
        job is tried, then the first refusal is raised."""
        first: SlurmCommandError | None = None
        for job_id in job_ids:
            jid = int(job_id_arg(job_id))
            try:
                self._call(f"requeue job {jid}", partial(self._py.slurm_requeue, jid, _JOB_REQUEUE_HOLD | _JOB_RUNNING))
            except SlurmCommandError as exc:
                first = first or exc
        if first is not None:
            raise first

    def cancel(self, job_id: int) -> None:
        jid = int(job_id_arg(job_id))
        try:
            self._call(f"cancel job {job_id}", lambda: self._py.slurm_kill_job(jid, 9, 0))
        except SlurmCommandError as exc:
            if _errno(exc.__cause__) != _ESLURM_ALREADY_DONE:  # scancel exits 0 on an ended job
                raise

    def update_comment(self, job_id: int, comment: str | None = None, admin_comment: str | None = None) -> None:
        fields = {k: v for k, v in (("comment", comment), ("admin_comment", admin_comment)) if v is not None}
        if any(v == "" for v in fields.values()):
            super().update_comment(job_id, comment, admin_comment)
        elif fields:
            desc = self._py.JobSubmitDescription(**fields)
            self._on_job("update", job_id, lambda job: job.modify(desc))

    def _on_job(self, what: str, job_id: int, act: Callable[[Any], object]) -> None:
        jid = int(job_id_arg(job_id))
        self._call(f"{what} job {job_id}", lambda: act(self._py.Job(jid)))

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """One pyslurm call, retried like the CLI's when the controller does not answer."""
        policy = self.runner.retry
        error: SlurmError | None = None
        for attempt in range(policy.retries + 1):
            if attempt:
                self.runner._sleep(policy.delay(attempt - 1))
            try:
                with _lock:
                    return fn()
            except SlurmError:
                raise
            except Exception as exc:  # pyslurm.RPCError, ValueError(message, errno) from the raw calls
                message = f"pyslurm {what}: {one_line(_message(exc))}"
                if not is_transient(message):
                    raise SlurmCommandError(message, returncode=1, stderr=_message(exc)) from exc
                error = SlurmUnavailable(message)
                error.__cause__ = exc
        assert error is not None
        raise error


def _probe(env: Mapping[str, str] | None, conf: str | None) -> str:
    """pyslurm's version, read in a child: libslurm may exit the process it loads in."""
    full = {**os.environ, **(env or {}), **({"SLURM_CONF": conf} if conf else {})}
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=full, capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SlurmBackendError(f"loading pyslurm took over {_PROBE_TIMEOUT_S:g}s; use prefer=cli") from exc
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        why = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        raise SlurmBackendError(f"pyslurm is not importable ({why}); use prefer=cli")
    return proc.stdout.strip()


def _import_bound(conf: str | None) -> Any:
    """pyslurm, initialised with `conf`; refused when this process bound libslurm to another."""
    with _lock:
        if "pyslurm" not in sys.modules:
            saved_env, saved_flags = os.environ.get("SLURM_CONF"), sys.getdlopenflags()
            if conf:
                os.environ["SLURM_CONF"] = conf  # libslurm reads it from the environment, at import
            try:
                module = importlib.import_module("pyslurm")
            finally:
                sys.setdlopenflags(saved_flags)  # pyslurm leaves RTLD_GLOBAL|RTLD_DEEPBIND for every later import
                if saved_env is None:
                    os.environ.pop("SLURM_CONF", None)
                else:
                    os.environ["SLURM_CONF"] = saved_env
            _bound[:] = [conf]
            return module
        bound = _bound[0] if _bound else os.environ.get("SLURM_CONF")
        if bound != conf:
            raise SlurmBackendError(
                f"pyslurm in this process is bound to {bound or 'the default slurm.conf'}, not {conf}: "
                "libslurm reads its configuration once per process; use prefer=cli or another process"
            )
        return sys.modules["pyslurm"]


def _signal_number(sig: Signal) -> int:
    return int(getattr(_signal, "SIG" + signal_name(sig)))


def _message(exc: BaseException) -> str:
    if isinstance(exc, ValueError) and exc.args:  # pyslurm's raw calls: ValueError(strerror, errno)
        return str(exc.args[0])
    return str(exc)


def _errno(exc: BaseException | None) -> int | None:
    if isinstance(exc, ValueError) and len(exc.args) == 2 and isinstance(exc.args[1], int):
        return exc.args[1]
    return getattr(exc, "errno", None)


def _with_code(job: SlurmJob, codes: Mapping[int, str]) -> SlurmJob:
    return replace(job, state_reason=codes[job.job_id]) if job.job_id in codes else job


def _gres_name(key: Any) -> str:
    """`gpu`, `gpu:a100`, `gres/gpu` (23.11+), `gres:gpu` (22.05) -> `gpu`."""
    name = str(key)
    for prefix in ("gres/", "gres:"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.split(":")[0]


def _gres_key(key: Any) -> str:
    """Slurm's own spelling of a `tres_per_node` entry: pyslurm 24.11 keeps `gres/gpu`, 22.5 gives
    `gpu` for 22.05's `gres:gpu`."""
    name = str(key)
    return name if name.startswith(("gres/", "gres:")) else f"gres:{name}"


def _job_from_pyslurm(job: Any) -> SlurmJob:
    """Map a pyslurm.Job onto SlurmJob as parse.job_from_json reads squeue --json."""
    state = parse.job_state(job.state, f"pyslurm job {job.id}")
    reason = "" if job.state_reason in (None, "None") else str(job.state_reason)
    nodes = parse.parse_nodelist(job.allocated_nodes or "")
    gpus: list[NodeGpus] = []
    if nodes:
        try:
            layout = job.get_resource_layout_per_node() or {}
        except ValueError:  # pyslurm: "Unable to create hostlist" for jobs without resources
            layout = {}
        for node in nodes:
            gres = (layout.get(node) or {}).get("gres") or {}
            indices = _gpu_indices_from_gres_dict(gres)
            if indices:
                gpus.append(NodeGpus(node, indices))
    tres = job.gres_per_node or {}
    per_node = sum(int(v) for k, v in tres.items() if _gres_name(k) == "gpu")
    priority = job.priority
    return SlurmJob(
        job_id=int(job.id),
        name=job.name or "",
        user=_user_name(job),
        state=state,
        reason=reason,
        partition=job.partition or "",
        nodes=nodes,
        gpus=tuple(gpus),
        comment=job.comment or "",
        admin_comment=job.admin_comment or "",
        restart_count=int(job.requeue_count or 0),
        priority=parse.INFINITE if isinstance(priority, str) else int(priority or 0),  # "UNLIMITED"
        submit_time=job.submit_time or None,
        eligible_time=job.eligible_time or None,
        start_time=None if state is SlurmJobState.PENDING else (job.start_time or None),
        end_time=(job.end_time or None) if state.is_finished else None,
        tres_per_node=",".join(f"{_gres_key(k)}:{v}" for k, v in tres.items()),
        gpus_per_node=per_node,
        required_nodes=parse.parse_nodelist(job.required_nodes or ""),
        batch_host=job.batch_host or "",
        requeue=bool(job.is_requeueable),
        exit_code=job.exit_code if state.is_finished else None,
        exit_signal=job.exit_code_signal if state.is_finished else None,
        # pyslurm gives the description in place of the code when there is one (list_jobs reads
        # the code of held jobs from squeue); elsewhere the code is left unknown.
        state_reason="" if any(c.isspace() for c in reason) else reason,
        account=job.account or "",
        nice=int(job.nice or 0),
    )


def _user_name(job: Any) -> str:
    """The owner's name; empty where the passwd database has none, as squeue --json prints it."""
    try:
        return str(job.user_name or "")
    except KeyError:  # pyslurm raises for a uid without a passwd entry
        return ""


def _gpu_indices_from_gres_dict(gres: Mapping[str, Any]) -> tuple[int, ...]:
    for key, value in gres.items():
        if _gres_name(key) != "gpu":
            continue
        if isinstance(value, dict) and value.get("indexes"):
            return parse.parse_index_ranges(str(value["indexes"]))
    return ()
