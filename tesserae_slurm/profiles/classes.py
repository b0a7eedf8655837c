"""Job-level lookups for the engine: profile classes, fallbacks, and the class tables.

Thousands of jobs share a handful of (model, batch, GPU count, allowed strategies) combinations, so
the packing stage maps every job to a ``JobClass`` and reads its edges from a small class x class
matrix instead of looking up each job pair. ``ClassTable`` holds those matrices for every class a
profile can name without a job's help -- each measured key, unrestricted or restricted to one of
its strategies -- and is built once with the profile. Jobs outside it (a list of several
strategies, an unmeasured GPU count) are looked up when asked, and ``ClassTable.with_extra`` gives
a table that holds them too for one packing call.

Fallbacks (documented in docs/profiles.md): a job of a known model on a GPU count or GPU type the
table did not measure runs alone at 1.0 -- its best isolated throughput, by the definition of
normalization -- under its first requested strategy (or none), and is never packed. A pair of
measured keys that the table never co-located (two LLMs) is not packable either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from ..model import InputError, Job
from .index import ProfileIndex
from .keys import MPS, JobClass, PairOption, ProfileKey, embedded_batch, fold_strategy


class IndexedProfile(Protocol):
    """What the class tables read of a profile; ``table.ThroughputProfile`` is the one implementation,
    which builds its class table from itself (a Protocol, so neither module imports the other)."""

    @property
    def name(self) -> str: ...
    @property
    def index(self) -> ProfileIndex: ...
    @property
    def gpu_types(self) -> tuple[str, ...]: ...
    def key(self, model: str, batch_size: str = "", num_gpus: int = 1) -> ProfileKey: ...
    def is_strategied(self, model: str) -> bool: ...
    def strategies(self, model: str, num_gpus: int, gpu_type: str | None = None) -> tuple[str, ...]: ...
    def measured(self, key: ProfileKey) -> bool: ...

RESOLUTION = 1e-6  # a packing gain below this is no gain (float noise, not throughput)


def resolve_class(profile: IndexedProfile, job: Job) -> JobClass:
    """The job's class: its canonical key and its strategy restriction (InputError if unknown)."""
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
    return JobClass(key, candidates)


def _runs(profile: IndexedProfile, cls: JobClass, gpu: str) -> tuple[tuple[str | None, float], ...]:
    """Isolated (strategy, speed) the class may use on ``gpu``; empty = unmeasured (fallback)."""
    runs = profile.index.runs.get((gpu, cls.key), ())
    if cls.candidates:
        runs = tuple(r for r in runs if r[0] in cls.candidates)
    return runs


def class_isolated(profile: IndexedProfile, cls: JobClass, gpu: str) -> tuple[float, str | None]:
    """(best normalized speed alone, its strategy) on canonical GPU type ``gpu``; ties go to the
    strategy listed first."""
    runs = _runs(profile, cls, gpu)
    if not runs:
        return 1.0, (cls.candidates[0] if cls.candidates else None)
    best = max(range(len(runs)), key=lambda i: (runs[i][1], -i))
    return runs[best][1], runs[best][0]


def class_best_pair(profile: IndexedProfile, a: JobClass, b: JobClass, gpu: str,
                    sharing: str = MPS) -> PairOption | None:
    """Feasible option with the largest speed sum the two classes may use on canonical GPU type
    ``gpu``, sharing it as ``sharing`` says (MPS or time-sliced); ties: first listed."""
    best: PairOption | None = None
    if a.key.num_gpus == b.key.num_gpus and _runs(profile, a, gpu) and _runs(profile, b, gpu):
        for opt in profile.index.pair_table(sharing).get((gpu, a.key, b.key), ()):
            if not opt.feasible:
                continue
            if a.candidates and opt.a_strategy not in a.candidates:
                continue
            if b.candidates and opt.b_strategy not in b.candidates:
                continue
            if best is None or opt.total > best.total:
                best = opt
    return best


def _sort_key(cls: JobClass) -> tuple[str, str, int, tuple[str, ...]]:
    return cls.key.model, cls.key.batch_size, cls.key.num_gpus, cls.candidates


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


