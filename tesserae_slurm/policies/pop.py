"""POP (Narayanan et al., SOSP'21) over Gavel's policies: k random sub-problems, one LP each.

At every allocation reset each job goes to a uniformly random part (POP's ``random.randint``); each
part gets ``floor(N_w / k)`` GPUs of every type and its own LP; a pair exists only inside a part.
The k allocations are merged and Gavel's round mechanism then runs on the *whole* cluster, so GPUs
left over by the floor are still filled (policies.md §8). A job larger than its part's share gets
no allocation and only runs on leftovers.

The partition is reproducible: the RNG is seeded with (``inp.seed``, number of resets so far).
Default ``k = 4``: POP's code defaults to 1 (plain Gavel) and its cluster-scheduling experiments
sweep k in {1, 2, 4, 8} (cluster_scheduling/figure2.py); 4 is the middle of that sweep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..model import InputError, JobView
from .base import SchedulingInput
from .gavel import FtfMemory, GavelPolicyBase, GavelState, check_rel_tol, ftf_allocation
from .gavel_ftf import DEFAULT_REL_TOL
from .gavel_lp import Allocation, build_problem, capacity_of, solve_las

DEFAULT_K = 4
OBJECTIVES = ("las", "ftf")
_STATUS_RANK = {"empty": 0, "optimal": 1, "fallback": 2, "time_limit": 3}


def partition(n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Job indices of each of ``k`` parts: every job in exactly one, chosen uniformly at random."""
    part = rng.integers(0, k, size=n)
    return tuple(np.flatnonzero(part == p) for p in range(k))


def sub_capacity(capacity: Mapping[str, int], k: int) -> dict[str, int]:
    return {t: n // k for t, n in capacity.items()}


def merge(parts: Sequence[Allocation], job_ids: Sequence[str], gpu_types: Sequence[str]) -> Allocation:
    """One allocation over all jobs from the parts' (disjoint) ones."""
    row = {j: i for i, j in enumerate(job_ids)}
    single = np.zeros((len(job_ids), len(gpu_types)))
    pairs: list[tuple[str, str]] = []
    pair_rows: list[np.ndarray] = []
    for a in parts:
        for i, j in enumerate(a.job_ids):
            single[row[j]] = a.single[i]
        pairs.extend(a.pairs)
        pair_rows.extend(a.pair_x)
    live = [a for a in parts if a.status != "empty"]
    status = max((a.status for a in parts), key=_STATUS_RANK.__getitem__, default="empty")
    objective = min((a.objective for a in live), default=0.0)
    pair_x = np.array(pair_rows) if pair_rows else np.zeros((0, len(gpu_types)))
    return Allocation(tuple(job_ids), tuple(gpu_types), single, tuple(pairs), pair_x, status, objective,
                      sum(a.num_variables for a in parts))


@dataclass(frozen=True)
class PopPolicy(GavelPolicyBase):
    """Gavel LAS (or FTF) with POP's random k-way partition of jobs and cluster."""

    k: int = DEFAULT_K
    objective: str = "las"
    rel_tol: float = DEFAULT_REL_TOL  # FTF only
    name: str = "pop"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_rel_tol(self.name, self.rel_tol)
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError(f"{self.name}: k must be an integer >= 1, got {self.k!r}")
        if self.objective not in OBJECTIVES:
            raise InputError(f"{self.name}: objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")

    def parts(self, inp: SchedulingInput, resets: int) -> tuple[tuple[JobView, ...], ...]:
        """This reset's sub-problems (jobs keep their arrival order inside a part)."""
        rng = np.random.default_rng([int(inp.seed) & 0xFFFFFFFF, resets])
        return tuple(tuple(inp.jobs[i] for i in idx) for idx in partition(len(inp.jobs), self.k, rng))

    def allocate(self, inp: SchedulingInput, state: GavelState) -> tuple[Allocation, Mapping[str, FtfMemory]]:
        cap = capacity_of(inp.cluster)
        sub = sub_capacity(cap, self.k)
        memory: dict[str, FtfMemory] = {}
        solved: list[Allocation] = []
        for jobs in self.parts(inp, state.rounds.resets):
            if not jobs:
                continue
            prob = build_problem(jobs, sub, inp.throughput, self.packing)
            if self.objective == "las":
                solved.append(solve_las(prob, self.time_limit_s, self.lp_method))
            else:
                alloc, mem = ftf_allocation(prob, inp, state.ftf, self.time_limit_s, self.lp_method, self.rel_tol)
                solved.append(alloc)
                memory.update(mem)
        return merge(solved, [v.id for v in inp.jobs], tuple(cap)), memory
