"""The speed table an emulated GPU job reads (``emulated_job.py``), written from the profile.

The simulator's truth is ``profiles/speeds.SpeedModel``: a job's speed alone under a strategy, and a
pair's speeds under MPS (one user's jobs) or time-sliced (two users'). The emulated jobs must run at
exactly those speeds, yet start in a fraction of a second without numpy, so the replay asks the
speed model once for every profile key of the trace and writes the answers as JSON: per key its
speed alone (under every strategy, "" = the best), and per pair of keys of one GPU count every
strategy combination the profile measured, both ways of sharing.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from ..model import Cluster, InputError, Job
from ..profiles import ProfileKey, ThroughputProfile
from ..profiles.keys import MPS, TIMESLICE, TIMESLICE_SHARE
from ..profiles.speeds import SpeedModel
from .emulated_job import FORMAT


def key_text(key: ProfileKey) -> str:
    return f"{key.model}|{key.batch_size}|{key.num_gpus}"


def job_key(profile: ThroughputProfile, job: Job) -> str:
    """What ``emulated_job --key`` takes for this job."""
    return key_text(profile.job_class(job).key)


def speed_table(profile: ThroughputProfile, jobs: Sequence[Job], gpu_type: str) -> dict[str, Any]:
    """The table for every profile key among ``jobs`` on ``gpu_type`` (JSON-ready)."""
    speeds = SpeedModel(profile, Cluster.from_spec(f"1x1:{gpu_type}"))
    reps: dict[str, Job] = {}
    for j in jobs:
        reps.setdefault(job_key(profile, j), dataclasses.replace(j, user="", group="", no_pack=False))
    alone: dict[str, dict[str, float]] = {}
    for k, j in reps.items():
        runs = {"": speeds.solo(j, gpu_type, None)}
        for s in profile.strategies(j.model, j.num_gpus, gpu_type) if profile.is_strategied(j.model) else ():
            runs[s] = speeds.solo(j, gpu_type, s)
        alone[k] = runs
    pairs: dict[str, list[dict[str, Any]]] = {MPS: [], TIMESLICE: []}
    for (ka, a), (kb, b) in itertools.combinations_with_replacement(sorted(reps.items()), 2):
        if a.num_gpus != b.num_gpus:
            continue
        for sharing in (MPS, TIMESLICE):
            try:
                options = profile.pair_options(profile.job_class(a).key, profile.job_class(b).key, gpu_type, sharing)
            except InputError:  # a key no GPU type measured (an 8-GPU LLM): never packed
                continue
            # the truth's rule: one user's jobs share an MPS server, two users' time-slice
            ja, jb = dataclasses.replace(a, user="one"), dataclasses.replace(b, user="one" if sharing == MPS else "two")
            for o in options:
                sa, sb = speeds.packed(ja, jb, gpu_type, o.a_strategy, o.b_strategy)
                pairs[sharing].append({"a": ka, "b": kb, "a_strategy": o.a_strategy or "",
                                       "b_strategy": o.b_strategy or "", "a_speed": sa, "b_speed": sb})
    return {"format": FORMAT, "profile": profile.name, "gpu_type": gpu_type, "timeslice_share": TIMESLICE_SHARE,
            "alone": alone, "pairs": pairs}
