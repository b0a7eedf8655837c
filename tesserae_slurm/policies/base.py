"""The contract between a scheduling policy and the engine: jobs in, an order (and maybe pairs) out.

A policy is pure: ``rank(inp, state) -> (Ranking, new_state)``. Everything that persists between
rounds (Tiresias queues, Gavel deficits and allocation resets) lives in the policy's own immutable
state object, which the shell (simulator or daemon) passes back in next round. No clock, no I/O, no
global RNG: ``inp.now`` is the shell's time and randomness comes from ``inp.seed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..model import Cluster, Job, JobView, Placement


class ThroughputLookup(Protocol):
    """Speeds a policy may reason with (LP baselines, FTF estimates).

    Units: work per second relative to the job running alone on the *reference* GPU type, so 1.0
    on the reference type and e.g. 0.4 on a K80. ``packed`` gives both jobs' speeds when ``a`` and
    ``b`` share the same GPUs of ``gpu_type``, or None when they cannot (OOM, never measured,
    different GPU counts, no-pack).
    """

    def isolated(self, job: Job, gpu_type: str) -> float: ...

    def packed(self, a: Job, b: Job, gpu_type: str) -> tuple[float, float] | None: ...


@dataclass(frozen=True)
class SchedulingInput:
    now: float  # seconds, shell clock (trace time in the simulator, epoch in the daemon)
    round_s: float  # round length in seconds
    jobs: tuple[JobView, ...]  # active (submitted, unfinished) jobs, in arrival order
    cluster: Cluster
    throughput: ThroughputLookup
    seed: int = 0  # for randomized policies (POP partitions); combine with a round counter in state
    placement: Placement | None = None  # where the running jobs are now (policies that plan placements)


@dataclass(frozen=True)
class Ranking:
    """Priority order over *all* active job ids (highest first) and optional policy-chosen pairs.

    ``pairs`` is only set by policies that decide co-location themselves (Gavel's packed LPs, POP):
    the engine then places each pair as one unit at its first member's position and does not run
    its own packing. ``held`` is set by policies that decide which jobs start (``slurm-backfill``):
    the engine places only the others and lists these as pending.
    """

    order: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = ()
    held: tuple[str, ...] = ()  # waiting jobs the engine must not start this round (backfill reservations)


@runtime_checkable
class Policy(Protocol):
    name: str

    def initial_state(self) -> Any: ...

    def rank(self, inp: SchedulingInput, state: Any) -> tuple[Ranking, Any]: ...


@runtime_checkable
class QuietRounds(Protocol):
    """Optional: lets a shell skip rounds in which nothing would change (the simulator's fast-forward).

    Both methods describe the rounds after ``rank(inp, state)`` returned ``(ranking, state)``: the
    active jobs stay the same, the jobs with ``v.running`` run through every one of them (each
    accruing ``inp.round_s`` wall seconds and ``inp.round_s * num_gpus`` GPU-seconds per round, added
    one round at a time) and the others keep waiting. Round ``i`` starts at ``inp.now`` plus
    ``inp.round_s`` added ``i`` times (``t += round_s``, the shells' clock arithmetic). Answers must be
    exact, float for float: a shell replays nothing, it trusts them.
    """

    def stable_rounds(self, inp: SchedulingInput, state: Any, ranking: Ranking, max_rounds: int) -> int:
        """How many of the following rounds (at most ``max_rounds``) certainly repeat: ``rank`` returns
        ``ranking`` again and the state evolves as ``skip_rounds`` says. Smaller is safe, larger never."""
        ...

    def skip_rounds(self, inp: SchedulingInput, state: Any, ranking: Ranking, rounds: int) -> Any:
        """The state ``rank`` leaves after ``rounds`` following rounds, each returning ``ranking``."""
        ...


def stable_order(jobs: Sequence[JobView], key: Any) -> tuple[str, ...]:
    """Ids sorted by ``key(view)``; ties keep arrival order (Python's stable sort, as every reference does)."""
    return tuple(v.id for v in sorted(jobs, key=key))
