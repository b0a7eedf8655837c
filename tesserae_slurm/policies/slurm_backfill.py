"""Plain Slurm as sites run it: multifactor priority, whole GPUs, EASY backfill on requested time limits.

The simulator's baseline, what ``priority/multifactor`` + ``sched/backfill`` + ``select/cons_tres``
give a site without tesserae: Slurm's priority (its default weights keep the queue in submit order),
nothing running moved, packed or preempted (the engine's pinned placement; ``placement.pinned.walk_one``
tells the policy where a job would land, so its plan is the engine's), and one EASY reservation for
the highest-priority job that cannot start, on every running job's end by its time limit. Limits come
from the trace or from a model of users' requests. The rules, the limit model and its sources:
docs/simulator.md, "Plain Slurm".
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from ..model import Cluster, InputError, Job, JobView, Placement
from ..placement.pinned import walk_one
from .base import Ranking, SchedulingInput

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
# the round values users pick (Tsafrir et al.'s modes): 15 and 30 min, 1, 2, 4, 8, 12 h, 1, 2, 3 days
LIMIT_STEPS = (15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR, 12 * HOUR, DAY, 2 * DAY, 3 * DAY)
LIMIT_MODES = ("trace", "model", "exact")


@lru_cache(maxsize=1 << 16)
def modeled_limit(duration: float, job_id: str, seed: int, f: float, max_s: float) -> float:
    """The time limit a user would have asked for a job that runs ``duration`` seconds (module doc)."""
    digest = hashlib.blake2b(f"{seed}:{job_id}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2.0 ** 64
    want = duration * (1.0 + f * u)
    step = next((s for s in LIMIT_STEPS if s >= want), math.ceil(want / DAY) * DAY)
    return max(duration, min(step, max_s))


class Backfill(NamedTuple):
    running: tuple[str, ...]  # keep running, in the order the engine places them
    started: tuple[str, ...]  # start now, in priority order
    held: tuple[str, ...]  # wait (no room now, or starting would delay the reservation)
    never: tuple[str, ...]  # larger than the cluster's largest GPU type
    reservation: tuple[str, float] | None  # (job, start time) of the top job that cannot start now


@dataclass(frozen=True)
class SlurmBackfillPolicy:
    weight_age: float = 0.0  # PriorityWeightAge (Slurm's default 0)
    weight_job_size: float = 0.0  # PriorityWeightJobSize (default 0)
    max_age_s: float = 7 * DAY  # PriorityMaxAge (default 7-0)
    favor_small: bool = False  # PriorityFavorSmall (default NO)
    max_job_test: int = 500  # bf_max_job_test (default 500): pending jobs considered per round
    limit: str = "trace"  # trace | model | exact (module doc)
    limit_f: float = 3.0  # overestimation factor f of the limit model
    limit_max_s: float = 7 * DAY  # the partition's MaxTime, the largest limit a user can ask for
    name: str = "slurm-backfill"

    def __post_init__(self) -> None:
        if self.limit not in LIMIT_MODES:
            raise InputError(f"slurm-backfill: limit must be one of {', '.join(LIMIT_MODES)}, got {self.limit!r}")
        if self.max_age_s <= 0 or self.limit_f < 0 or self.limit_max_s <= 0 or self.max_job_test < 1:
            raise InputError("slurm-backfill: max_age_s and limit_max_s must be > 0, limit_f >= 0, "
                             "max_job_test >= 1")

    def initial_state(self) -> None:
        return None

    def time_limit(self, v: JobView, seed: int) -> float:
        """The job's requested limit in seconds (``limit`` mode; the model needs the duration)."""
        if self.limit == "trace" and v.job.time_limit is not None:
            return v.job.time_limit
        if v.total_work is None:  # no --time and no duration (the daemon): Slurm gives the partition's MaxTime
            return self.limit_max_s
        if self.limit == "exact":
            return v.total_work
        return modeled_limit(v.total_work, v.job.id, seed, self.limit_f, self.limit_max_s)

    def priority(self, v: JobView, now: float, total_gpus: int) -> int:
        age = min(max(now - v.submit_time, 0.0), self.max_age_s) / self.max_age_s
        n = v.job.num_gpus
        size = (1.0 - (n - 1) / max(total_gpus - 1, 1)) if self.favor_small else n / total_gpus
        return int(self.weight_age * age + self.weight_job_size * size)

    def rank(self, inp: SchedulingInput, state: None) -> tuple[Ranking, None]:
        b = self.backfill(inp)
        return Ranking(b.running + b.started + b.held + b.never, held=b.held), state

    def stable_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, max_rounds: int) -> int:
        """With the same jobs and running set, a ranking repeats while no priority moves (no age weight)
        and every running job stays within its limit (its end, start + limit, stays put; the start is
        rounded to the ms, so the shell's float steps do not move it); waiting jobs' ends only grow."""
        if self.weight_age:
            return 0
        k = max_rounds
        for v in inp.jobs:
            if v.running:
                slack = self.time_limit(v, inp.seed) - v.executed_time
                k = min(k, max(int(slack // inp.round_s) - 1, 0))
        return k

    def skip_rounds(self, inp: SchedulingInput, state: None, ranking: Ranking, rounds: int) -> None:
        return state

    def backfill(self, inp: SchedulingInput) -> Backfill:
        """This round's decision: which waiting jobs start, which wait, and the reservation."""
        cluster, now = inp.cluster, inp.now
        total = cluster.total_gpus
        arrival = {v.job.id: k for k, v in enumerate(inp.jobs)}
        running = [v for v in inp.jobs if v.running]
        waiting = [v for v in inp.jobs if not v.running]
        if self.weight_age or self.weight_job_size:
            queue = sorted(waiting, key=lambda v: (-self.priority(v, now, total), v.submit_time, arrival[v.job.id]))
        else:  # Slurm's defaults: every priority is 0
            queue = sorted(waiting, key=lambda v: (v.submit_time, arrival[v.job.id]))
        plan = _Plan(cluster, inp.placement)
        for v in running:  # ends by the limit; past it (slower GPUs than the reference), ending now
            plan.add(v.job, max(round(now - v.executed_time, 3) + self.time_limit(v, inp.seed), now))
        capacity = max(sum(n.num_gpus for n in cluster.nodes if n.gpu_type == t) for t in cluster.gpu_types)
        started: list[str] = []
        held: list[str] = []
        never: list[str] = []  # larger than any GPU type: the engine reports them Unsatisfiable
        reserved: tuple[float, Job] | None = None  # (start time, job) of the reservation
        for k, v in enumerate(queue):
            job = v.job
            if job.num_gpus > capacity:
                never.append(job.id)
                continue
            if k >= self.max_job_test:
                held.append(job.id)
                continue
            end = now + self.time_limit(v, inp.seed)
            if not plan.fits_now(job):
                held.append(job.id)
                if reserved is None:
                    reserved = (plan.earliest_start(job, now), job)
                continue
            if reserved is not None and not plan.still_fits(reserved[1], reserved[0], job, end):
                held.append(job.id)
                continue
            plan.add(job, end)
            started.append(job.id)
        return Backfill(tuple([v.job.id for v in running]), tuple(started), tuple(held), tuple(never),
                        None if reserved is None else (reserved[1].id, reserved[0]))


class _Plan:
    """The running jobs (and those started this round) as GPUs per node, with their ends; every "where
    would it go" is ``placement.pinned.walk_one``, the engine's own pinned placement."""

    def __init__(self, cluster: Cluster, placement: Placement | None) -> None:
        self.cluster = cluster
        self.size = {n.name: n.num_gpus for n in cluster.nodes}
        self.now_free = dict(self.size)
        self.gpus_of = placement.job_gpus() if placement is not None else {}
        self.uses: list[dict[str, int]] = []
        self.ends: list[float] = []
        # GPU counts that did not fit now (adding jobs only takes room: true all round), and that would
        # push the reservation back (a waiting job's place depends only on its GPU count and the free
        # GPUs: true until the next job starts)
        self.no_room: set[int] = set()
        self.in_the_way: set[int] = set()

    def add(self, job: Job, end: float) -> None:
        """``job`` runs from now to ``end``: where it is (running) or where the engine will put it."""
        if job.id in self.gpus_of:
            where: dict[str, int] = {}
            for node, _ in self.gpus_of[job.id]:
                where[node] = where.get(node, 0) + 1
        else:
            found = walk_one(self.cluster, self.now_free, job)
            if found is None:
                raise InputError(f"slurm-backfill: job {job.id} is started but does not fit")
            where = found
        for node, count in where.items():
            self.now_free[node] -= count
        self.uses.append(where)
        self.ends.append(end)
        self.in_the_way.clear()

    def fits_now(self, job: Job) -> bool:
        if job.num_gpus in self.no_room:
            return False
        if walk_one(self.cluster, self.now_free, job) is not None:
            return True
        self.no_room.add(job.num_gpus)
        return False

    def _free_at(self, t: float, extra: Mapping[str, int] | None = None) -> dict[str, int]:
        free = dict(self.size)
        for where, end in zip(self.uses, self.ends):
            if end > t:
                for node, count in where.items():
                    free[node] -= count
        for node, count in (extra or {}).items():
            free[node] -= count
        return free

    def earliest_start(self, job: Job, now: float) -> float:
        """The first time (now or a running job's end) at which ``job`` fits once the jobs ended by then are gone."""
        ending = sorted(zip(self.ends, [sum(w.values()) for w in self.uses]))
        total = sum(self.size.values())
        busy, k = total - sum(self.now_free.values()), 0
        for t in sorted({now, *self.ends}):
            while k < len(ending) and ending[k][0] <= t:  # GPUs free by t, counted: walk only when enough
                busy -= ending[k][1]
                k += 1
            if total - busy >= job.num_gpus and walk_one(self.cluster, self._free_at(t), job) is not None:
                return t
        return math.inf  # never (a type too small on a mixed cluster): nothing is held for it

    def still_fits(self, top: Job, t: float, job: Job, end: float) -> bool:
        """Whether ``top`` still fits at ``t`` if ``job`` (ending at ``end``) starts now where the engine puts it."""
        if end <= t:
            return walk_one(self.cluster, self._free_at(t), top) is not None
        if job.num_gpus in self.in_the_way:
            return False
        where = walk_one(self.cluster, self.now_free, job)
        if where is not None and walk_one(self.cluster, self._free_at(t, where), top) is not None:
            return True
        self.in_the_way.add(job.num_gpus)
        return False
