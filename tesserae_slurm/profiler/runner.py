"""`tesserae profile`'s engine: plan the runs, skip the finished ones, measure the rest, build the table.

The imperative shell of profiling: it owns the worker processes, the results file and (on CUDA)
the MPS control daemon. Everything it learns is appended to the results file as soon as a run ends.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..model import InputError
from .measure import Protocol, median_rate
from .runs import CPU, MPS, TIMESLICE, PlannedRun, ResultsFile, RunRecord, plan_runs
from .tables import ProfileBuild, profile_from_runs
from .worker import OK, WorkerPool
from .zoo import JobSpec, check_spec

log = logging.getLogger(__name__)
ProgressFn = Callable[[int, int, str], None]  # (done, total, run id now starting or finished)


@dataclass(frozen=True)
class ProfilerConfig:
    jobs: tuple[JobSpec, ...]
    device: str = "cpu"  # cpu | cuda | cuda:N
    gpu_type: str = "cpu"  # the label the table is written for
    protocol: Protocol = field(default_factory=Protocol)
    memory_cap_mib: float | None = None  # a pair (or job) whose peaks sum above this is infeasible
    threads: int = 1  # intra-op threads per job
    cores: tuple[int, ...] = ()  # CPU: the cores that form "the device" (default: one)
    mps: str = "auto"  # CUDA: auto | on | off

    def settings(self) -> dict[str, Any]:
        """What a results file must agree on to be resumed."""
        return {"device": self.device, "gpu_type": self.gpu_type, "protocol": asdict(self.protocol),
                "memory_cap_mib": self.memory_cap_mib, "threads": self.threads, "cores": list(self.cores),
                "sizes": sorted({j.size for j in self.jobs})}


def default_gpu_label(device_name: str) -> str:
    """"NVIDIA A100-SXM4-40GB" -> "a100"; anything unrecognized -> "gpu"."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4})\b", device_name)
    return m.group(1).lower() if m else "gpu"


def default_cores() -> tuple[int, ...]:
    if hasattr(os, "sched_getaffinity"):
        return (min(os.sched_getaffinity(0)),)
    return ()


def _check_device(device: str) -> None:
    if device == "cpu":
        return
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise InputError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    import torch

    if not torch.cuda.is_available():
        raise InputError(f"device {device}: no CUDA device is visible here (torch {torch.__version__})")


def pair_sharing(config: ProfilerConfig, available: Callable[[], tuple[bool, str]] | None = None) -> str:
    """How this profile's pairs share the device: cpu (cores), mps (a private MPS server, when asked
    for and possible), else timeslice (a GPU without MPS: what two users' jobs get)."""
    if config.device == "cpu":
        return CPU
    if config.mps == "off":
        return TIMESLICE
    if available is None:
        from ..harness.mps import mps_available
        available = mps_available
    ok, why = available()
    if ok:
        return MPS
    if config.mps == "on":
        raise InputError(f"--mps on: {why}")
    log.info("profiling without MPS (pairs time-slice the GPU): %s", why)
    return TIMESLICE


def _mps_env() -> tuple[dict[str, str], Any]:
    """Start a private MPS control daemon for CUDA pairs (docs/profiling.md); None when it did not start."""
    from ..harness.mps import join_mps, mps_available

    setup = join_mps(f"profiler-{os.getpid()}", (), 0, "profiler", available=mps_available())
    return dict(setup.env), (setup if setup.client is not None else None)


def run_profile(config: ProfilerConfig, results_path: str | Path, resume: bool = False,
                progress: ProgressFn | None = None, name: str = "profile",
                pool_factory: Callable[..., WorkerPool] = WorkerPool) -> tuple[ProfileBuild, int]:
    """Measure what the results file lacks; (the profile, how many runs this call measured)."""
    if not config.jobs:
        raise InputError("nothing to profile: no models given")
    for j in config.jobs:
        check_spec(j)
    _check_device(config.device)
    results = ResultsFile(results_path, config.settings())
    done = results.load(resume)
    sharing = pair_sharing(config)
    env: dict[str, str] = {}
    mps = None
    if sharing == MPS and _todo(plan_runs(config.jobs, MPS), done):
        env, mps = _mps_env()
        if mps is None:  # the server did not start: the pairs would time-slice
            if config.mps == "on":
                raise InputError("--mps on: could not start the MPS control daemon (see the log)")
            sharing = TIMESLICE
    plan = plan_runs(config.jobs, sharing)
    todo = _todo(plan, done)
    total = len(plan)
    finished = total - len(todo)
    if progress:
        progress(finished, total, "")
    measured = 0
    if todo:
        cap = None if config.memory_cap_mib is None else int(config.memory_cap_mib * 2 ** 20)
        cores = config.cores or (default_cores() if config.device == "cpu" else ())
        try:
            with pool_factory(config.device, config.threads, env, 2, cores) as pool:
                for planned in todo:
                    if progress:
                        progress(finished, total, planned.run_id)
                    rec = _measure(pool, planned, config.protocol, cap, done, sharing)
                    results.append(rec)
                    done[rec.run_id] = rec
                    finished += 1
                    measured += 1
                    if progress:
                        progress(finished, total, planned.run_id)
        finally:
            if mps is not None:
                from ..harness.mps import leave_mps

                leave_mps(mps)
    # the table: this call's runs, and the pairs the results file holds measured the other way
    other = plan_runs(config.jobs, MPS if sharing == TIMESLICE else TIMESLICE)
    recs = [done[r.run_id] for r in dict.fromkeys([*plan, *other]) if r.run_id in done]
    return profile_from_runs(recs, config.gpu_type, name), measured


def _todo(plan: Sequence[PlannedRun], done: dict[str, RunRecord]) -> list[PlannedRun]:
    return [r for r in plan if r.run_id not in done or done[r.run_id].status not in (OK, "oom")]


def _measure(pool: WorkerPool, planned: PlannedRun, protocol: Protocol, cap: int | None,
             done: dict[str, RunRecord], sharing: str) -> RunRecord:
    # a pair whose job could not run alone is not measured: there is nothing to normalize it by
    for j in planned.jobs if len(planned.jobs) > 1 else ():
        alone = done.get(f"alone {j.label}")
        if alone is None or alone.status != OK:
            return RunRecord(planned.run_id, planned.jobs, "skipped",
                             message=f"{j.label} did not run alone ({alone.status if alone else 'not run'})")
    out = pool.run(planned.jobs, protocol, cap)
    mib = tuple(round(p / 2 ** 20, 3) for p in out.peaks)
    how = sharing if len(planned.jobs) > 1 else ""
    if out.status != OK:
        log.info("%s: %s %s", planned.run_id, out.status, out.message)
        return RunRecord(planned.run_id, planned.jobs, out.status, peak_mib=mib, message=out.message, sharing=how)
    return RunRecord(planned.run_id, planned.jobs, OK, tuple(median_rate(w) for w in out.rates), out.rates, mib,
                     alone=tuple(median_rate(w) for w in out.solo), sharing=how)


def jobs_from_args(models: Sequence[str], batches: Sequence[str], size: str, gpt_layers: int,
                   gpt_batches: Sequence[str]) -> tuple[JobSpec, ...]:
    """Cartesian product of zoo models and batch sizes (GPT gets its own ``global/micro`` batches)."""
    out: list[JobSpec] = []
    for m in models:
        mid = m.strip().lower()
        for b in (gpt_batches if mid == "gpt" else batches):
            spec = JobSpec(mid, b.strip(), size, gpt_layers)
            check_spec(spec)
            out.append(spec)
    return tuple(dict.fromkeys(out))
