"""Which parallelism strategies LLM jobs may use: the paper's parallelism-choice study (section 7.1).

* ``best`` -- Tesserae-T: the engine picks the best strategy per pair from every candidate the
  profile has (the default everywhere else).
* ``dp`` -- Tesserae-T (DP): packed LLM jobs run data parallel (``DP<layers>``).
* ``default-pp`` -- Tesserae-T (Default PP): packed LLM jobs run Megatron-LM's default pipeline,
  the even split of the layers over the GPUs (``12,12`` on 2 GPUs, ``6,6,6,6`` on 4 for 24 layers;
  Megatron needs the layer count divisible by the stage count).
* ``default-pp-always`` -- a user who submits with the Megatron default and never lets the scheduler
  change it: the job runs the even split alone as well as packed (``Job.parallelism``).

The paper restricts the strategy of *packed* jobs, so ``dp`` and ``default-pp`` leave a job alone
with its best isolated strategy (DP in the A100 table) and only drop the other pair options from
the profile the scheduler decides with. A model/GPU count without the wanted strategy is not packed.
"""

from __future__ import annotations

import logging

from ..model import InputError
from ..model.strategy import Kind, Strategy, parse_strategy
from ..profiles import ThroughputProfile

log = logging.getLogger(__name__)

LLM_STRATEGIES: tuple[str, ...] = ("best", "dp", "default-pp", "default-pp-always")


def check_mode(mode: str) -> None:
    if mode not in LLM_STRATEGIES:
        raise InputError(f"unknown LLM strategy mode {mode!r}; known: {', '.join(LLM_STRATEGIES)}")


def _meaning(label: str) -> Strategy | None:
    """What a profile's strategy label means; None for a label that is no strategy (profiles take any)."""
    try:
        return parse_strategy(label)
    except InputError:
        return None


def even_split(strategies: tuple[str, ...], num_gpus: int) -> str | None:
    """Megatron's default pipeline among ``strategies``: ``num_gpus`` equal stages."""
    for s in strategies:
        st = _meaning(s)
        if st is not None and st.kind is Kind.PIPELINE and len(st.stages) == num_gpus and len(set(st.stages)) == 1:
            return s
    return None


def data_parallel(strategies: tuple[str, ...]) -> str | None:
    """The data-parallel strategy (``DP<layers>``) among ``strategies``."""
    return next((s for s in strategies if (st := _meaning(s)) is not None and st.kind is Kind.DATA), None)


def chosen(profile: ThroughputProfile, model: str, num_gpus: int, mode: str) -> str | None:
    """The one strategy ``mode`` allows for (model, GPU count); None: every candidate (``best``) or
    a model without strategies."""
    strategies = profile.strategies(model, num_gpus)
    if mode == "best" or not strategies:
        return None
    return data_parallel(strategies) if mode == "dp" else even_split(strategies, num_gpus)


def restrict_packed(profile: ThroughputProfile, mode: str) -> ThroughputProfile:
    """``profile`` with the pair options of LLM sides limited to the mode's strategy (``dp``,
    ``default-pp``); isolated runs untouched. Other modes return ``profile`` itself."""
    check_mode(mode)
    if mode not in ("dp", "default-pp"):
        return profile
    keep = []
    missing: set[tuple[str, int]] = set()
    for p in profile.pairs:
        ok = True
        for key, strat in ((p.a, p.option.a_strategy), (p.b, p.option.b_strategy)):
            if strat is None:
                continue
            want = chosen(profile, key.model, key.num_gpus, mode)
            if want is None:
                missing.add((key.model, key.num_gpus))
            ok = ok and strat == want
        if ok:
            keep.append(p)
    for model, n in sorted(missing):
        log.warning("%s on %d GPUs has no %s strategy in profile %s: it is never packed", model, n, mode, profile.name)
    return ThroughputProfile(f"{profile.name}+{mode}", profile.isolated, tuple(keep), dict(profile.datasets))


def job_parallelism(profile: ThroughputProfile, model: str, batch_size: str, num_gpus: int,
                    mode: str) -> tuple[str, ...]:
    """``Job.parallelism`` for ``default-pp-always`` (the even split); empty otherwise."""
    if mode != "default-pp-always" or not profile.is_strategied(model):
        return ()
    key = profile.key(model, batch_size, num_gpus)
    s = even_split(profile.strategies(key.model, key.num_gpus), num_gpus)
    return (s,) if s is not None else ()
