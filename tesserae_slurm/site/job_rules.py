"""The rules a job's metadata (the ``Comment`` tsbatch writes, ``model/meta.py``) must keep on this site:
a power-of-two GPU count that fits the partition, a model and batch the profile knows, parallelism
strategies Megatron can run. tsbatch refuses a submission that breaks them; the daemon leaves a job
that breaks them unscheduled, with the reason, since a Comment can be written by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..harness.megatron import megatron_parallelism
from ..model import InputError
from ..model.meta import UNPROFILED, JobMeta
from ..model.strategy import parse_strategy
from ..profiles import ThroughputProfile
from ..profiles.keys import embedded_batch, fold, normalize_batch
from .partition import PartitionShape


@dataclass(frozen=True)
class ProfiledModel:
    """A model as a user names it to tsbatch, with the batch sizes and GPU counts the profile measured."""

    model: str  # the family name for job types that carry their batch in the name ("ResNet-50")
    batches: tuple[str, ...]  # () for a model the profile measured without a batch size
    gpu_counts: tuple[int, ...]
    fixed_batch: bool  # an LLM: one batch per GPU count, taken from the profile (--batch-size not needed)


def profiled_models(profile: ThroughputProfile) -> tuple[ProfiledModel, ...]:
    """What `tsbatch --list-models` prints and a missing --batch-size is checked against."""
    ix = profile.index
    out: dict[str, ProfiledModel] = {}
    for m in profile.models():
        if m == UNPROFILED:
            continue
        emb = embedded_batch(m)
        name = m[:m.index("(")].strip() if emb is not None else m
        batches = tuple(b for b in ix.batches.get(m, ()) if b)
        counts = ix.gpu_counts.get(m, ())
        seen = out.get(name)
        if seen is not None:
            batches = seen.batches + tuple(b for b in batches if b not in seen.batches)
            counts = tuple(sorted(set(seen.gpu_counts) | set(counts)))
        out[name] = ProfiledModel(name, batches, counts, m in ix.strategied)
    return tuple(out.values())


def describe_batch(batch: str) -> str:
    """``512/8`` as a user reads it: a global batch run in micro-batches."""
    whole, _, micro = batch.partition("/")
    return f"a global batch of {whole} in micro-batches of {micro}" if micro else f"batch size {batch}"
@cache
def _known_models(models: tuple[str, ...]) -> tuple[list[str], frozenset[str]]:
    """The profile's models and their folded names: the daemon checks every queued job each round."""
    known = [m for m in models if m != UNPROFILED]
    return known, frozenset(fold(m) for m in known)


def check_meta(meta: JobMeta, shape: PartitionShape, profile: ThroughputProfile) -> None:
    """The rules a job's metadata keeps, in one place: tsbatch applies them before submitting and the
    daemon to every job's Comment every round (a hand-written Comment gets no other check). Errors
    name tsbatch's options, which is where a user fixes them."""
    n = meta.num_gpus
    if n <= 0 or n & (n - 1):
        raise InputError(f"--gpus {n}: the GPU count must be a power of two (1, 2, 4, 8, ...)")
    if not shape.node_gpus:
        raise InputError("the managed partition has no schedulable nodes with GPUs")
    node = shape.largest_node
    if n > node and n % node:
        raise InputError(f"--gpus {n}: a job larger than one node ({node} GPUs) must use whole nodes")
    if n > shape.capacity:
        raise InputError(f"--gpus {n}: the managed partition has at most {shape.capacity} GPUs of one type")
    if meta.no_profile:
        if meta.batch_size or meta.parallelism:
            raise InputError("--no-profile runs the job without a throughput profile: drop --model, "
                             "--batch-size and --parallelism")
        return
    known, folded = _known_models(profile.models())
    model, batch = meta.model, meta.batch_size
    if fold(model) not in folded and not any(m.startswith(fold(model) + "(batchsize") for m in folded):
        raise InputError(f"unknown model {model!r} in profile {profile.name} (known: {', '.join(known)}); "
                         "use --no-profile for a job without a throughput profile")
    if any(not s for s in meta.parallelism):
        raise InputError(f"--parallelism {';'.join(meta.parallelism)!r}: expected strategies separated by ';', "
                         "e.g. \"10,14;TP24\"")
    for s in meta.parallelism:
        megatron_parallelism(parse_strategy(s), n)  # stages must divide the GPUs, Megatron must express the split
    if not batch:
        entry = next((e for e in profiled_models(profile) if fold(e.model) == fold(model)), None)
        if entry is not None and entry.batches and not entry.fixed_batch:
            raise InputError(f"--model {model} needs --batch-size: profile {profile.name} has {entry.model} with "
                             f"batch sizes {', '.join(entry.batches)} (tsbatch --list-models lists every model)")
    key = profile.key(model, batch, n)  # unknown batch of an ordinary model: the profile's own message
    if batch and profile.is_strategied(key.model) and normalize_batch(batch) not in (
            key.batch_size, key.batch_size.split("/")[0]):
        raise InputError(f"--batch-size {batch}: profile {profile.name} fixes {key.model}'s batch by GPU count; on "
                         f"{n} GPU(s) it runs {describe_batch(key.batch_size)} ({key.batch_size}): omit "
                         "--batch-size or use --no-profile")
    profile.job_class(meta.job("tsbatch"))  # unknown strategy / GPU count: the profile's own message