@dataclass(frozen=True)
class ClassTable:
    """Classes numbered in canonical order (model, batch, GPUs, strategies), and per GPU type of
    the profile (``gpu_types`` order) their best pairs, speeds alone and packing edges, for pairs
    that share GPUs as ``sharing`` says (a profile has one table per way; both number the classes
    alike).

    ``total[t, i, j]``/``option[t, i, j]``: as ``PairMatrix`` on type t. ``gain[t, i, j]``: what
    packing a class-j job onto a placed class-i job adds to throughput, where it adds more than
    ``RESOLUTION``, else 0; ``weight`` is the pair's speed sum on the same edges (Algorithm 3 as
    written). ``spelled``: ``Job.class_key`` -> number for the spellings the profile itself uses
    (canonical names and batches), so most jobs find their class with one dict lookup.
    ``counts``: for each (model, batch) so spelled, the GPU counts at which it names a measured
    key; at any other count such a job is the unmeasured fallback (see ``unmeasured``).
    """

    gpu_types: tuple[str, ...]
    classes: tuple[JobClass, ...]
    number: Mapping[JobClass, int]
    spelled: Mapping[str, int]
    counts: Mapping[tuple[str, str], frozenset[int]]
    total: np.ndarray
    option: np.ndarray
    options: tuple[PairOption, ...]
    isolated: np.ndarray
    isolated_strategy: tuple[tuple[str | None, ...], ...]
    gain: np.ndarray
    weight: np.ndarray
    sharing: str = MPS

    @cached_property
    def slowest(self) -> np.ndarray:
        """``slowest[t, i, j]``: the lower of the two normalized speeds in the pair ``option[t, i, j]``
        (the member the pair slows most; 0 where there is no option). Computed once per table; what
        ``packing.min_speed`` compares against."""
        speeds = np.array([min(o.a_speed, o.b_speed) for o in self.options] + [0.0], dtype=float)
        out: np.ndarray = speeds[self.option]  # option -1 picks the trailing 0.0
        out.setflags(write=False)
        return out

    def unmeasured(self, job: Job) -> bool:
        """True if the job, spelled as the profile spells its model and batch and listing no
        strategies, is on a GPU count no GPU type measured: it runs alone at 1.0 and never packs.
        False also when unsure (``resolve_class`` tells)."""
        known = self.counts.get((job.model, job.batch_size))
        return known is not None and not job.parallelism and job.num_gpus not in known

    def cut(self, gpu_type: str, classes: Sequence[JobClass]) -> PairMatrix:
        """The matrix over ``classes`` (all in the table) on one of its GPU types."""
        t = self.gpu_types.index(gpu_type)
        ix = np.array([self.number[c] for c in classes], dtype=np.int64)
        return PairMatrix(gpu_type, tuple(classes), self.total[t][np.ix_(ix, ix)], self.option[t][np.ix_(ix, ix)],
                          self.options, self.isolated[t, ix], tuple(self.isolated_strategy[t][i] for i in ix.tolist()))

    def with_extra(self, profile: IndexedProfile, extra: Sequence[JobClass]) -> ClassTable:
        """This table plus ``extra`` classes, renumbered in canonical order (computed per call)."""
        new = [c for c in dict.fromkeys(extra) if c not in self.number]
        if not new:
            return self
        return _table(profile, sorted((*self.classes, *new), key=_sort_key), self, self.sharing)

    def alike(self, profile: IndexedProfile, sharing: str) -> ClassTable:
        """The table over the same classes, numbered alike, for pairs sharing GPUs as ``sharing`` says."""
        if sharing == self.sharing:
            return self
        return _table(profile, list(self.classes), None, sharing, self)


def build_table(profile: IndexedProfile) -> ClassTable:
    """Every measured key's classes: unrestricted, and for keys with several strategies one class
    per strategy (what ``default-pp-always`` and single-strategy jobs use); pairs under MPS."""
    keys = sorted({k for (_, k) in profile.index.runs}, key=lambda k: (k.model, k.batch_size, k.num_gpus))
    classes: list[JobClass] = []
    for k in keys:
        classes.append(JobClass(k))
        known = profile.index.strategies.get((k.model, k.num_gpus), ())
        if len(known) > 1:
            classes += [JobClass(k, (s,)) for s in known]
    return _table(profile, sorted(classes, key=_sort_key), None)


