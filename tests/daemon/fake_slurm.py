"""An in-memory Slurm for the round's unit tests: the SlurmBackend protocol over a dict of jobs, recording
every call in order.

It keeps only what the daemon reads back (states, holds, AdminComment, node lists), with Slurm's rules
for them as the live tests see them on 22.05: a hold is a user hold (JobHeldUser) and `admin_hold` an
administrator's (JobHeldAdmin), both only on pending jobs; a requeue-hold (`Incomplete`) turns a running
job into a held pending one and leaves a pending or ended one as it is, refusing only a job it does not know
(trying every job of a list, then raising the first refusal); a
signal returns the jobs it refused (ended or unknown), as scancel names them; release makes a held job eligible (it does not start it:
``run`` does, when a test says so). The live tests (``*_live.py``) check the real Slurm against all this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tesserae_slurm.harness.assignment import Assignment
from tesserae_slurm.model.meta import JobMeta
from tesserae_slurm.slurm import SlurmCommandError, SlurmJob, SlurmJobState, SlurmNode
from tesserae_slurm.slurm.backend import Script, Signal

S = SlurmJobState
PARTITION = "tesserae"
READS = ("list_jobs", "list_jobs_brief", "poll_jobs", "job_states", "list_nodes")


def managed(job_id: int, gpus: int = 1, *, model: str = "DCGAN", batch: str = "32", state: S = S.PENDING,
            held: bool = True, user: str = "alice", submit_time: int = 100, assignment: Assignment | None = None,
            start_time: int | None = None, **more: Any) -> SlurmJob:
    """A job tsbatch submitted (its metadata in Comment), held until the daemon releases it."""
    meta = JobMeta(gpus, model, batch) if model else JobMeta(gpus, no_profile=True)
    more.setdefault("partition", PARTITION)
    job = SlurmJob(job_id, f"job{job_id}", user, state, comment=meta.encode(), submit_time=submit_time,
                   priority=0 if held else 1, start_time=start_time,
                   admin_comment=assignment.encode() if assignment is not None else "", **more)
    if state is S.PENDING and held:
        job = replace(job, reason="JobHeldUser", state_reason="JobHeldUser")
    return job


def node(name: str, gpus: int = 4, state: str = "idle") -> SlurmNode:
    return SlurmNode(name, state, partitions=(PARTITION,), gpus=gpus)


class FakeSlurm:
    """``calls``: (method, job ids) in call order; ``fail``: (method, job id) pairs that raise; ``on_call``:
    called with each call before it acts (a test's view of the database at that moment, scripted states)."""

    def __init__(self, jobs: Iterable[SlurmJob] = (), nodes: Iterable[SlurmNode] = (),
                 fail: Iterable[tuple[str, str]] = ()) -> None:
        self.jobs: dict[str, SlurmJob] = {str(j.job_id): j for j in jobs}
        self.nodes = tuple(nodes)
        self.fail = set(fail)
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.signals: list[tuple[str, str]] = []  # (job, signal)
        self.on_call: Callable[[str, tuple[str, ...]], None] | None = None
        self.now = 1000
        self.light_states = False  # job_states() as on 24.11 and later

    # ---- what tests look at -------------------------------------------------------------------------
    def methods(self, *, reads: bool = False) -> list[str]:
        return [m for m, _ in self.calls if reads or m not in READS]

    def writes(self) -> list[tuple[str, tuple[str, ...]]]:
        return [(m, ids) for m, ids in self.calls if m not in READS]

    def run(self, job_id: str, nodes: Sequence[str] = ("node1",)) -> None:
        """Slurm starts a released job (what the controller does after `release`)."""
        self.jobs[job_id] = replace(self.jobs[job_id], state=S.RUNNING, start_time=self.now, nodes=tuple(nodes),
                                    reason="", state_reason="")

    def finish(self, job_id: str, state: S = S.COMPLETED) -> None:
        self.jobs[job_id] = replace(self.jobs[job_id], state=state, end_time=self.now, exit_code=0)

    # ---- the protocol -------------------------------------------------------------------------------
    def _call(self, method: str, ids: Iterable[object] = ()) -> tuple[str, ...]:
        ids = tuple(str(i) for i in ids)
        self.calls.append((method, ids))
        if self.on_call is not None:
            self.on_call(method, ids)
        for j in ids:
            if (method, j) in self.fail:
                raise SlurmCommandError(f"{method} {j}: refused", returncode=1, stderr="refused")
        return ids

    def _job(self, job_id: str) -> SlurmJob:
        if job_id not in self.jobs:
            raise SlurmCommandError(f"Invalid job id specified: {job_id}", returncode=1, stderr="Invalid job id")
        return self.jobs[job_id]

    def list_jobs(self, partition: str | None = None) -> tuple[SlurmJob, ...]:
        self._call("list_jobs")
        return tuple(j for j in self.jobs.values() if partition is None or j.partition == partition)

    def list_jobs_brief(self, job_ids: Iterable[int]) -> tuple[SlurmJob, ...]:
        ids = self._call("list_jobs_brief", list(job_ids))
        return tuple(self.jobs[j] for j in ids if j in self.jobs)

    def poll_jobs(self, partition: str) -> tuple[tuple[str, str], ...]:
        """squeue's compact states of the active jobs (finished ones drop out, as squeue's default)."""
        self._call("poll_jobs")
        code = {S.PENDING: "PD", S.RUNNING: "R", S.COMPLETING: "CG"}
        return tuple((j, code.get(job.state, "?")) for j, job in self.jobs.items()
                     if job.partition == partition and not job.state.is_finished)

    def job_states(self) -> tuple[tuple[str, str], ...] | None:
        """Every partition's jobs, as 24.11's `squeue --only-job-state`; None when ``light_states`` is off
        (22.05 has no such listing)."""
        self._call("job_states")
        if not self.light_states:
            return None
        code = {S.PENDING: "PD", S.RUNNING: "R", S.COMPLETING: "CG"}
        return tuple((j, code.get(job.state, "?")) for j, job in self.jobs.items() if not job.state.is_finished)

    def list_nodes(self, partition: str | None = None) -> tuple[SlurmNode, ...]:
        self._call("list_nodes")
        return self.nodes

    def ping(self) -> None:
        self._call("ping")

    def slurm_version(self) -> tuple[int, int]:
        return (22, 5)

    def submit(self, script: Script, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> int:
        raise NotImplementedError("the round never submits")

    def place(self, job_id: int, nodes: Sequence[str], extra_updates: Mapping[str, str] | None = None) -> None:
        (j,) = self._call("place", [job_id])
        job = self._job(j)
        self.jobs[j] = replace(job, required_nodes=tuple(nodes),
                               admin_comment=(extra_updates or {}).get("AdminComment", job.admin_comment))

    def release(self, job_ids: Iterable[int]) -> None:
        for j in self._call("release", list(job_ids)):
            self.jobs[j] = replace(self._job(j), priority=1, reason="", state_reason="")

    def _hold(self, method: str, job_ids: Iterable[int], reason: str) -> None:
        ids = self._call(method, list(job_ids))
        for j in ids:
            if self._job(j).state is not S.PENDING:
                raise SlurmCommandError(f"Job {j} is not pending", returncode=1, stderr="not pending")
        for j in ids:
            self.jobs[j] = replace(self.jobs[j], priority=0, reason=reason, state_reason=reason)

    def hold(self, job_ids: Iterable[int]) -> None:
        self._hold("hold", job_ids, "JobHeldUser")

    def admin_hold(self, job_ids: Iterable[int]) -> None:
        self._hold("admin_hold", job_ids, "JobHeldAdmin")

    def _requeue_hold(self, method: str, job_ids: Iterable[int]) -> None:
        first: SlurmCommandError | None = None
        for j in self._call(method, list(job_ids)):
            try:
                job = self._job(j)
            except SlurmCommandError as exc:
                first = first or exc
                continue
            if job.state.is_active:  # Incomplete: an ended job stays ended
                self.jobs[j] = replace(job, state=S.PENDING, priority=0, reason="job requeued in held state",
                                       state_reason="JobHeldUser", start_time=None, nodes=(),
                                       restart_count=job.restart_count + 1)
        if first is not None:
            raise first

    def evict(self, job_id: int) -> None:
        self._requeue_hold("evict", [job_id])

    def requeue_hold(self, job_ids: Iterable[int]) -> None:
        self._requeue_hold("requeue_hold", job_ids)

    def signal(self, job_ids: Iterable[int], sig: Signal = "USR1", batch_only: bool = True) -> dict[int, str]:
        refused: dict[int, str] = {}
        for j in self._call("signal", list(job_ids)):
            if j not in self.jobs or self.jobs[j].state.is_finished:
                refused[int(j)] = "Invalid job id specified"
            else:
                self.signals.append((j, str(sig)))
        return refused

    def cancel(self, job_id: int) -> None:
        (j,) = self._call("cancel", [job_id])
        self.jobs[j] = replace(self._job(j), state=S.CANCELLED, end_time=self.now)

    def update_comment(self, job_id: int, comment: str | None = None, admin_comment: str | None = None) -> None:
        (j,) = self._call("update_comment", [job_id])
        job = self._job(j)
        self.jobs[j] = replace(job, comment=job.comment if comment is None else comment,
                               admin_comment=job.admin_comment if admin_comment is None else admin_comment)
