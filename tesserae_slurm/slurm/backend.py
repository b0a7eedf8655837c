"""SlurmBackend: the operations the daemon needs from Slurm, and their CLI implementation.

The CLI backend composes `commands` (argv) -> `runner` (the one subprocess seam) -> `parse`
(pure). It holds no state besides the client environment, so it is safe to share.
`choose.make_backend` picks between it and pyslurm.
"""

from __future__ import annotations

import logging
import os
import signal as _signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from ..model.errors import InputError
from . import commands, parse
from .runner import SlurmCommandError, SlurmError, SlurmRunner, SlurmUnavailable
from .types import SlurmJob, SlurmNode

log = logging.getLogger(__name__)

# A batch script given as: its text (str, must start with "#!"), a path, or argv [script, args...].
Script = str | os.PathLike[str] | Sequence[str]
Signal = int | str | _signal.Signals


# `squeue --only-job-state` (REQUEST_JOB_STATE): run live on 24.11 and 26.05; 22.05 lacks it
ONLY_JOB_STATE_SINCE = (24, 11)


class SlurmBackendError(SlurmError):
    """The requested backend cannot be used here (e.g. pyslurm built for another Slurm)."""


@runtime_checkable
class SlurmBackend(Protocol):
    """What the daemon asks of Slurm. Every method raises SlurmError subclasses on failure."""

    def list_jobs(self, partition: str | None = None) -> tuple[SlurmJob, ...]: ...

    def list_nodes(self, partition: str | None = None) -> tuple[SlurmNode, ...]: ...

    def list_jobs_brief(self, job_ids: Iterable[int]) -> tuple[SlurmJob, ...]: ...

    def poll_jobs(self, partition: str) -> tuple[tuple[str, str], ...]: ...

    def job_states(self) -> tuple[tuple[str, str], ...] | None: ...

    def submit(
        self, script: Script, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> int: ...

    def place(self, job_id: int, nodes: Sequence[str], extra_updates: Mapping[str, str] | None = None) -> None: ...

    def release(self, job_ids: Iterable[int]) -> None: ...

    def hold(self, job_ids: Iterable[int]) -> None: ...

    def admin_hold(self, job_ids: Iterable[int]) -> None: ...

    def evict(self, job_id: int) -> None: ...

    def signal(self, job_ids: Iterable[int], sig: Signal = "USR1", batch_only: bool = True) -> dict[int, str]: ...

    def requeue_hold(self, job_ids: Iterable[int]) -> None: ...

    def cancel(self, job_id: int) -> None: ...

    def update_comment(self, job_id: int, comment: str | None = None, admin_comment: str | None = None) -> None: ...

    def ping(self) -> None: ...

    def slurm_version(self) -> tuple[int, int]: ...


class SlurmCliBackend:
    """SlurmBackend over squeue/sinfo/sbatch/scontrol/scancel.

    `env` is laid over os.environ for every call (typically {"SLURM_CONF": ...}); pass `runner`
    to share one or to inject a fake in tests.
    """

    name = "cli"

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        runner: SlurmRunner | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.runner = runner if runner is not None else SlurmRunner(env, timeout_s=timeout_s)
        self._version: tuple[int, int] | None = None

    # ---- queries -----------------------------------------------------------------------------

    def list_jobs(self, partition: str | None = None) -> tuple[SlurmJob, ...]:
        version = self.slurm_version()
        out = self.runner.run(commands.squeue_json())
        return _reported_as_unavailable(lambda: parse.parse_squeue_json(out, partition, version))

    def poll_jobs(self, partition: str) -> tuple[tuple[str, str], ...]:
        """(job id, compact state) of the partition's active jobs: the cheap look between rounds."""
        return parse.parse_squeue_poll(self.runner.run(commands.squeue_poll(partition)))

    def job_states(self) -> tuple[tuple[str, str], ...] | None:
        """(job id, compact state) of every job, from the lighter REQUEST_JOB_STATE; None where the release
        has no `squeue --only-job-state` (before 24.11 here: docs/slurm-versions.md)."""
        if self.slurm_version() < ONLY_JOB_STATE_SINCE:
            return None
        return parse.parse_squeue_poll(self.runner.run(commands.squeue_job_states()))

    def list_jobs_brief(self, job_ids: Iterable[int]) -> tuple[SlurmJob, ...]:
        """Only these jobs, in any state, with the fields a stop follows (``parse.parse_squeue_brief``); one
        Slurm no longer knows is left out."""
        ids = list(job_ids)
        if not ids:
            return ()
        try:
            out = self.runner.run(commands.squeue_brief(ids), env=commands.BRIEF_ENV)
        except SlurmCommandError as exc:  # one id alone is looked up by itself, and refused once purged
            if len(ids) == 1 and "invalid job id" in str(exc).lower():
                return ()
            raise
        return parse.parse_squeue_brief(out)

    def list_nodes(self, partition: str | None = None) -> tuple[SlurmNode, ...]:
        """22.05: `sinfo --json`; 23.02 and later: `scontrol show node --json` (docs/slurm-versions.md)."""
        version = self.slurm_version()
        if parse.nodes_source(version) == "scontrol":
            out = self.runner.run(commands.scontrol_nodes_json())
            return _reported_as_unavailable(lambda: parse.parse_scontrol_nodes_json(out, partition, version))
        out = self.runner.run(commands.sinfo_json())
        return _reported_as_unavailable(lambda: parse.parse_sinfo_json(out, partition, version))

    def ping(self) -> None:
        """Return if slurmctld answers; raise SlurmUnavailable with Slurm's own line otherwise."""
        try:
            out = self.runner.run(commands.scontrol_ping(), retries=0)
        except SlurmCommandError as exc:  # scontrol ping exits 1 when the controller is DOWN
            out = exc.stdout
            if not out.strip():
                raise SlurmUnavailable(str(exc)) from exc
        try:
            up = parse.parse_ping(out)
        except parse.SlurmParseError as exc:
            raise SlurmUnavailable(str(exc)) from exc
        if not up:
            first = out.strip().splitlines()[0]
            raise SlurmUnavailable(f"slurmctld unreachable: {first} (scontrol ping)")

    def slurm_version(self) -> tuple[int, int]:
        """(major, minor) of the Slurm clients, asked once: it picks the readers for every later call."""
        if self._version is None:
            self._version = parse.parse_version(self.runner.run(commands.sinfo_version(), retries=0))
        return self._version

    # ---- actions -----------------------------------------------------------------------------

    def submit(self, script: Script, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> int:
        """sbatch the script; returns the job id. Holding (`--hold`) is the caller's choice.

        `script` is the script text (a str starting with "#!", sent on stdin), a path, an
        argv list [script_path, arg, ...], or [] with `--wrap CMD` in extra_args; `env` is added to
        sbatch's (and so the job's) environment. Submission is never retried: a lost answer could mean a duplicate job.
        """
        text, argv = _script_parts(script)
        out = self.runner.run(commands.sbatch(argv, extra_args), input_text=text, env=env, retries=0)
        return parse.parse_sbatch_parsable(out)

    def place(self, job_id: int, nodes: Sequence[str], extra_updates: Mapping[str, str] | None = None) -> None:
        self.runner.run(commands.scontrol_place(job_id, nodes, extra_updates))

    def release(self, job_ids: Iterable[int]) -> None:
        ids = list(job_ids)
        if ids:
            self.runner.run(commands.scontrol_release(ids))

    def hold(self, job_ids: Iterable[int]) -> None:
        """Put pending (released but not yet started) jobs back on hold."""
        ids = list(job_ids)
        if ids:
            self.runner.run(commands.scontrol_hold(ids))

    def signal(self, job_ids: Iterable[int], sig: Signal = "USR1", batch_only: bool = True) -> dict[int, str]:
        """Signal every listed job in one `scancel`; returns the jobs it refused (ended, unknown) with
        Slurm's words. scancel signals each job on its own, so a refusal means the others got theirs;
        an error that names no job (scancel stopped before signalling) is raised."""
        ids = list(job_ids)
        if not ids:
            return {}
        try:
            self.runner.run(commands.scancel_signal(ids, sig, batch_only))
        except SlurmCommandError as exc:
            refused = parse.parse_scancel_refusals(exc.stderr)
            if refused is None:
                raise
            return refused
        return {}

    def admin_hold(self, job_ids: Iterable[int]) -> None:
        """Turn held (or pending) jobs into administrator-held ones, which only an operator releases."""
        ids = list(job_ids)
        if ids:
            self.runner.run(commands.scontrol_admin_hold(ids))

    def evict(self, job_id: int) -> None:
        """Requeue-hold a job that runs without the daemon's placement (refused once it has finished)."""
        self.runner.run(commands.scontrol_requeuehold_incomplete([job_id]))

    def requeue_hold(self, job_ids: Iterable[int]) -> None:
        """`requeuehold Incomplete` of every listed job in one call: Slurm requeues only a job still
        running; one that has ended, or is pending already, is left as it is (exit 0, no message:
        slurmctld's `_job_requeue_op`, 22.05 to 26.05), where a plain requeuehold would run it again.
        A job Slurm no longer knows fails the call (after the others were requeued)."""
        ids = list(job_ids)
        if ids:
            self.runner.run(commands.scontrol_requeuehold_incomplete(ids))

    def cancel(self, job_id: int) -> None:
        self.runner.run(commands.scancel(job_id))

    def update_comment(self, job_id: int, comment: str | None = None, admin_comment: str | None = None) -> None:
        updates: dict[str, str] = {}
        if comment is not None:
            updates["Comment"] = comment
        if admin_comment is not None:
            updates["AdminComment"] = admin_comment
        if updates:
            self.runner.run(commands.scontrol_update_job(job_id, updates))


def _script_parts(script: Script) -> tuple[str | None, list[str]]:
    if isinstance(script, str):
        if not script.startswith("#!"):
            raise InputError("batch script text must start with '#!' (pass a Path or [path, args] for a file)")
        return script, []
    if isinstance(script, os.PathLike):
        return None, [os.fspath(script)]
    # An empty argv is allowed: the script then comes from `--wrap` in extra_args.
    return None, [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in script]


T = TypeVar("T")


def _reported_as_unavailable(fn: Callable[[], T]) -> T:
    """squeue/sinfo --json exit 0 with an `errors` list when the controller is unreachable."""
    try:
        return fn()
    except parse.SlurmReportedError as exc:
        raise SlurmUnavailable(str(exc)) from exc