def _table(profile: IndexedProfile, classes: list[JobClass], known: ClassTable | None, sharing: str = MPS,
           spelled_as: ClassTable | None = None) -> ClassTable:
    """The table over ``classes``; entries of classes in ``known`` (a table of the same sharing) are
    copied from it; ``spelled_as``: a table over the same classes whose spellings hold here too."""
    gpus, n = profile.gpu_types, len(classes)
    number = {c: i for i, c in enumerate(classes)}
    total = np.full((len(gpus), n, n), np.nan)
    option = np.full((len(gpus), n, n), -1, dtype=np.int64)
    isolated = np.ones((len(gpus), n))
    strategy: list[list[str | None]] = [[None] * n for _ in gpus]
    options: list[PairOption] = list(known.options) if known is not None else []
    seen = {opt: i for i, opt in enumerate(options)}
    old = np.array([-1 if known is None else known.number.get(c, -1) for c in classes], dtype=np.int64)
    at = np.flatnonzero(old >= 0)
    if known is not None:
        types = np.arange(len(gpus))
        total[np.ix_(types, at, at)] = known.total[np.ix_(types, old[at], old[at])]
        option[np.ix_(types, at, at)] = known.option[np.ix_(types, old[at], old[at])]
        isolated[:, at] = known.isolated[:, old[at]]
        for t in range(len(gpus)):
            for i in at.tolist():
                strategy[t][i] = known.isolated_strategy[t][old[i]]
    # a class whose key no GPU type measured never packs: no pair to look up
    measured = [i for i, c in enumerate(classes) if any((g, c.key) in profile.index.runs for g in gpus)]
    fresh = [i for i in measured if old[i] < 0]
    for t, gpu in enumerate(gpus):
        for i in measured:
            for j in (measured if old[i] < 0 else fresh):
                best = class_best_pair(profile, classes[i], classes[j], gpu, sharing)
                if best is not None:
                    total[t, i, j] = best.total
                    option[t, i, j] = seen.setdefault(best, len(options))
                    if option[t, i, j] == len(options):
                        options.append(best)
        for i in np.flatnonzero(old < 0).tolist():
            isolated[t, i], strategy[t][i] = class_isolated(profile, classes[i], gpu)
    gain = total - isolated[:, :, None]  # NaN: never measured
    edge = gain > RESOLUTION  # False for NaN
    counts: Mapping[tuple[str, str], frozenset[int]]
    if spelled_as is not None:
        spelled, counts = dict(spelled_as.spelled), spelled_as.counts
    elif known is None:
        spelled, counts = _spellings(profile, classes)
    else:
        counts = known.counts
        renumber = np.empty(len(known.classes), dtype=np.int64)
        renumber[old[at]] = at
        spelled = dict(zip(known.spelled, renumber[list(known.spelled.values())].tolist()))
    arrays = (total, option, isolated, np.where(edge, gain, 0.0), np.where(edge, total, 0.0))
    for a in arrays:
        a.setflags(write=False)  # the table is shared by every caller of the profile
    return ClassTable(gpus, tuple(classes), number, spelled, counts, *arrays[:2], tuple(options), arrays[2],
                      tuple(map(tuple, strategy)), *arrays[3:], sharing)


def _spellings(profile: IndexedProfile, classes: Sequence[JobClass]
               ) -> tuple[dict[str, int], dict[tuple[str, str], frozenset[int]]]:
    """``Job.class_key`` of the ways a trace or user names each class with the profile's own
    spelling -- the canonical model (or its family plus the batch, for Gavel's job types), the
    measured batch or none, and the class's strategy -- each checked to resolve to its class; and
    for each (model, batch) so spelled, the GPU counts at which it names a measured key (a count
    no key has is unmeasured for every spelling)."""
    spelled: dict[str, int] = {}
    pairs: set[tuple[str, str]] = set()
    for i, cls in enumerate(classes):
        k = cls.key
        models = [k.model]
        if embedded_batch(k.model) is not None:
            models.append(k.model[:k.model.rfind(" (batch size")])
        for model in models:
            for batch in dict.fromkeys((k.batch_size, "")):
                job = Job("class", k.num_gpus, model, batch, parallelism=cls.candidates)
                try:
                    if resolve_class(profile, job) == cls:
                        spelled.setdefault(job.class_key, i)
                        pairs.add((model, batch))
                except InputError:
                    continue
    all_counts = sorted({c.key.num_gpus for c in classes})
    counts = {(m, b): frozenset(n for n in all_counts
                                if profile.measured(resolve_class(profile, Job("class", n, m, b)).key))
              for m, b in pairs}
    return spelled, counts
