"""Job-level lookups for the engine: profile classes, fallbacks, and dense class x class matrices.

Thousands of jobs share a handful of (model, batch, GPU count, allowed strategies) combinations, so
the packing stage maps every job to a ``JobClass`` and builds its weight matrix by fancy-indexing a
small class x class matrix instead of looking up each job pair. Results are memoized on the profile.

Fallbacks (documented in docs/profiles.md): a job of a known model on a GPU count or GPU type the
table did not measure runs alone at 1.0 -- its best isolated throughput, by the definition of
normalization -- under its first requested strategy (or none), and is never packed. A pair of
measured keys that the table never co-located (two LLMs) is not packable either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from ..model import InputError, Job
from .keys import JobClass, PairOption, fold_strategy

if TYPE_CHECKING:
    from .table import ThroughputProfile


# what a job's profile class depends on: ``Job.class_key``, the repr of (model, batch size, GPUs,
# parallelism), one string that per-job memos key on
CLASS_FIELDS = attrgetter("class_key")


def job_class(profile: ThroughputProfile, job: Job) -> JobClass:
    memo_key = ("class", CLASS_FIELDS(job))
    hit: JobClass | None = profile._memo.get(memo_key)
    if hit is not None:
        return hit
    key = profile.key(job.model, job.batch_size, job.num_gpus)
    candidates: tuple[str, ...] = ()
    if job.parallelism:
        if not profile.is_strategied(key.model):
            raise InputError(f"job {job.id}: {key.model} has no parallelism strategies in profile "
                             f"{profile.name}; drop its parallelism list")
        known = profile.strategies(key.model, key.num_gpus)
        if not known:  # unmeasured GPU count: nothing to check against, keep the job's spelling
            candidates = tuple(dict.fromkeys(s.strip() for s in job.parallelism))
        else:
            by_fold = {fold_strategy(s): s for s in known}
            for s in job.parallelism:
                if fold_strategy(s) not in by_fold:
                    raise InputError(f"job {job.id}: unknown strategy {s!r} for {key.model} on {key.num_gpus} "
                                     f"GPUs in profile {profile.name}; known: {', '.join(known)}")
            wanted = {fold_strategy(s) for s in job.parallelism}
            candidates = tuple(s for s in known if fold_strategy(s) in wanted)
            if len(candidates) == len(known):
                candidates = ()
    cls = JobClass(key, candidates)
    profile._memo[memo_key] = cls
    return cls


def _runs(profile: ThroughputProfile, cls: JobClass, gpu: str) -> tuple[tuple[str | None, float], ...]:
    """Isolated (strategy, speed) the class may use on ``gpu``; empty = unmeasured (fallback)."""
    runs = profile._ix.runs.get((gpu, cls.key), ())
    if cls.candidates:
        runs = tuple(r for r in runs if r[0] in cls.candidates)
    return runs


def class_isolated(profile: ThroughputProfile, cls: JobClass, gpu_type: str) -> tuple[float, str | None]:
    """(best normalized speed alone, its strategy); ties go to the strategy listed first."""
    gpu = profile._gpu(gpu_type)
    memo_key = ("isolated", gpu, cls)
    hit: tuple[float, str | None] | None = profile._memo.get(memo_key)
    if hit is not None:
        return hit
    runs = _runs(profile, cls, gpu)
    if not runs:
        out: tuple[float, str | None] = (1.0, (cls.candidates[0] if cls.candidates else None))
    else:
        best = max(range(len(runs)), key=lambda i: (runs[i][1], -i))
        out = (runs[best][1], runs[best][0])
    profile._memo[memo_key] = out
    return out


def class_best_pair(profile: ThroughputProfile, a: JobClass, b: JobClass, gpu_type: str) -> PairOption | None:
    """Feasible option with the largest speed sum the two classes may use; ties: first listed."""
    gpu = profile._gpu(gpu_type)
    memo_key = ("pair", gpu, a, b)
    if memo_key in profile._memo:
        known: PairOption | None = profile._memo[memo_key]
        return known
    best: PairOption | None = None
    if a.key.num_gpus == b.key.num_gpus and _runs(profile, a, gpu) and _runs(profile, b, gpu):
        for opt in profile._ix.options.get((gpu, a.key, b.key), ()):
            if not opt.feasible:
                continue
            if a.candidates and opt.a_strategy not in a.candidates:
                continue
            if b.candidates and opt.b_strategy not in b.candidates:
                continue
            if best is None or opt.total > best.total:
                best = opt
    profile._memo[memo_key] = best
    return best


@dataclass(frozen=True)
class PairMatrix:
    """Best packed pair for every (row class, column class) on one GPU type.

    ``total[i, j]`` is the best speed sum of a class-i job packed with a class-j job (NaN: no
    feasible measured pair); ``option[i, j]`` indexes ``options`` (-1: none), whose entries are
    oriented row job = ``a``. ``isolated[i]`` is class i's best speed alone.
    """

    gpu_type: str
    classes: tuple[JobClass, ...]
    total: np.ndarray
    option: np.ndarray
    options: tuple[PairOption, ...]
    isolated: np.ndarray
    isolated_strategy: tuple[str | None, ...]


def pair_matrix(profile: ThroughputProfile, classes: Sequence[JobClass], gpu_type: str) -> PairMatrix:
    """The matrix over ``classes``, cut from a per-GPU-type matrix over every class seen so far.

    The universe only grows: a class's row and column are computed once per profile, so a round
    whose classes differ from the last round's (common on traces with dozens of job types) costs a
    fancy-index, not a rebuild.
    """
    gpu = profile._gpu(gpu_type)
    return _cut(gpu, _universe(profile, gpu), classes, universe_rows(profile, classes, gpu))


def universe_rows(profile: ThroughputProfile, classes: Sequence[JobClass], gpu_type: str) -> np.ndarray:
    """Each class's row in the GPU type's universe (added when new): callers that number their
    classes themselves keep these and cut with ``pair_matrix_at``, without hashing a class again."""
    gpu = profile._gpu(gpu_type)
    universe = _universe(profile, gpu)
    universe.add(profile, gpu, classes)
    return np.array([universe.index[c] for c in classes], dtype=np.int64)


def pair_matrix_at(profile: ThroughputProfile, classes: Sequence[JobClass], gpu_type: str,
                   rows: np.ndarray) -> PairMatrix:
    """``pair_matrix(classes)`` where ``rows`` are the classes' ``universe_rows``."""
    gpu = profile._gpu(gpu_type)
    return _cut(gpu, _universe(profile, gpu), classes, rows)


