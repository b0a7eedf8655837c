"""Canonical model names of the two throughput profiles, and the documented mapping between them.

Two namespaces exist:

* **A100** (Tesserae's measured packing table): ``resnet50``, ``vgg19``, ``DCGAN``, ``PointNet`` (batch
  32/64/128, 1-4 GPUs) and the LLMs ``Bert-Large`` / ``GPT2-Medium`` (2-4 GPUs, batch ``global/micro``
  such as ``256/16`` and ``512/8``).
* **Gavel** (V100/P100/K80 throughputs): the 26 job types of Gavel's table, the model *is* the job type
  string (``"ResNet-50 (batch size 64)"``, ``"A3C"``); the profile key is (job type, scale factor).

Shockwave and Philly traces are written with Gavel job types; Tesserae-style traces with A100 models.
``map_model`` converts either way, by model family and size; docs/traces.md explains each row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

A100 = "a100"
GAVEL = "gavel"
NAMESPACES = (A100, GAVEL)

SMALL_MODELS = ("resnet50", "vgg19", "DCGAN", "PointNet")
LLM_MODELS = ("Bert-Large", "GPT2-Medium")
A100_MODELS = SMALL_MODELS + LLM_MODELS
A100_BATCHES = (32, 64, 128)  # small models' batch sizes in the A100 table
# The LLM batch each LLM runs with in the A100 table's isolated rows (global/micro).
LLM_BATCH = {"Bert-Large": "256/16", "GPT2-Medium": "512/8"}


@dataclass(frozen=True, slots=True)
class GavelFamily:
    """A Gavel model family: its job types differ only in batch size (none for A3C/CycleGAN)."""

    name: str
    batches: tuple[int, ...]  # empty: the job type has no batch size
    distributed: bool  # Gavel measured scale factors 2/4/8 (and its generator gives it > 1 GPU)
    a100_small: str  # A100 model when the job runs on 1 GPU (or always, for non-LLM families)
    a100_multi: str  # A100 model when it runs on >= 2 GPUs
    why: str
    # How a batch size maps onto the A100 table's 32/64/128: "nearest" (log scale) where a batch
    # counts images/sentences as there; "rank" (smallest -> 32 ... largest -> 128) where the scale is
    # unrelated (LM sequences, recommendation users).
    batch_rule: str = "nearest"


# Every job type in the Shockwave and Philly traces (= Gavel's 26 job types), by family.
GAVEL_FAMILIES: tuple[GavelFamily, ...] = (
    GavelFamily("ResNet-50", (16, 32, 64, 128), True, "resnet50", "resnet50",
                "same model (ImageNet ResNet-50)"),
    GavelFamily("ResNet-18", (16, 32, 64, 128, 256), True, "resnet50", "resnet50",
                "residual image-classification CNN; the A100 table's only ResNet is ResNet-50"),
    GavelFamily("Transformer", (16, 32, 64, 128, 256), True, "vgg19", "Bert-Large",
                "Transformer encoder family -> Bert-Large when distributed; the A100 LLMs have no "
                "1-GPU rows, so 1-GPU jobs take the heaviest single-GPU model (VGG-19, 143M params)"),
    GavelFamily("LM", (5, 10, 20, 40, 80), True, "vgg19", "GPT2-Medium",
                "language modelling -> GPT2-Medium (causal LM) when distributed; 1-GPU as Transformer",
                "rank"),
    GavelFamily("Recommendation", (512, 1024, 2048, 4096, 8192), False, "PointNet", "PointNet",
                "small MLP-dominated model (VAE-CF autoencoder) -> PointNet, the table's shared-MLP net",
                "rank"),
    GavelFamily("A3C", (), False, "PointNet", "PointNet",
                "tiny RL policy network, low GPU use -> PointNet, the smallest A100 model"),
    GavelFamily("CycleGAN", (), False, "DCGAN", "DCGAN", "GAN family -> DCGAN"),
)
_FAMILY = {f.name: f for f in GAVEL_FAMILIES}
_BATCH_RE = re.compile(r"^(?P<family>.+) \(batch size (?P<batch>\d+)\)$")


def gavel_job_type(family: str, batch: int | None) -> str:
    return family if batch is None else f"{family} (batch size {batch})"


GAVEL_JOB_TYPES: tuple[str, ...] = tuple(
    gavel_job_type(f.name, b) for f in GAVEL_FAMILIES for b in (f.batches or (None,)))
GAVEL_TABLE_SCALE_FACTORS = {True: (1, 2, 4, 8), False: (1,)}  # by GavelFamily.distributed

_GAVEL_SET = frozenset(GAVEL_JOB_TYPES)
_CANONICAL = {m.lower(): m for m in A100_MODELS + GAVEL_JOB_TYPES}


def split_gavel_type(job_type: str) -> tuple[GavelFamily, int | None]:
    """("ResNet-50 (batch size 64)") -> (ResNet-50 family, 64); ValueError if not a Gavel job type."""
    m = _BATCH_RE.match(job_type)
    family, batch = (m["family"], int(m["batch"])) if m else (job_type, None)
    f = _FAMILY.get(family)
    if f is None or (batch is None) != (not f.batches) or (batch is not None and batch not in f.batches):
        raise ValueError(f"unknown Gavel job type {job_type!r}")
    return f, batch


def namespace_of(model: str) -> str:
    """"a100" or "gavel" for a canonical model name (ValueError otherwise)."""
    if model in A100_MODELS:
        return A100
    if model in _GAVEL_SET:
        return GAVEL
    raise ValueError(f"unknown model {model!r}")


def resolve_model(model: str, batch_size: str) -> tuple[str, str]:
    """Canonical (model, batch_size) for a name as a user or file wrote it; ValueError says why not.

    Accepts canonical names case-insensitively, a Gavel family plus batch column
    (``ResNet-50``, ``64`` -> ``ResNet-50 (batch size 64)``), and the Blox generator's plain-number LLM
    batch (``Bert-Large``, ``32``), which becomes the LLM's profile batch (``256/16``).
    """
    name = model.strip()
    batch = batch_size.strip()
    canon = _CANONICAL.get(name.lower())
    if canon is None:
        fam = next((f for f in GAVEL_FAMILIES if f.name.lower() == name.lower() and f.batches), None)
        if fam is not None and batch.isdigit() and int(batch) in fam.batches:
            canon = gavel_job_type(fam.name, int(batch))
        elif fam is not None:
            raise ValueError(f"Gavel model {fam.name} has no batch size {batch!r} "
                             f"(known: {', '.join(map(str, fam.batches))})")
        else:
            raise ValueError(f"unknown model {name!r} (known: {', '.join(A100_MODELS)} or a Gavel job type "
                             f"such as 'ResNet-50 (batch size 64)')")
    if canon in _GAVEL_SET:
        _, tb = split_gavel_type(canon)
        want = "" if tb is None else str(tb)
        if batch and batch != want:
            raise ValueError(f"batch size {batch!r} contradicts job type {canon!r}")
        return canon, want
    if canon in LLM_MODELS:
        if not batch or batch.isdigit():
            return canon, LLM_BATCH[canon]
        if not _is_global_micro(batch):
            raise ValueError(f"LLM batch size must be 'global/micro' like {LLM_BATCH[canon]!r}, got {batch!r}")
        return canon, batch
    if not batch.isdigit() or int(batch) <= 0:
        raise ValueError(f"batch size of {canon} must be a positive integer, got {batch!r}")
    return canon, str(int(batch))


def _is_global_micro(batch: str) -> bool:
    parts = batch.split("/")
    return len(parts) == 2 and all(p.isdigit() and int(p) > 0 for p in parts)


def _nearest(value: int, choices: tuple[int, ...]) -> int:
    """Closest on a log scale (batch sizes are powers of two); ties go to the smaller."""
    return min(choices, key=lambda c: (abs(math.log(c) - math.log(value)), c))


def _rank_batch(batch: int, source: tuple[int, ...], target: tuple[int, ...]) -> int:
    """Smallest source batch -> smallest target, largest -> largest, linear in rank between."""
    if len(source) == 1:
        return target[len(target) // 2]
    i = source.index(batch)
    return target[round(i * (len(target) - 1) / (len(source) - 1))]


def _global_batch(batch: str) -> int:
    return int(batch.split("/")[0]) if batch else 1


def to_a100(model: str, batch_size: str, num_gpus: int) -> tuple[str, str]:
    """Gavel job type -> A100 model and batch (identity for A100 models)."""
    if model in A100_MODELS:
        return model, batch_size
    fam, batch = split_gavel_type(model)
    target = fam.a100_multi if num_gpus >= 2 else fam.a100_small
    if target in LLM_MODELS:
        return target, LLM_BATCH[target]
    if batch is None:
        return target, str(A100_BATCHES[0])
    if fam.batch_rule == "rank":
        return target, str(_rank_batch(batch, fam.batches, A100_BATCHES))
    return target, str(_nearest(batch, A100_BATCHES))


# A100 model -> (Gavel family on 1 GPU, Gavel family on >= 2 GPUs, why). Documented in docs/traces.md.
A100_TO_GAVEL: dict[str, tuple[str, str, str]] = {
    "resnet50": ("ResNet-50", "ResNet-50", "same model"),
    "vgg19": ("ResNet-50", "ResNet-50", "ImageNet CNN; Gavel has no VGG, ResNet-50 is its ImageNet model"),
    "DCGAN": ("CycleGAN", "ResNet-18", "GAN -> CycleGAN; Gavel measured CycleGAN on 1 GPU only, so "
              "multi-GPU DCGAN (small conv net, 64x64 images) -> ResNet-18 (CIFAR-10)"),
    "PointNet": ("ResNet-18", "ResNet-18", "small model on small inputs -> ResNet-18 (CIFAR-10), measured "
                 "at every scale factor"),
    "Bert-Large": ("Transformer", "Transformer", "Transformer encoder -> Gavel's Transformer"),
    "GPT2-Medium": ("LM", "LM", "causal language model -> Gavel's LM"),
}


def to_gavel(model: str, batch_size: str, num_gpus: int) -> tuple[str, str]:
    """A100 model -> Gavel job type and batch (identity for Gavel job types)."""
    if model in _GAVEL_SET:
        return model, batch_size
    if model not in A100_TO_GAVEL:
        raise ValueError(f"unknown model {model!r}")
    single, multi, _ = A100_TO_GAVEL[model]
    fam = _FAMILY[multi if num_gpus >= 2 else single]
    if not fam.batches:
        return fam.name, ""
    batch = _nearest(_global_batch(batch_size), fam.batches)
    return gavel_job_type(fam.name, batch), str(batch)


def map_model(model: str, batch_size: str, num_gpus: int, namespace: str) -> tuple[str, str]:
    """(model, batch) in ``namespace`` ("a100" or "gavel") for a job of ``num_gpus`` GPUs."""
    if namespace == A100:
        return to_a100(model, batch_size, num_gpus)
    if namespace == GAVEL:
        return to_gavel(model, batch_size, num_gpus)
    raise ValueError(f"unknown model namespace {namespace!r} (known: {', '.join(NAMESPACES)})")


def gavel_table_key(job_type: str, num_gpus: int) -> tuple[str, int]:
    """The (job type, scale factor) row of Gavel's table that stands for a job of ``num_gpus`` GPUs.

    Gavel measured distributed families at 1/2/4/8 GPUs and the others at 1 only; Philly jobs ask for
    up to 64. The largest measured scale factor <= num_gpus stands in (no speed-up is assumed beyond
    what was measured).
    """
    fam, _ = split_gavel_type(job_type)
    sfs = GAVEL_TABLE_SCALE_FACTORS[fam.distributed]
    return job_type, max(s for s in sfs if s <= max(1, num_gpus))
