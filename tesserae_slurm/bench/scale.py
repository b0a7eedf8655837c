"""`tesserae bench scale`: one round's decision time by stage, swept over cluster and queue sizes,
with Gavel's packed LP and POP timed on the very same states (docs/performance.md).

A state is seeded and reproducible: jobs from the Tesserae trace mix (``synthetic.py``), attained
service drawn so Tiresias has several queues to sort, and a current placement that is the engine's
own decision for last round's order. The timed decision is then this round's: the Tiresias ranking
(scheduling), placement, packing and migration against that current placement. Medians of repeats.
Baselines run the whole policy decision (build + solve the allocation LP, Gavel's round mechanism)
once per state under a time cap; a run that hits the cap is reported as "> cap". ``gavel`` is our
HiGHS model of Gavel's LP; ``gavel-cvxpy`` is Gavel's own way of building and solving it (cvxpy +
ECOS, the optional ``bench`` extra), run in a child process that is killed at the cap.
"""

from __future__ import annotations

import gc
import platform
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..engine import EngineConfig, RoundRequest, decide
from ..model import Cluster, InputError, JobView, Placement, RoundDecision
from ..policies.base import SchedulingInput, ThroughputLookup
from ..policies.registry import make_policy
from ..profiles import load_profile
from ..profiles.speeds import SpeedModel
from ..rank_decide import rank_and_decide
from .synthetic import perturb_order, synthetic_jobs

STAGES = ("scheduling", "placement", "packing", "migration")
DEFAULT_GPUS = (64, 256, 1024, 10_000)
DEFAULT_JOBS = (256, 512, 1024, 2048, 8192, 50_000)
BASELINES = ("gavel", "gavel-cvxpy", "pop")
# Above this many pair variables the LP is not even built: its matrix alone would take minutes and
# gigabytes, far past any cap. Reported as "> cap" with the count.
MAX_PAIR_VARIABLES = 5_000_000


@dataclass(frozen=True)
class BaselineTime:
    name: str
    ms: float | None  # None: did not finish within the cap (or not run, see ``note``)
    capped: bool
    note: str = ""
    peak_mib: float | None = None  # peak RSS of the child process (baselines run in one)

    @property
    def hit_cap(self) -> bool:
        """It ran and the cap stopped it. A baseline skipped by size ("not run ...") claims no time;
        JSON written before that distinction marked those capped too."""
        return self.capped and self.ms is None and not self.note.startswith("not run")

    def text(self, cap_s: float) -> str:
        if self.ms is not None:
            return f"{self.ms:.0f}"
        if not self.hit_cap and self.note:  # not run ("not installed", "not run above N jobs") or failed
            return self.note.split(":", 1)[0]
        return f"> {cap_s * 1e3:.0f}"


@dataclass(frozen=True)
class ScalePoint:
    gpus: int
    jobs: int
    repeats: int
    median_ms: float
    p90_ms: float
    stages: dict[str, float]  # stage -> median ms
    peak_mib: float  # tracemalloc peak of one decision (scheduling included)
    placed: int
    packed_pairs: int
    migrations: int
    baselines: dict[str, BaselineTime] = field(default_factory=dict)


@dataclass(frozen=True)
class _State:
    cluster: Cluster
    views: tuple[JobView, ...]
    current: Placement


