"""What a move costs and what it bought: the inputs and the record of cost-aware decisions.

A migration or a preemption costs the job its restart (it saves and loads a checkpoint and warms up
again: process start, CUDA/NCCL init, data loader, first iterations; the paper's Figure 3) and whatever
stopping it takes in the shell (the daemon waits out the grace period for the checkpoint, then
Slurm requeues the job and relaunches it). The engine moves or preempts a job only when what that buys
(a job it makes room for, a faster placement) over the job's remaining time, or ``horizon_s`` when
that is unknown, exceeds this cost (placement/move_value.py). Both shells give the numbers: the
simulator from its restart model (sim/restart.py, the same defaults), the daemon from the site's
``moves:`` section.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from .errors import InputError
from .placement import GpuRef, Placement

DEFAULT_RESTART_S = 30.0  # the small models: about 20 s warm-up + 10 s checkpoint save/load
LLM_RESTART_S = 90.0  # LLMs and Gavel's multi-GPU Transformer/LM: pipeline set-up, a multi-GB checkpoint
DEFAULT_PER_MODEL: tuple[tuple[str, float], ...] = (("Bert-Large", LLM_RESTART_S), ("GPT2-Medium", LLM_RESTART_S),
                                                    ("Transformer", LLM_RESTART_S), ("LM", LLM_RESTART_S))
DEFAULT_HORIZON_S = 1080.0  # three of the default 360 s rounds
DEFAULT_RECENT_ROUNDS = 3


def restart_seconds(model: str, default_s: float, per_model: Mapping[str, float]) -> float:
    """A model's restart: its exact name, else its Gavel family (``"LM"`` for ``"LM (batch size 20)"``),
    else ``default_s``."""
    hit = per_model.get(model)
    if hit is None and " (" in model:
        hit = per_model.get(model.split(" (", 1)[0])
    return default_s if hit is None else hit


@dataclass(frozen=True)
class MoveCosts:
    """Seconds of a job's progress a move costs it, and how far ahead a gain counts.

    ``restart_s`` (per model in ``per_model``): the restart itself; ``stop_s``: what the shell adds to
    every stop (the daemon: grace period, requeue, relaunch gap; the simulator: nothing);
    ``horizon_s``: how long a gain is counted for a job whose remaining time is unknown;
    ``recent_rounds``: the window of hysteresis (a job moved within it costs one more move per move).
    Hashable (``per_model`` as pairs), as the engine's configuration is."""

    restart_s: float = DEFAULT_RESTART_S
    per_model: tuple[tuple[str, float], ...] = DEFAULT_PER_MODEL
    stop_s: float = 0.0
    horizon_s: float = DEFAULT_HORIZON_S
    recent_rounds: int = DEFAULT_RECENT_ROUNDS

    def __post_init__(self) -> None:
        for name, s in (("restart_s", self.restart_s), ("stop_s", self.stop_s), *self.per_model):
            if not s >= 0:
                raise InputError(f"move cost {name} must be >= 0 seconds, got {s}")
        if not self.horizon_s > 0:
            raise InputError(f"move horizon_s must be > 0 seconds, got {self.horizon_s}")
        if isinstance(self.recent_rounds, bool) or not isinstance(self.recent_rounds, int) or self.recent_rounds < 0:
            raise InputError(f"move recent_rounds must be an integer >= 0, got {self.recent_rounds!r}")

    def seconds(self, model: str) -> float:
        """What moving (or preempting) a job of ``model`` costs it, in seconds of its progress."""
        return restart_seconds(model, self.restart_s, dict(self.per_model)) + self.stop_s


@dataclass(frozen=True, slots=True)
class MoveReason:
    """Why a job that ran last round moved or stopped, what that bought and what it cost.

    ``cause``: ``room`` (its GPUs went to ``for_jobs``, jobs that start, move in or join there),
    ``unpack`` (it left its partner ``for_jobs[0]`` to run alone), ``pack`` (it joined ``for_jobs[0]``
    on that job's GPUs), ``rule`` (an operator's node rule keeps it off its GPUs), ``limit`` (its user's
    or account's GPU limit stopped it: ``detail`` names the limit), ``stop`` (nothing took its GPUs: the
    policy's order left no place for it). ``gain`` and ``cost`` are GPU-seconds of
    work at speed alone over the horizon: what the jobs it made room for (or its faster placement)
    gain, and what its restart and stop cost it (times its GPUs and its speed)."""

    job: str
    action: str  # migrate | preempt
    cause: str
    for_jobs: tuple[str, ...] = ()
    gain: float = 0.0
    cost: float = 0.0
    speed_before: float = 0.0
    speed_after: float = 0.0  # 0 for a preempted job
    detail: str = ""


class RecentPlacements(Mapping[str, tuple[tuple[GpuRef, ...], ...]]):
    """Each job's GPUs in the shell's last few plans, newest first (a job absent from a plan: ``()``):
    the history cost-aware decisions read (``RoundRequest.recent``). A shell keeps the plans; a job's
    entry is computed when the engine asks for it, which it does only for jobs it considers moving."""

    def __init__(self, plans: Sequence[Placement]) -> None:
        self._plans = tuple(plans)
        self._gpus: list[Mapping[str, tuple[GpuRef, ...]]] | None = None

    def _tables(self) -> list[Mapping[str, tuple[GpuRef, ...]]]:
        if self._gpus is None:
            self._gpus = [p.job_gpus() for p in self._plans]
        return self._gpus

    def __getitem__(self, job: str) -> tuple[tuple[GpuRef, ...], ...]:
        seen = tuple(g.get(job, ()) for g in self._tables())
        if not any(seen):
            raise KeyError(job)
        return seen

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(j for g in self._tables() for j in g))

    def __len__(self) -> int:
        return sum(1 for _ in self)


OSCILLATION_ROUNDS = 3  # a job back on GPUs it left within this many rounds oscillated (A -> B -> A)


def is_shift(before: Sequence[GpuRef], after: Sequence[GpuRef], partner_before: str = "",
             partner_after: str = "") -> bool:
    """A move between GPUs of the same node(s) that changed nothing else for the job: its nodes and its
    partner (or none) are the same, its GPUs are not. (Leaving a partner for free GPUs of the node is an
    unpacking, not a shift.)"""
    return bool(before) and bool(after) and tuple(before) != tuple(after) and partner_before == partner_after \
        and {n for n, _ in before} == {n for n, _ in after}


def partners(p: Placement) -> dict[str, str]:
    """Each packed job's partner in plan ``p``."""
    out: dict[str, str] = {}
    for gpus in p.nodes.values():
        for slot in gpus:
            if len(slot) == 2:
                a, b = sorted(slot)
                out[a], out[b] = b, a
    return out


def is_return(before: Sequence[GpuRef], after: Sequence[GpuRef], earlier: Sequence[Sequence[GpuRef]]) -> bool:
    """A move back: the job left GPUs it held in one of the ``earlier`` rounds (newest first, the round
    before ``before`` first; ``OSCILLATION_ROUNDS - 1`` of them count) and now holds them again."""
    return bool(before) and bool(after) and tuple(before) != tuple(after) and \
        any(tuple(e) == tuple(after) for e in earlier[:OSCILLATION_ROUNDS - 1])
