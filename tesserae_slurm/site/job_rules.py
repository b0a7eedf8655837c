"""The rules a job's metadata (the ``Comment`` tsbatch writes, ``model/meta.py``) must keep on this site:
a power-of-two GPU count that fits the partition, a model and batch the profile knows, parallelism
strategies Megatron can run. tsbatch refuses a submission that breaks them; the daemon leaves a job
that breaks them unscheduled, with the reason, since a Comment can be written by hand.
"""

from __future__ import annotations

from functools import cache

from ..harness.megatron import megatron_parallelism
from ..model import InputError
from ..model.meta import UNPROFILED, JobMeta
from ..model.strategy import parse_strategy
from ..profiles import ThroughputProfile
from ..profiles.keys import fold, normalize_batch
from .partition import PartitionShape


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
    key = profile.key(model, batch, n)  # unknown batch of an ordinary model: the profile's own message
    if batch and profile.is_strategied(key.model) and normalize_batch(batch) not in (
            key.batch_size, key.batch_size.split("/")[0]):
        raise InputError(f"--batch-size {batch}: {key.model} runs with batch {key.batch_size} on {n} GPU(s) in "
                         f"profile {profile.name}; omit --batch-size or use --no-profile")
    profile.job_class(meta.job("tsbatch"))  # unknown strategy / GPU count: the profile's own message
