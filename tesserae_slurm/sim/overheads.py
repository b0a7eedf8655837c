"""What a real run on Slurm adds to the simulator's round model: a start's latency and a stop's wait.

The round model starts every placed job at the round's boundary and frees a stopped job's GPUs at
once. On Slurm a start takes time (the daemon's decision, the release, Slurm's scheduling, the job's
process start) and a stop too (the checkpoint signal, the job's checkpoint, the requeue-hold): a job
started onto GPUs that a stopping job holds waits for that stop, and a migrated job waits for its own.
The values are wall seconds measured on real runs (`REAL_SLURM`, docs/simulator.md "Overheads of a
real run"), fixed for every trace; a replay in scaled time S charges S trace seconds per wall second.
The restart cost (checkpoint load and warm-up, ``restart.py``) is separate and comes on top of these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..model import InputError, Placement, RoundDecision

GpuRef = tuple[str, int]


@dataclass(frozen=True)
class Overheads:
    """Seconds (of the clock the simulation runs on) a real run adds to the round model."""

    launch_s: float = 0.0  # a start at a round: the round's start -> the job's process running
    stop_s: float = 0.0  # a start onto GPUs a job stopped this round held, and a migration: signal -> GPUs free
    # starts between rounds (the daemon's ``slurm.poll_seconds``; plain Slurm's own passes): a job that
    # starts onto GPUs that were free before the round began started when they came free (or when it
    # was submitted, if later) plus ``between_s``, at most one round earlier; None: only at rounds
    between_s: float | None = None
    round_over_s: float = 0.0  # how much longer a round's period is than its length (rounds that overrun)
    # in a round that migrates a job, what its migrated jobs and its starts onto vacated GPUs wait instead of
    # ``stop_s`` (the daemon starts them together once every stop of the round has ended, and a migrated
    # job's stop ends only when Slurm has requeued it); None: ``stop_s``
    migrate_s: float | None = None

    def __post_init__(self) -> None:
        if not (self.launch_s >= 0 and self.stop_s >= 0 and (self.between_s is None or self.between_s >= 0)
                and self.round_over_s >= 0 and (self.migrate_s is None or self.migrate_s >= 0)):
            raise InputError(f"overheads must be >= 0 seconds, got {self}")

    def scaled(self, scale: float) -> Overheads:
        """In trace seconds of a replay at ``scale`` trace seconds per wall second."""
        return Overheads(self.launch_s * scale, self.stop_s * scale,
                         None if self.between_s is None else self.between_s * scale, self.round_over_s * scale,
                         None if self.migrate_s is None else self.migrate_s * scale)

    def delays(self, decision: RoundDecision, before: Placement, now: float, round_s: float,
               free_since: Mapping[GpuRef, float], submitted: Mapping[str, float]) -> dict[str, float]:
        """Job -> seconds it waits before computing in the round that begins at ``now`` (restarts not
        included), for the jobs that begin a run in it: started, resumed or migrated. Negative for a job
        that started between rounds (it computed that long before the round). ``free_since``: when each
        GPU free at the end of the last round came free; ``submitted``: the jobs' submission times."""
        beginning = [*decision.started, *decision.migrated]
        if not beginning:
            return {}
        was = before.job_gpus()
        vacated = {g for j in (*decision.preempted, *decision.migrated) for g in was.get(j, ())}
        gpus = decision.placement.job_gpus()
        moved = set(decision.migrated)
        onto_running = {p.placed if p.partner not in decision.started else p.partner for p in decision.packed
                        if (p.placed in decision.started) != (p.partner in decision.started)}
        stop = self.migrate_s if moved and self.migrate_s is not None else self.stop_s
        out: dict[str, float] = {}
        for j in beginning:
            mine = gpus.get(j, ())
            if j in moved or vacated.intersection(mine):
                out[j] = self.launch_s + stop
                continue
            out[j] = self.launch_s
            if self.between_s is not None and j not in onto_running and all(g in free_since for g in mine):
                since = max([submitted.get(j, now), *(free_since[g] for g in mine)]) + self.between_s
                if since < now:
                    out[j] = -min(now - since, round_s)
        return out

    def to_json(self) -> Mapping[str, float | None]:
        return {"launch_s": self.launch_s, "stop_s": self.stop_s, "between_s": self.between_s,
                "round_over_s": self.round_over_s, "migrate_s": self.migrate_s}


def free_after(before: Mapping[GpuRef, float], held: Mapping[GpuRef, float], busy: set[GpuRef],
               gpus: Sequence[GpuRef], now: float) -> dict[GpuRef, float]:
    """When each GPU free at the end of a round (not in ``busy``) came free: at the time its last
    holder this round let go of it (``held``: GPU -> absolute time), else as it was (``before``), else
    at the round's start ``now`` (a stopped job left it)."""
    out: dict[GpuRef, float] = {}
    for g in gpus:
        if g in busy:
            continue
        out[g] = held[g] if g in held else before.get(g, now)
    return out


# Wall seconds on the dev cluster (Slurm 22.05, 8 x 4 emulated GPUs, the 2-core machine shared with other
# sessions' work), the means `devcluster/overheads.py` (``RunOverheads.model``) reads from one real run's
# directory (docs/simulator.md, "Overheads of a real run"): the daemon's from the first of the physical
# experiment's three tesserae-t runs at scale 60 (68 starts at rounds onto free GPUs, 38 onto vacated GPUs,
# 166 in rounds that migrate, 19 between rounds; rounds of 6 s began 6.03 s apart), and the same values
# predict every other run. Plain Slurm's (medians of an earlier run): its passes start a job when it fits,
# as the daemon's starts between rounds do.
REAL_DAEMON = Overheads(launch_s=1.61, stop_s=0.79, between_s=1.55, round_over_s=0.03, migrate_s=3.73)
REAL_PLAIN = Overheads(launch_s=1.0, stop_s=0.0, between_s=1.0)
