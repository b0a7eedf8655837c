"""ThroughputProfile: one immutable lookup over isolated and packed speeds, whatever the source.

The profile holds canonical records (built by ``build.build_profile`` from a loader's rows) and an
index derived from them. Key-level lookups (``isolated_speed``, ``pair_options`` ...) are strict:
anything the table did not measure is an ``InputError`` naming the key. Job-level lookups
(``best_isolated``, ``best_pair``, ``pair_matrix``; see ``classes.py``) are what the engine uses and
apply the documented fallbacks instead (docs/profiles.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..model import InputError, Job
from .classes import ClassTable, PairMatrix, build_table, class_best_pair, class_isolated, resolve_class
from .index import ProfileIndex, build_index
from .keys import (
    MPS,
    TIMESLICE,
    IsolatedRecord,
    JobClass,
    PairOption,
    PairRecord,
    ProfileKey,
    embedded_batch,
    fold,
    fold_strategy,
    normalize_batch,
)


@dataclass(frozen=True)
class ThroughputProfile:
    """Normalized isolated and packed speeds per GPU type; build one with a loader (``loaders.py``).

    ``isolated`` has one record per (GPU type, key, strategy); ``pairs`` one record per measured
    unordered co-location and way of sharing (MPS or time-sliced; lookups answer both orders).
    Equality compares the data, not the name.
    """

    name: str = field(compare=False)
    isolated: tuple[IsolatedRecord, ...]
    pairs: tuple[PairRecord, ...]
    datasets: Mapping[str, str] = field(default_factory=dict, compare=False)  # model -> CSV dataset column
    _ix: ProfileIndex = field(init=False, repr=False, compare=False)
    classes: ClassTable = field(init=False, repr=False, compare=False)  # built from the records, once

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ix", build_index(self.isolated, self.pairs, self.name))
        object.__setattr__(self, "classes", build_table(self))

    @cached_property
    def timeslice_classes(self) -> ClassTable:
        """The class table for pairs of two users' jobs (time-sliced), numbered as ``classes``; built
        when first asked for (single-user runs never do)."""
        return self.classes.alike(self, TIMESLICE)

    def class_table(self, sharing: str = MPS) -> ClassTable:
        return self.timeslice_classes if sharing == TIMESLICE else self.classes

    def timeslice_measured(self, a_key: ProfileKey, b_key: ProfileKey, gpu_type: str) -> bool:
        """Whether the pair was measured time-sliced (else its time-sliced speeds are the fallback)."""
        a, g = self._measured(a_key, gpu_type)
        b, _ = self._measured(b_key, gpu_type)
        return (g, a, b) in self._ix.timeslice_measured

    # ---- what the profile knows -------------------------------------------------------------
    @property
    def gpu_types(self) -> tuple[str, ...]:
        return self._ix.gpu_types

    @property
    def index(self) -> ProfileIndex:
        """The dictionaries derived from the records (``index.py``), which the class tables read."""
        return self._ix

    def models(self) -> tuple[str, ...]:
        return self._ix.model_order

    def keys(self, gpu_type: str) -> tuple[ProfileKey, ...]:
        g = self._gpu(gpu_type)
        return tuple(k for (gt, k) in self._ix.runs if gt == g)

    def measured(self, key: ProfileKey) -> bool:
        """Whether any GPU type measured the canonical ``key`` (else its jobs never pack)."""
        return any((g, key) in self._ix.runs for g in self._ix.gpu_types)

    def is_strategied(self, model: str) -> bool:
        return self._model(model) in self._ix.strategied

    # ---- key resolution ----------------------------------------------------------------------
    def key(self, model: str, batch_size: str = "", num_gpus: int = 1) -> ProfileKey:
        """Canonical key for a model/batch as a user wrote them; the GPU count is not checked here.

        LLMs (models with strategies) have one batch per GPU count: the job's batch is ignored.
        Gavel job types carry their batch in the name ("ResNet-50 (batch size 64)"); the family plus
        a batch ("ResNet-50", "64") resolves to the same job type.
        """
        batch = normalize_batch(batch_size)
        canon = self._ix.models.get(fold(model))
        if canon is None and batch:
            canon = self._ix.models.get(fold(f"{model} (batch size {batch})"))
        if canon is None:
            raise InputError(f"unknown model {model!r} in profile {self.name}; known models: "
                             f"{', '.join(self._ix.model_order)}")
        emb = embedded_batch(canon)
        if emb is not None:
            if batch and batch != emb:
                raise InputError(f"batch size {batch_size!r} contradicts {canon!r} in profile {self.name}")
            return ProfileKey(canon, emb, num_gpus)
        if canon in self._ix.strategied:
            fixed = self._ix.fixed_batch.get((canon, num_gpus))
            if fixed is None:  # unmeasured GPU count: any of the model's batches stands for it
                fixed = self._ix.batches[canon][0]
            return ProfileKey(canon, fixed, num_gpus)
        known = self._ix.batches[canon]
        if known == ("",):
            return ProfileKey(canon, "", num_gpus)
        if batch not in known:
            raise InputError(f"unknown batch size {batch_size!r} for {canon} in profile {self.name}; "
                             f"known: {', '.join(known)}")
        return ProfileKey(canon, batch, num_gpus)

    def _model(self, model: str) -> str:
        canon = self._ix.models.get(fold(model))
        if canon is None:
            raise InputError(f"unknown model {model!r} in profile {self.name}; known models: "
                             f"{', '.join(self._ix.model_order)}")
        return canon

    def _gpu(self, gpu_type: str) -> str:
        g = gpu_type.strip().lower()
        if g not in self._ix.gpu_types:
            raise InputError(f"unknown GPU type {gpu_type!r} for profile {self.name}; known: "
                             f"{', '.join(self._ix.gpu_types)}")
        return g

    def _measured(self, key: ProfileKey, gpu_type: str) -> tuple[ProfileKey, str]:
        """Canonical (key, GPU type) that the table measured, else InputError naming the key."""
        g = self._gpu(gpu_type)
        k = self.key(key.model, key.batch_size, key.num_gpus)
        if (g, k) not in self._ix.runs:
            counts = self._ix.gpu_counts.get(k.model, ())
            raise InputError(
                f"unknown profile key {(key.model, key.batch_size, key.num_gpus)!r} on {g} in profile "
                f"{self.name}; {k.model} measured on {', '.join(map(str, counts))} GPUs with batch "
                f"{', '.join(self._ix.batches[k.model])}; known models: {', '.join(self._ix.model_order)}")
        return k, g

    # ---- strict key-level lookups ------------------------------------------------------------
    def strategies(self, model: str, num_gpus: int, gpu_type: str | None = None) -> tuple[str, ...]:
        """Parallelism strategies measured for ``model`` on ``num_gpus`` (empty: none / unmeasured)."""
        canon = self._model(model)
        if gpu_type is None or canon not in self._ix.strategied:
            return self._ix.strategies.get((canon, num_gpus), ())
        runs = self._ix.runs.get((self._gpu(gpu_type), self.key(canon, "", num_gpus)), ())
        return tuple(s for s, _ in runs if s is not None)

    def isolated_speed(self, key: ProfileKey, gpu_type: str, strategy: str | None = None) -> float:
        """Normalized speed alone: under ``strategy``, or under the best one when it is ``None``."""
        k, g = self._measured(key, gpu_type)
        runs = self._ix.runs[(g, k)]
        if strategy is None:
            return max(speed for _, speed in runs)
        want = fold_strategy(strategy)
        for s, speed in runs:
            if s is not None and fold_strategy(s) == want:
                return speed
        known = [s for s, _ in runs if s is not None]
        raise InputError(f"unknown strategy {strategy!r} for {k} on {g} in profile {self.name}; known: "
                         f"{', '.join(known) if known else 'none (model has no strategies)'}")

    def isolated_throughput(self, key: ProfileKey, gpu_type: str) -> float | None:
        """Absolute steps/s alone where the source measured it (Gavel); ``None`` otherwise (A100)."""
        k, g = self._measured(key, gpu_type)
        return self._ix.throughput.get((g, k))

    def pair_options(self, a_key: ProfileKey, b_key: ProfileKey, gpu_type: str,
                     sharing: str = MPS) -> tuple[PairOption, ...]:
        """Every measured strategy combination of ``a`` packed with ``b``, infeasible ones included,
        under MPS or time-sliced (``sharing``; time-sliced pairs nobody measured get the fallback of
        ``index.timeslice_fallback``).

        Symmetric: ``pair_options(b, a)`` holds the same options swapped. Empty when the pair was never
        measured (e.g. two LLMs), which the engine treats as "not packable".
        """
        a, g = self._measured(a_key, gpu_type)
        b, _ = self._measured(b_key, gpu_type)
        return self._ix.pair_table(sharing).get((g, a, b), ())

    # ---- job-level lookups used by the engine (fallbacks; see classes.py) ----------------------
    def job_class(self, job: Job) -> JobClass:
        n = self.classes.spelled.get(job.class_key)
        return self.classes.classes[n] if n is not None else resolve_class(self, job)

    def best_isolated(self, job: Job, gpu_type: str) -> tuple[float, str | None]:
        g = self._gpu(gpu_type)
        table = self.classes
        n = table.spelled.get(job.class_key)
        if n is None:
            return (1.0, None) if table.unmeasured(job) else class_isolated(self, resolve_class(self, job), g)
        t = table.gpu_types.index(g)
        return float(table.isolated[t, n]), table.isolated_strategy[t][n]

    def best_isolated_many(self, jobs: Sequence[Job], gpu_types: Sequence[str]) -> list[tuple[float, str | None]]:
        """``best_isolated`` of each job on the matching GPU type (the engine asks for every placed
        job every round): one table read for the jobs spelled as the profile spells them."""
        table = self.classes
        found = list(map(table.spelled.get, [j.class_key for j in jobs]))
        nums = [0 if n is None else n for n in found]  # a miss is looked up below
        type_of = {g: table.gpu_types.index(self._gpu(g)) for g in dict.fromkeys(gpu_types)}
        t = np.fromiter(map(type_of.__getitem__, gpu_types), np.int64, len(jobs))
        speeds = table.isolated[t, np.array(nums, dtype=np.int64)].tolist()
        if len(type_of) == 1:
            strategies = list(map(table.isolated_strategy[int(t[0])].__getitem__, nums)) if len(jobs) else []
        else:
            strategies = [table.isolated_strategy[ti][n] for ti, n in zip(t.tolist(), nums)]
        out = list(zip(speeds, strategies))
        if None in found:
            for i, n in enumerate(found):
                if n is None:
                    out[i] = self.best_isolated(jobs[i], gpu_types[i])
        return out

    def best_pair(self, a: Job, b: Job, gpu_type: str, sharing: str = MPS) -> PairOption | None:
        if a.num_gpus != b.num_gpus:
            return None
        return class_best_pair(self, self.job_class(a), self.job_class(b), self._gpu(gpu_type), sharing)

    def pair_matrix(self, classes: Sequence[JobClass], gpu_type: str) -> PairMatrix:
        return self.classes.with_extra(self, classes).cut(self._gpu(gpu_type), classes)

    # ---- derived profiles ----------------------------------------------------------------------
    def with_noise(self, noise: float, rng: np.random.Generator) -> ThroughputProfile:
        """The paper's sensitivity study: every measured speed times a factor from U[1-n, 1+n].

        Pair speeds and the per-strategy isolated speeds of LLMs are measurements and get a factor
        each; the isolated 1.0 of other jobs is the normalization itself and stays. 0.0 stays 0.0.
        """
        if not 0.0 <= noise <= 1.0:
            raise InputError(f"profile noise must be in [0, 1], got {noise}")
        f = rng.uniform(1.0 - noise, 1.0 + noise, size=(len(self.pairs), 2))
        pairs = tuple(replace(p, option=replace(p.option, a_speed=p.option.a_speed * float(f[i, 0]),
                                                 b_speed=p.option.b_speed * float(f[i, 1])))
                      for i, p in enumerate(self.pairs))
        g = rng.uniform(1.0 - noise, 1.0 + noise, size=len(self.isolated))
        iso = tuple(replace(r, speed=r.speed * float(g[i])) if r.strategy is not None else r
                    for i, r in enumerate(self.isolated))
        return ThroughputProfile(f"{self.name}+noise{noise:g}", iso, pairs, dict(self.datasets))
