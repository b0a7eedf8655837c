"""The dictionaries a profile derives from its records (``build_index``), checked as they are built.

Its own module so that the class tables (``classes.py``) and the profile (``table.py``) both read it
without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import InputError
from .keys import MPS, TIMESLICE, TIMESLICE_SHARE, IsolatedRecord, PairOption, PairRecord, ProfileKey, fold

OptionMap = dict[tuple[str, ProfileKey, ProfileKey], tuple[PairOption, ...]]  # (GPU type, a, b): both orientations


@dataclass(frozen=True)
class ProfileIndex:
    """Dictionaries derived from the records; rebuilt whenever a profile is constructed."""

    gpu_types: tuple[str, ...]
    models: dict[str, str]  # fold(name) -> canonical name
    model_order: tuple[str, ...]
    batches: dict[str, tuple[str, ...]]  # model -> measured batches (any GPU count / type)
    fixed_batch: dict[tuple[str, int], str]  # (strategied model, gpus) -> its one batch
    strategied: frozenset[str]
    runs: dict[tuple[str, ProfileKey], tuple[tuple[str | None, float], ...]]  # isolated, by strategy
    throughput: dict[tuple[str, ProfileKey], float]
    strategies: dict[tuple[str, int], tuple[str, ...]]  # (model, gpus) -> strategies, any GPU type
    options: OptionMap  # packed under MPS
    gpu_counts: dict[str, tuple[int, ...]]
    # time-sliced: the measured pairs, and for every other MPS pair the fallback (``timeslice_fallback``)
    timeslice_options: OptionMap
    timeslice_measured: frozenset[tuple[str, ProfileKey, ProfileKey]]

    def pair_table(self, sharing: str) -> OptionMap:
        return self.timeslice_options if sharing == TIMESLICE else self.options


def timeslice_fallback(option: PairOption, a_alone: float, b_alone: float,
                       share: float = TIMESLICE_SHARE) -> PairOption:
    """A time-sliced pair nobody measured: each job gets ``share`` of its speed alone under the
    strategy it has in the MPS option; what did not fit in memory under MPS does not fit either
    (time-slicing keeps both jobs' memory on the GPU)."""
    if not option.feasible:
        return PairOption(option.a_strategy, option.b_strategy, 0.0, 0.0)
    return PairOption(option.a_strategy, option.b_strategy, a_alone * share, b_alone * share)


def build_index(isolated: Sequence[IsolatedRecord], pairs: Sequence[PairRecord], name: str) -> ProfileIndex:
    models: dict[str, str] = {}
    batches: dict[str, list[str]] = {}
    runs: dict[tuple[str, ProfileKey], list[tuple[str | None, float]]] = {}
    throughput: dict[tuple[str, ProfileKey], float] = {}
    strategies: dict[tuple[str, int], list[str]] = {}
    fixed: dict[tuple[str, int], str] = {}
    strategied: set[str] = set()
    counts: dict[str, set[int]] = {}
    gpus: list[str] = []
    for r in isolated:
        k = r.key
        models.setdefault(fold(k.model), k.model)
        if r.gpu_type not in gpus:
            gpus.append(r.gpu_type)
        bl = batches.setdefault(k.model, [])
        if k.batch_size not in bl:
            bl.append(k.batch_size)
        counts.setdefault(k.model, set()).add(k.num_gpus)
        rl = runs.setdefault((r.gpu_type, k), [])
        if any(s == r.strategy for s, _ in rl):
            raise InputError(
                f"profile {name}: duplicate isolated entry for {k} strategy {r.strategy!r} on {r.gpu_type}")
        rl.append((r.strategy, r.speed))
        if r.throughput is not None:
            throughput.setdefault((r.gpu_type, k), r.throughput)
        if r.strategy is not None:
            strategied.add(k.model)
            if fixed.setdefault((k.model, k.num_gpus), k.batch_size) != k.batch_size:
                raise InputError(f"profile {name}: {k.model} on {k.num_gpus} GPUs has two batch sizes "
                                 f"({fixed[(k.model, k.num_gpus)]!r}, {k.batch_size!r}); an LLM has one")
            sl = strategies.setdefault((k.model, k.num_gpus), [])
            if r.strategy not in sl:
                sl.append(r.strategy)
    mixed = sorted({r.key.model for r in isolated if r.strategy is None} & strategied)
    if mixed:
        raise InputError(f"profile {name}: {mixed[0]} has entries with and without a parallelism strategy")
    by_sharing: dict[str, dict[tuple[str, ProfileKey, ProfileKey], list[PairOption]]] = {MPS: {}, TIMESLICE: {}}
    for p in pairs:
        for side, key, strat in (("a", p.a, p.option.a_strategy), ("b", p.b, p.option.b_strategy)):
            known = runs.get((p.gpu_type, key))
            if known is None or all(s != strat for s, _ in known):
                raise InputError(f"profile {name}: pair side {side} {key} strategy {strat!r} on {p.gpu_type} "
                                 "has no isolated entry")
        options = by_sharing[p.sharing]
        options.setdefault((p.gpu_type, p.a, p.b), []).append(p.option)
        mirror = p.option.swapped()
        if p.a != p.b or mirror != p.option:
            options.setdefault((p.gpu_type, p.b, p.a), []).append(mirror)
    frozen = {k: {key: tuple(v) for key, v in opts.items()} for k, opts in by_sharing.items()}
    measured = frozenset(frozen[TIMESLICE])
    sliced = dict(frozen[TIMESLICE])
    alone = {key: dict(v) for key, v in runs.items()}
    for (g, a, b), opts in frozen[MPS].items():
        if (g, a, b) not in sliced:
            sliced[(g, a, b)] = tuple(timeslice_fallback(o, alone[(g, a)][o.a_strategy], alone[(g, b)][o.b_strategy])
                                      for o in opts)
    return ProfileIndex(
        gpu_types=tuple(gpus), models=models, model_order=tuple(models.values()),
        batches={m: tuple(b) for m, b in batches.items()}, fixed_batch=fixed, strategied=frozenset(strategied),
        runs={k: tuple(v) for k, v in runs.items()}, throughput=throughput,
        strategies={k: tuple(v) for k, v in strategies.items()},
        options=frozen[MPS],
        gpu_counts={m: tuple(sorted(c)) for m, c in counts.items()},
        timeslice_options=sliced, timeslice_measured=measured,
    )
