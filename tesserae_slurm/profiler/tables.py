"""From run records to a ThroughputProfile in the project's format (the A100 table's).

Normalization as in the paper: a job's speed is its throughput divided by its isolated throughput
on the same device, so alone it is 1.0 (the isolated run's steps/s are kept as ``throughput``) and
packed it is packed steps/s over isolated steps/s -- the isolated steps/s measured in the same run,
right before the pair (``worker.py``), so that load drifting between runs is not read as
interference. A pair that ran out of memory (or exceeded
the configured cap) is written with speeds 0.0, infeasible, as the A100 table writes OOM. A job that
does not run alone cannot be normalized: it and its pairs are left out and reported. A pair that
ran time-sliced (a GPU without MPS) is written as a time-sliced pair (``PairRecord.sharing``); pairs
under MPS, and the CPU's pairs of processes sharing cores, as the table's ordinary pairs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ..profiles import IsolatedRecord, PairOption, PairRecord, ProfileKey, ThroughputProfile, build_profile
from ..profiles.keys import MPS
from .runs import TIMESLICE, RunRecord
from .worker import OK, OOM
from .zoo import ZOO, JobSpec

log = logging.getLogger(__name__)


def profile_key(spec: JobSpec, num_gpus: int = 1) -> ProfileKey:
    return ProfileKey(spec.profile_model, spec.profile_batch, num_gpus)


@dataclass(frozen=True)
class ProfileBuild:
    profile: ThroughputProfile
    left_out: tuple[str, ...]  # run ids not in the profile, with why


def profile_from_runs(records: Iterable[RunRecord], gpu_type: str, name: str) -> ProfileBuild:
    recs = list(records)
    alone: dict[JobSpec, RunRecord] = {r.jobs[0]: r for r in recs if len(r.jobs) == 1}
    tput = {j: r.throughput[0] for j, r in alone.items() if r.status == OK and r.throughput and r.throughput[0] > 0}
    isolated = [IsolatedRecord(gpu_type, profile_key(j), j.strategy, 1.0, t) for j, t in tput.items()]
    pairs: list[PairRecord] = []
    left: list[str] = []
    for r in recs:
        if len(r.jobs) == 1:
            if r.jobs[0] not in tput:
                left.append(f"{r.run_id}: {r.status} {r.message}".rstrip())
            continue
        a, b = r.jobs
        if a not in tput or b not in tput:
            left.append(f"{r.run_id}: a job has no isolated throughput to normalize by")
            continue
        if r.status == OOM:
            speeds = (0.0, 0.0)
        elif r.status == OK:
            ref = r.alone if len(r.alone) == 2 and min(r.alone) > 0 else (tput[a], tput[b])
            speeds = (r.throughput[0] / ref[0], r.throughput[1] / ref[1])
        else:
            left.append(f"{r.run_id}: {r.status} {r.message}".rstrip())
            continue
        if ZOO[b.model].llm and not ZOO[a.model].llm:  # the CSV writes the LLM first
            a, b, speeds = b, a, (speeds[1], speeds[0])
        pairs.append(PairRecord(gpu_type, profile_key(a), profile_key(b),
                                PairOption(a.strategy, b.strategy, round(speeds[0], 4), round(speeds[1], 4)),
                                sharing=TIMESLICE if r.sharing == TIMESLICE else MPS))
    datasets = {profile_key(j).model: ZOO[j.model].dataset for j in alone}
    for why in left:
        log.warning("left out of the profile: %s", why)
    return ProfileBuild(build_profile(name, isolated, pairs, datasets), tuple(left))

