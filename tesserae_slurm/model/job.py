"""What the engine knows about a job: its shape and profile key, never its runtime state."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InputError


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the decision engine sees it.

    ``model``/``batch_size`` form the profile key. ``parallelism`` lists the strategies the job may
    run with (LLM layer splits such as ``"10,14"``, or ``"TP24"``/``"DP24"``); empty means every
    strategy the profile knows for this model and GPU count. ``group``: jobs of different non-empty
    groups are never packed together (the daemon sets it to the user when MPS must not time-slice
    between users' servers, ``mps.cross_user: never``); "" packs with anyone. ``user`` and
    ``account`` are what per-user and per-account GPU limits count against (placement/limit_gate.py).
    """

    id: str
    num_gpus: int
    model: str
    batch_size: str = ""
    user: str = ""
    parallelism: tuple[str, ...] = ()
    no_pack: bool = False
    group: str = ""
    account: str = ""
    time_limit: float | None = None  # seconds requested (Slurm --time); None: unknown (baselines model it)
    # what the job's profile class depends on (model, batch size, GPUs, parallelism) as one string:
    # the engine keys per-job memos on it every round, and a string hashes once, a tuple every time
    class_key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            raise InputError("job id must be a non-empty string")
        if self.num_gpus <= 0:
            raise InputError(f"job {self.id!r}: num_gpus must be > 0, got {self.num_gpus}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise InputError(f"job {self.id!r}: time_limit must be > 0 s, got {self.time_limit}")
        object.__setattr__(self, "class_key", repr((self.model, self.batch_size, self.num_gpus, self.parallelism)))


def nodes_for(num_gpus: int, node_gpus: int) -> int:
    """Nodes the daemon places a job on (``node_gpus``: the partition's largest node): one when it fits
    a node, else whole nodes. tsbatch asks Slurm for this many (``--nodes``), so squeue shows it while the
    job waits."""
    return max(1, -(-num_gpus // max(1, node_gpus)))
