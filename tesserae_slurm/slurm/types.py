"""What the Slurm layer reports: frozen snapshots of jobs and nodes as Slurm sees them.

These mirror Slurm's view (names, states, reasons, GPU indices from gres_detail) and are turned
into the scheduler's own model objects by the daemon, not here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SlurmJobState(enum.Enum):
    """Slurm's base job states (`job_state` in squeue --json, `%T` in squeue -o)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    CONFIGURING = "CONFIGURING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESIZING = "RESIZING"
    REVOKED = "REVOKED"
    SIGNALING = "SIGNALING"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STAGE_OUT = "STAGE_OUT"
    STOPPED = "STOPPED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    UNKNOWN = "UNKNOWN"

    @property
    def is_active(self) -> bool:
        """Holds (or may soon hold) resources on nodes."""
        return self in _ACTIVE

    @property
    def is_finished(self) -> bool:
        return self in _FINISHED


_ACTIVE = frozenset(
    {
        SlurmJobState.RUNNING,
        SlurmJobState.SUSPENDED,
        SlurmJobState.COMPLETING,
        SlurmJobState.CONFIGURING,
        SlurmJobState.SIGNALING,
        SlurmJobState.STAGE_OUT,
        SlurmJobState.STOPPED,
        SlurmJobState.RESIZING,
    }
)
_FINISHED = frozenset(
    {
        SlurmJobState.COMPLETED,
        SlurmJobState.CANCELLED,
        SlurmJobState.FAILED,
        SlurmJobState.TIMEOUT,
        SlurmJobState.PREEMPTED,
        SlurmJobState.NODE_FAIL,
        SlurmJobState.BOOT_FAIL,
        SlurmJobState.DEADLINE,
        SlurmJobState.OUT_OF_MEMORY,
        SlurmJobState.REVOKED,
        SlurmJobState.SPECIAL_EXIT,
    }
)

# Reasons under which a pending job waits for an explicit release.
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "job requeued in held state", "job_requeued_in_held_state"})
REQUEUE_HELD_REASONS = frozenset({"job requeued in held state", "job_requeued_in_held_state"})


@dataclass(frozen=True)
class NodeGpus:
    """GPU indices a job holds on one node (from gres_detail, e.g. `gpu:2(IDX:0-1)`)."""

    node: str
    indices: tuple[int, ...]


@dataclass(frozen=True)
class SlurmJob:
    """One job as Slurm reports it.

    `reason` is Slurm's most specific explanation (state_description when set, else
    state_reason; empty when Slurm says "None"). Times are epoch seconds; `start_time` is None
    while the job is pending (Slurm reports an expected start there) and `end_time` is None
    until the job has finished (Slurm reports the time-limit end there). `exit_code` and
    `exit_signal` are decoded from Slurm's raw wait status.
    """

    job_id: int
    name: str
    user: str
    state: SlurmJobState
    reason: str = ""
    partition: str = ""
    nodes: tuple[str, ...] = ()
    gpus: tuple[NodeGpus, ...] = ()
    comment: str = ""
    admin_comment: str = ""
    restart_count: int = 0
    priority: int = 0
    submit_time: int | None = None
    eligible_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    tres_per_node: str = ""
    gpus_per_node: int = 0
    required_nodes: tuple[str, ...] = ()
    batch_host: str = ""
    requeue: bool = False
    exit_code: int | None = None
    exit_signal: int | None = None
    state_reason: str = ""  # Slurm's reason code alone (JobHeldAdmin stays visible under a description)
    state_flags: tuple[str, ...] = ()  # the other names in Slurm's job_state (e.g. REQUEUED), 23.11+
    account: str = ""
    nice: int = 0  # signed; Slurm's priority is lowered by it (0 while held: see parse.job_priority)

    @property
    def admin_held(self) -> bool:
        """Held by root or an operator: only they can release it (JobHeldAdmin, not JobHeldUser)."""
        return self.state is SlurmJobState.PENDING and self.state_reason == "JobHeldAdmin"

    @property
    def held(self) -> bool:
        """Pending and waiting for `scontrol release` (submitted with --hold or requeue-held)."""
        return self.state is SlurmJobState.PENDING and (self.priority == 0 or self.reason in HELD_REASONS)

    @property
    def requeued_held(self) -> bool:
        return self.state is SlurmJobState.PENDING and self.reason in REQUEUE_HELD_REASONS

    def gpu_indices(self, node: str) -> tuple[int, ...]:
        for entry in self.gpus:
            if entry.node == node:
                return entry.indices
        return ()

    def gpu_map(self) -> dict[str, tuple[int, ...]]:
        return {entry.node: entry.indices for entry in self.gpus}


@dataclass(frozen=True)
class SlurmNode:
    """One node as sinfo reports it. `state` is Slurm's base state in lower case (idle, mixed, ...)."""

    name: str
    state: str
    state_flags: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    cpus: int = 0
    alloc_cpus: int = 0
    gpus: int = 0
    gpus_used: int = 0
    gpu_indices_used: tuple[int, ...] | None = None
    shards: int = 0
    shards_used: int = 0
    gres: str = ""
    gres_used: str = ""
    reason: str = ""

    @property
    def available(self) -> bool:
        """Up and schedulable: not down, drained, failing or not responding."""
        bad_flags = {"DRAIN", "DRAINING", "DRAINED", "FAIL", "NOT_RESPONDING", "MAINTENANCE", "REBOOT_REQUESTED"}
        return self.state in ("idle", "mixed", "allocated", "completing") and not bad_flags & set(self.state_flags)