def make_state(gpus: int, jobs: int, seed: int, gpus_per_node: int = 4) -> _State:
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_spec(f"{max(1, gpus // gpus_per_node)}x{gpus_per_node}:a100")
    pool = synthetic_jobs(jobs, rng)
    current = decide(RoundRequest(cluster, perturb_order(pool, rng, 0.5)), load_profile("a100")).placement
    running = current.jobs()
    executed = rng.exponential(3600.0, size=jobs)
    views = tuple(
        JobView(j, submit_time=float(i), attained_service=float(executed[i]) * j.num_gpus,
                executed_time=float(executed[i]), rounds_run=int(executed[i] // 360), running=j.id in running,
                total_work=float(executed[i]) + 3600.0, remaining_work=3600.0)
        for i, j in enumerate(pool))
    return _State(cluster, views, current)


def _scheduling_input(state: _State, throughput: ThroughputLookup) -> SchedulingInput:
    return SchedulingInput(now=1e6, round_s=360.0, jobs=state.views, cluster=state.cluster, throughput=throughput,
                           placement=state.current)


def time_decision(state: _State, config: EngineConfig | None = None) -> tuple[dict[str, float], RoundDecision]:
    """One whole round as the simulator and the daemon make it: Tiresias ranking, then the engine."""
    profile = load_profile("a100")
    throughput = SpeedModel(profile, state.cluster).lookup()
    policy = make_policy("tiresias")
    t0 = time.perf_counter()
    r = rank_and_decide(policy, _scheduling_input(state, throughput), policy.initial_state(), profile,
                        config or EngineConfig(), clock=time.perf_counter)
    t2 = time.perf_counter()
    d = r.decision
    ms = {"scheduling": r.rank_s * 1e3, "placement": d.timings.placement * 1e3,
          "packing": d.timings.packing * 1e3, "migration": d.timings.migration * 1e3, "total": (t2 - t0) * 1e3}
    return ms, d


def time_baseline(name: str, state: _State, cap_s: float) -> BaselineTime:
    """Whole-policy decision time of a Gavel-style baseline on a fresh policy state (an LP reset)."""
    sizes = np.bincount([v.num_gpus for v in state.views])
    pair_vars = int((sizes * (sizes - 1) // 2).sum())  # pairs form only between equal GPU counts
    if pair_vars > MAX_PAIR_VARIABLES:
        return BaselineTime(name, None, False, f"not run: ~{pair_vars:.1e} pair variables")
    if name == "gavel-cvxpy":
        return time_gavel_cvxpy_baseline(state, cap_s)
    profile = load_profile("a100")
    throughput = SpeedModel(profile, state.cluster).lookup()
    policy = make_policy(name, time_limit_s=cap_s)
    gc.collect()
    t0 = time.perf_counter()
    _, st = policy.rank(_scheduling_input(state, throughput), policy.initial_state())
    ms = (time.perf_counter() - t0) * 1e3
    if st.time_limit_hits or ms > cap_s * 1e3:
        return BaselineTime(name, None, True, f"hit the {cap_s:g} s cap")
    return BaselineTime(name, ms, False)


def time_gavel_cvxpy_baseline(state: _State, cap_s: float) -> BaselineTime:
    """Gavel's LP via cvxpy/ECOS in a child killed at the cap; "not installed" without cvxpy."""
    from ..policies.gavel_cvxpy import cvxpy_available
    from .cvxpy_baseline import describe, time_gavel_cvxpy

    name = "gavel-cvxpy"
    if not cvxpy_available():
        return BaselineTime(name, None, False, "not installed")
    run = time_gavel_cvxpy(state.cluster, state.views, cap_s)
    if run.capped:
        return BaselineTime(name, None, True, f"killed at the {cap_s:g} s cap; {describe(run)}", run.peak_rss_mib)
    if run.ms is None:
        return BaselineTime(name, None, False, f"failed: {describe(run)}", run.peak_rss_mib)
    return BaselineTime(name, run.ms, False, describe(run), run.peak_rss_mib)


def bench_point(gpus: int, jobs: int, repeats: int = 5, seed: int = 0, baselines: Sequence[str] = (),
                cap_s: float = 60.0, baseline_max_jobs: int = 2048) -> ScalePoint:
    if repeats < 1:
        raise InputError(f"repeats must be at least 1, got {repeats}")
    runs: list[dict[str, float]] = []
    for r in range(repeats):
        state = make_state(gpus, jobs, seed + r)
        gc.collect()
        ms, last = time_decision(state)
        runs.append(ms)
    state = make_state(gpus, jobs, seed)
    tracemalloc.start()
    time_decision(state)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    totals = sorted(r["total"] for r in runs)
    base = {}
    for name in baselines:
        if jobs > baseline_max_jobs:
            base[name] = BaselineTime(name, None, False, f"not run above {baseline_max_jobs} jobs")
        else:
            base[name] = time_baseline(name, state, cap_s)
    return ScalePoint(
        gpus=state.cluster.total_gpus, jobs=jobs, repeats=repeats, median_ms=statistics.median(totals),
        p90_ms=totals[min(len(totals) - 1, int(0.9 * len(totals)))],
        stages={s: statistics.median(r[s] for r in runs) for s in STAGES}, peak_mib=peak / 2**20,
        placed=len(last.placement.jobs()), packed_pairs=len(last.packed), migrations=len(last.migrated),
        baselines=base)


def sweep(gpus: Sequence[int], jobs: Sequence[int], repeats: int, seed: int, baselines: Sequence[str],
          cap_s: float, baseline_max_jobs: int, progress: Callable[[str], None] | None = None) -> list[ScalePoint]:
    points = []
    for g in gpus:
        for n in jobs:
            if progress:
                progress(f"{g} GPUs / {n} jobs")
            points.append(bench_point(g, n, repeats, seed, baselines, cap_s, baseline_max_jobs))
    return points


def machine() -> dict[str, str]:
    import os

    import scipy

    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version(),
            "numpy": np.__version__, "scipy": scipy.__version__, "os": platform.platform()}


def as_json(points: Sequence[ScalePoint], cap_s: float, command: str = "") -> dict:
    return {"machine": machine(), "cap_s": cap_s, "command": command, "points": [asdict(p) for p in points]}


def from_json(data: dict) -> tuple[list[ScalePoint], float, str]:
    """Points, cap and command back from ``as_json`` output (to re-render without re-running)."""
    points = []
    for p in data["points"]:
        base = {k: BaselineTime(**v) for k, v in p.pop("baselines", {}).items()}
        points.append(ScalePoint(**p, baselines=base))
    return points, float(data["cap_s"]), str(data.get("command", ""))
