"""Job speeds across GPU types: the truth in the simulator, and the speeds both shells hand policies.

Units: a job's work is the seconds it would run alone on the **reference GPU type** with its GPU
count (a trace's ``duration``), so a speed of 1.0 finishes one second of work per second. The
reference is ``a100`` when the profile has it (Tesserae's table; Tesserae-style traces), else
``v100`` (Gavel's table, whose trace durations are V100 times), else the profile's first type.

On GPU type ``g`` a job runs at ``normalized speed x factor(job, g)``. The normalized speed comes
from the profile (1.0 alone under the best strategy, less under another strategy or when packed);
the factor is ``throughput(job, g) / throughput(job, reference)`` from the absolute steps/s the
profile holds (Gavel's table). Where either is missing (a job type Gavel never ran on K80), the
factor is the median ratio of the jobs with the same GPU count measured on both types, else of all
jobs, else 1.0. Profiles without absolute throughputs (the A100 table) give 1.0.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from ..model import Cluster, InputError, Job
from .keys import MPS, TIMESLICE, ProfileKey
from .table import ThroughputProfile

REFERENCE_PREFERENCE = ("a100", "v100")


def default_reference(profile: ThroughputProfile) -> str:
    for g in REFERENCE_PREFERENCE:
        if g in profile.gpu_types:
            return g
    return profile.gpu_types[0]


class SpeedModel:
    """Speeds relative to the reference GPU type; memoized (a profile is immutable)."""

    def __init__(self, profile: ThroughputProfile, cluster: Cluster, reference: str | None = None) -> None:
        self.profile = profile
        self.reference = (reference or default_reference(profile)).lower()
        known = set(profile.gpu_types)
        for g in (*cluster.gpu_types, self.reference):
            if g not in known:
                raise InputError(f"GPU type {g!r} is not in profile {profile.name} (known: "
                                 f"{', '.join(profile.gpu_types)}); pick a profile that has it (--profile gavel)")
        self.node_type = {n.name: n.gpu_type for n in cluster.nodes}
        self.gpu_types = cluster.gpu_types
        self._memo: dict[tuple[object, ...], float] = {}  # factors, ratios and solo speeds
        self._pair_memo: dict[tuple[object, ...], tuple[float, float]] = {}

    # ---- per type ----------------------------------------------------------------------------
    def factor(self, job: Job, gpu_type: str) -> float:
        """Absolute speed of ``job`` alone on ``gpu_type`` relative to the reference type."""
        key = self.profile.key(job.model, job.batch_size, job.num_gpus)
        return self._factor(key, gpu_type)

    def _factor(self, key: ProfileKey, gpu_type: str) -> float:
        if gpu_type == self.reference:
            return 1.0
        memo = ("factor", key, gpu_type)
        if memo not in self._memo:
            ratio = self._ratio(key, gpu_type)
            self._memo[memo] = ratio if ratio is not None else self._median_ratio(gpu_type, key.num_gpus)
        return self._memo[memo]

    def _ratio(self, key: ProfileKey, gpu_type: str) -> float | None:
        try:
            mine = self.profile.isolated_throughput(key, gpu_type)
            ref = self.profile.isolated_throughput(key, self.reference)
        except InputError:  # not measured on one of the types
            return None
        if mine is None or ref is None or ref <= 0:
            return None
        return mine / ref

    def _median_ratio(self, gpu_type: str, num_gpus: int) -> float:
        memo = ("median", gpu_type, num_gpus)
        if memo not in self._memo:
            keys = self.profile.keys(gpu_type)
            ratios = [r for k in keys if k.num_gpus == num_gpus if (r := self._ratio(k, gpu_type)) is not None]
            if not ratios:
                ratios = [r for k in keys if (r := self._ratio(k, gpu_type)) is not None]
            self._memo[memo] = statistics.median(ratios) if ratios else 1.0
        return self._memo[memo]

    @property
    def max_factor(self) -> float:
        """Fastest any job can run alone (>= 1.0): bounds JCT from below in invariant checks."""
        memo = ("max_factor",)
        if memo not in self._memo:
            best = 1.0
            for g in self.gpu_types:
                for k in self.profile.keys(g):
                    best = max(best, self._factor(k, g))
                best = max(best, self._median_ratio(g, 0))
            self._memo[memo] = best
        return self._memo[memo]

    # ---- true speeds (what drives progress) -------------------------------------------------
    def solo(self, job: Job, gpu_type: str, strategy: str | None) -> float:
        """Speed alone under ``strategy`` (None: the best one), relative to the reference type."""
        memo = ("solo", job.model, job.batch_size, job.num_gpus, job.parallelism, gpu_type, strategy)
        hit = self._memo.get(memo)
        if hit is None:
            cls = self.profile.job_class(job)
            if strategy is None:
                speed, _ = self.profile.best_isolated(job, gpu_type)
            else:
                try:
                    speed = self.profile.isolated_speed(cls.key, gpu_type, strategy)
                except InputError:  # unmeasured key: the documented fallback (alone at 1.0)
                    speed, _ = self.profile.best_isolated(job, gpu_type)
            hit = speed * self._factor(cls.key, gpu_type)
            self._memo[memo] = hit
        return hit

    def packed(self, a: Job, b: Job, gpu_type: str, a_strategy: str | None,
               b_strategy: str | None) -> tuple[float, float]:
        """Both jobs' speeds while they share GPUs under the given strategies; (0, 0) if the
        profile has no feasible measurement of exactly that combination (out of memory). Two users'
        jobs time-slice the GPU (one MPS server per GPU at a time): their time-sliced speeds."""
        sharing = MPS if a.user == b.user else TIMESLICE
        memo = ("pair", a.model, a.batch_size, a.parallelism, b.model, b.batch_size, b.parallelism,
                a.num_gpus, b.num_gpus, gpu_type, a_strategy, b_strategy, sharing)
        pair = self._pair_memo.get(memo)
        if pair is None:
            ka, kb = self.profile.job_class(a).key, self.profile.job_class(b).key
            speeds = (0.0, 0.0)
            if a.num_gpus == b.num_gpus:
                for opt in self.profile.pair_options(ka, kb, gpu_type, sharing):
                    if opt.feasible and opt.a_strategy == a_strategy and opt.b_strategy == b_strategy:
                        speeds = (opt.a_speed * self._factor(ka, gpu_type), opt.b_speed * self._factor(kb, gpu_type))
                        break
            pair = speeds
            self._pair_memo[memo] = pair
        return pair

    # ---- checks and costs ----------------------------------------------------------------------
    def check_job(self, job: Job) -> None:
        """InputError unless the profile knows the job's model, batch and strategies."""
        self.profile.job_class(job)


    # ---- what policies see ----------------------------------------------------------------------
    def lookup(self) -> SpeedLookup:
        return SpeedLookup(self.profile, self._factor_of_job)

    def _factor_of_job(self, job: Job, gpu_type: str) -> float:
        return self._factor(self.profile.job_class(job).key, gpu_type)


class SpeedLookup:
    """``policies.base.ThroughputLookup`` over a (possibly noisy) profile: best-strategy speeds,
    relative to the reference GPU type."""

    def __init__(self, profile: ThroughputProfile, factor: Callable[[Job, str], float]) -> None:
        self._profile, self._factor = profile, factor

    def isolated(self, job: Job, gpu_type: str) -> float:
        return self._profile.best_isolated(job, gpu_type)[0] * self._factor(job, gpu_type)

    def packed(self, a: Job, b: Job, gpu_type: str) -> tuple[float, float] | None:
        if a.no_pack or b.no_pack:
            return None
        best = self._profile.best_pair(a, b, gpu_type)
        if best is None:
            return None
        return best.a_speed * self._factor(a, gpu_type), best.b_speed * self._factor(b, gpu_type)
