"""Optional SlurmBackend over pyslurm (>= 23.x API), used only when it matches the running Slurm.

pyslurm links libslurm of one exact major.minor; a mismatch fails at import or, worse, talks a
wrong protocol. So `create` compares pyslurm's version with `sinfo --version` first and refuses
otherwise. Only the frequent calls (job listing and job updates) go through pyslurm; submission,
node listing and ping stay on the CLI. What it is tested against, and why: docs/slurm-versions.md.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from . import parse
from .backend import Signal, SlurmBackendError, SlurmCliBackend
from .commands import job_id_arg, node_list_arg, signal_name
from .runner import SlurmCommandError, SlurmError
from .types import NodeGpus, SlurmJob

T = TypeVar("T")

log = logging.getLogger(__name__)


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
    def create(cls, cli: SlurmCliBackend, env: Mapping[str, str] | None = None) -> PyslurmBackend:
        try:
            module = importlib.import_module("pyslurm")
        except ImportError as exc:
            raise SlurmBackendError(f"pyslurm is not importable ({exc}); use prefer=cli") from exc
        mine = pyslurm_version(module)
        theirs = cli.slurm_version()
        if mine != theirs:
            raise SlurmBackendError(
                f"pyslurm {mine[0]}.{mine[1]:02d} does not match Slurm {theirs[0]}.{theirs[1]:02d}; "
                "using the CLI backend requires prefer=cli"
            )
        conf = (env or {}).get("SLURM_CONF")
        if conf and os.environ.get("SLURM_CONF") != conf:
            # libslurm reads SLURM_CONF from the process environment once; it cannot follow `env`.
            raise SlurmBackendError(
                f"pyslurm reads SLURM_CONF from the process environment, which is not {conf}; "
                "export it or use prefer=cli"
            )
        return cls(cli, module)

    # ---- queries -----------------------------------------------------------------------------

    def list_jobs(self, partition: str | None = None) -> tuple[SlurmJob, ...]:
        jobs = self._call("load jobs", lambda: self._py.Jobs.load())
        out = tuple(_job_from_pyslurm(j) for j in jobs.values())
        if partition is not None:
            out = tuple(j for j in out if partition in j.partition.split(","))
        return out

    # ---- actions -----------------------------------------------------------------------------

    def place(self, job_id: int, nodes: Sequence[str], extra_updates: Mapping[str, str] | None = None) -> None:
        if extra_updates:  # arbitrary scontrol keys have no pyslurm attribute mapping
            super().place(job_id, nodes, extra_updates)
            return
        desc = self._py.JobSubmitDescription(required_nodes=node_list_arg(nodes), begin_time="now")
        self._call(f"place job {job_id}", lambda: self._py.Job(int(job_id_arg(job_id))).modify(desc))

    def release(self, job_ids: Iterable[int]) -> None:
        for jid in job_ids:
            self._on_job("release", jid, lambda job: job.release())

    def signal(self, job_id: int, sig: Signal = "USR1", batch_only: bool = True) -> None:
        name = "SIG" + signal_name(sig)
        steps = "batch" if batch_only else "all"
        self._call(f"signal job {job_id}", lambda: self._py.Job(int(job_id_arg(job_id))).send_signal(name, steps=steps))

    def admin_hold(self, job_ids: Iterable[int]) -> None:
        for jid in job_ids:  # pyslurm's hold() without mode="user" is an administrator's hold
            self._on_job("hold", jid, lambda job: job.hold())

    def evict(self, job_id: int) -> None:
        self.requeue_hold(job_id)

    def requeue_hold(self, job_id: int) -> None:
        self._call(f"requeue job {job_id}", lambda: self._py.Job(int(job_id_arg(job_id))).requeue(hold=True))

    def cancel(self, job_id: int) -> None:
        self._call(f"cancel job {job_id}", lambda: self._py.Job(int(job_id_arg(job_id))).cancel())

    def update_comment(self, job_id: int, comment: str | None = None, admin_comment: str | None = None) -> None:
        fields = {k: v for k, v in (("comment", comment), ("admin_comment", admin_comment)) if v is not None}
        if fields:
            desc = self._py.JobSubmitDescription(**fields)
            self._call(f"update job {job_id}", lambda: self._py.Job(int(job_id_arg(job_id))).modify(desc))

    def _on_job(self, what: str, job_id: int, act: Callable[[Any], object]) -> None:
        self._call(f"{what} job {job_id}", lambda: act(self._py.Job(int(job_id_arg(job_id)))))

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except SlurmError:
            raise
        except Exception as exc:  # pyslurm.RPCError and whatever libslurm raises
            raise SlurmCommandError(f"pyslurm {what}: {exc}", returncode=1, stderr=str(exc)) from exc


def _job_from_pyslurm(job: Any) -> SlurmJob:
    """Map a pyslurm.Job onto SlurmJob through its documented properties."""
    state = parse.job_state(job.state)
    nodes = parse.parse_nodelist(job.allocated_nodes or "")
    gpus: list[NodeGpus] = []
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
    per_node = sum(int(v) for k, v in tres.items() if str(k).split(":")[0] == "gpu") if isinstance(tres, dict) else 0
    return SlurmJob(
        job_id=int(job.id),
        name=job.name or "",
        user=job.user_name or "",
        state=state,
        reason="" if job.state_reason in (None, "None") else str(job.state_reason),
        partition=job.partition or "",
        nodes=nodes,
        gpus=tuple(gpus),
        comment=job.comment or "",
        admin_comment=job.admin_comment or "",
        restart_count=int(job.requeue_count or 0),
        priority=int(job.priority or 0),
        submit_time=job.submit_time or None,
        eligible_time=job.eligible_time or None,
        start_time=None if state.name == "PENDING" else (job.start_time or None),
        end_time=(job.end_time or None) if state.is_finished else None,
        tres_per_node=",".join(f"gres:{k}:{v}" for k, v in tres.items()) if isinstance(tres, dict) else "",
        gpus_per_node=per_node,
        required_nodes=parse.parse_nodelist(job.required_nodes or ""),
        batch_host=job.batch_host or "",
        requeue=bool(job.is_requeueable),
        exit_code=job.exit_code if state.is_finished else None,
        exit_signal=job.exit_code_signal if state.is_finished else None,
        state_reason="" if job.state_reason in (None, "None") else str(job.state_reason),
    )


def _gpu_indices_from_gres_dict(gres: Mapping[str, Any]) -> tuple[int, ...]:
    for key, value in gres.items():
        if str(key).split(":")[0] != "gpu":
            continue
        if isinstance(value, dict) and value.get("indexes"):
            return parse.parse_index_ranges(str(value["indexes"]))
    return ()