def _universe(profile: ThroughputProfile, gpu: str) -> _Universe:
    universe: _Universe = profile._memo.setdefault(("universe", gpu), _Universe())
    return universe


def _cut(gpu: str, universe: _Universe, classes: Sequence[JobClass], ix: np.ndarray) -> PairMatrix:
    if universe.options_tuple is None or len(universe.options_tuple) != len(universe.options):
        universe.options_tuple = tuple(universe.options)  # options only grow: one tuple until they do
    return PairMatrix(gpu, tuple(classes), universe.total[np.ix_(ix, ix)], universe.option[np.ix_(ix, ix)],
                      universe.options_tuple, universe.isolated[ix],
                      tuple(map(universe.isolated_strategy.__getitem__, ix.tolist())))


class _Universe:
    """Mutable, private to ``pair_matrix``: every class of one GPU type seen so far, and its matrices."""

    def __init__(self) -> None:
        self.classes: list[JobClass] = []
        self.index: dict[JobClass, int] = {}
        self.total = np.zeros((0, 0))
        self.option = np.zeros((0, 0), dtype=np.int64)
        self.options: list[PairOption] = []
        self.seen: dict[PairOption, int] = {}
        self.isolated = np.zeros(0)
        self.isolated_strategy: list[str | None] = []
        self.options_tuple: tuple[PairOption, ...] | None = None

    def add(self, profile: ThroughputProfile, gpu: str, classes: Sequence[JobClass]) -> None:
        new = [c for c in dict.fromkeys(classes) if c not in self.index]
        if not new:
            return
        old_n = len(self.classes)
        for c in new:
            self.index[c] = len(self.classes)
            self.classes.append(c)
        n = len(self.classes)
        total = np.full((n, n), np.nan)
        option = np.full((n, n), -1, dtype=np.int64)
        total[:old_n, :old_n], option[:old_n, :old_n] = self.total, self.option
        for i in range(n):  # only the new rows and columns
            for j in range(old_n if i < old_n else 0, n):
                best = class_best_pair(profile, self.classes[i], self.classes[j], gpu)
                if best is not None:
                    total[i, j] = best.total
                    option[i, j] = self.seen.setdefault(best, len(self.options))
                    if option[i, j] == len(self.options):
                        self.options.append(best)
        iso = [class_isolated(profile, c, gpu) for c in new]
        self.total, self.option = total, option
        self.isolated = np.concatenate([self.isolated, np.array([s for s, _ in iso], dtype=float)])
        self.isolated_strategy += [s for _, s in iso]
