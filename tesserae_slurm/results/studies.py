"""The studies behind docs/results.md: which traces, clusters, configurations, noise levels and
seeds each section simulates (docs/results.md, "Reproduce")."""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..policies.registry import POLICIES
from ..presets import get_config
from ..sim.compare import RunSpec
from ..sim.trace_source import resolve_trace
from ..sim.traces import generate_gavel, load_shipped
from . import fairness
from . import profile_studies as profiling

NOISE_LEVELS = (0.0, 0.2, 0.5, 1.0)
NOISE_SEEDS = (0, 1, 2, 3, 4)  # the paper ran the noisy simulation five times
MAIN = ("tiresias", "tiresias-single", "gavel", "tesserae-t", "tesserae-t-nomig")
FAIRNESS = ("gavel-ftf", "tesserae-ftf", "themis")
HARDWARE = ("tiresias", "tiresias-single", "tesserae-t")
SLURM = ("slurm-backfill", "tesserae-t", "tesserae-t-sticky", "tesserae-ftf")  # plain Slurm first: the baseline
MOVES = ("tesserae-t", "tesserae-t-fair")  # the default and the fairness study's best, before and after
PHILLY_VC, PHILLY_CLUSTER = "philly-0e4a51", "16x4:v100"  # the VC that loads 64 V100s most without 16-GPU jobs


@dataclass(frozen=True)
class Setup:
    trace: str  # --trace value (shipped name or gen: spec)
    cluster: str
    profile: str  # a100 | gavel (also the trace's model namespace)


@dataclass
class Study:
    key: str
    title: str
    setup: Setup
    configs: Sequence[str]
    noise: Sequence[float] = (0.0,)
    seeds: Sequence[int] = (0,)
    restart_scale: float = 1.0  # multiplies every default restart overhead
    # every move free, the plan rebuilt each round (EngineConfig.moves = None), as the paper publishes it:
    # the reproduction's sections; section 8 (what a site runs) and section 10 decide with moves that pay
    paper_plan: bool = True
    results: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    # Studies that vary more than configuration x noise x seed list their own runs:
    # plan(study, trace, trace_name, cache, fresh) -> [(result key, cache file label, RunSpec)]
    plan: Callable[..., list[tuple[tuple[Any, ...], str, RunSpec]]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # what a planned study's rendering needs


def available(config: str) -> bool:
    """True when the configuration's policy module can be imported (the LP baselines are optional)."""
    module = POLICIES[get_config(config).policy].split(":")[0]
    try:
        importlib.import_module(f"tesserae_slurm.policies.{module}")
    except ModuleNotFoundError:
        return False
    return True


@functools.cache
def gavel_rate(jobs_per_hour_tesserae: float = 80.0) -> float:
    """Jobs/hour at which the Gavel-style trace offers the cluster the GPU-hours per hour that the
    Tesserae-style trace offers at 80 jobs/hour (the paper does not state the Gavel trace's rate)."""
    tess = load_shipped("tesserae-900")
    per_job_tess = sum(j.duration * j.num_gpus for j in tess) / len(tess)
    sample = generate_gavel(20_000, 80.0, 12345)
    per_job_gavel = sum(j.duration * j.num_gpus for j in sample) / len(sample)
    return round(jobs_per_hour_tesserae * per_job_tess / per_job_gavel, 1)


def studies(args: argparse.Namespace) -> list[Study]:
    n, cluster = args.jobs, args.cluster
    tess = "tesserae-900" if n == 900 else f"gen:tesserae:{n}:80:0"
    rate = gavel_rate()
    gavel = f"gen:gavel:{n}:{rate:g}:0"
    a100, v100 = f"{cluster}:a100", f"{cluster}:v100"
    return [
        Study("a100", "Tesserae-style trace on A100 (paper Figures 9 and 10a)", Setup(tess, a100, "a100"), MAIN),
        Study("ftf", "Finish-time fairness (paper Figure 12)", Setup(tess, a100, "a100"), FAIRNESS),
        Study("restart", "Restart overhead x3 (why migrations matter more on the paper's cluster)",
              Setup(tess, a100, "a100"), ("tesserae-t", "tesserae-t-nomig"), restart_scale=3.0),
        Study("noise", "Profiling noise (paper Figure 14)", Setup(tess, a100, "a100"), ("tesserae-t",),
              noise=NOISE_LEVELS, seeds=NOISE_SEEDS),
        Study("v100", "V100 with Gavel's throughput table (paper Figure 10b)", Setup(tess, v100, "gavel"), HARDWARE),
        Study("estimators", "Throughput estimators instead of the full table (paper Figure 16)",
              Setup(tess, a100, "a100"), ("tesserae-t",), plan=profiling.plan_estimators,
              extra={"budgets": args.budgets, "seeds": tuple(range(args.repeats))}),
        Study("parallelism", "LLM parallelism strategy (paper section 7.1, Figure 13)", Setup(tess, a100, "a100"),
              ("tesserae-t",), plan=profiling.plan_parallelism,
              extra={"shares": args.llm_shares, "seeds": tuple(range(args.repeats))}),
        Study("gavel-trace", "Gavel-style trace (paper Figure 15)", Setup(gavel, a100, "a100"), MAIN),  # slowest: last
        Study("slurm-a100", "Tesserae-style trace, A100", Setup(tess, a100, "a100"), SLURM, paper_plan=False),
        Study("slurm-gavel", "Gavel-style trace, A100", Setup(gavel, a100, "a100"), SLURM, paper_plan=False),
        Study("slurm-philly", f"Philly virtual cluster {PHILLY_VC.split('-')[1]}, V100",
              Setup(PHILLY_VC, PHILLY_CLUSTER, "gavel"), SLURM, paper_plan=False),
        Study("fairness", "Packing without victims (beyond the paper)", Setup(tess, a100, "a100"),
              (fairness.NEW,), plan=fairness.plan,
              extra={"setups": fairness.setups(n, cluster, rate, PHILLY_VC, PHILLY_CLUSTER),
                     "seeds": tuple(range(1, args.trace_seeds)), "gavel_on": ("a100", "gavel", "philly"),
                     "per_job": True}),
        Study("moves", "Moves that pay for themselves (beyond the paper)", Setup(tess, a100, "a100"),
              MOVES, plan=plan_moves, paper_plan=False,
              extra={"suites": (Setup(tess, a100, "a100"), Setup(gavel, a100, "a100"), Setup(tess, v100, "gavel"),
                                Setup(PHILLY_VC, PHILLY_CLUSTER, "gavel")),
                     "titles": ("Tesserae-style trace, A100", "Gavel-style trace, A100",
                                "Tesserae-style trace, V100 (Gavel's table)",
                                f"Philly virtual cluster {PHILLY_VC.split('-')[1]}, V100")}),
    ]


def plan_moves(study: Study, trace: Sequence[Any], name: str, cache: Any, fresh: bool, simulate: bool
               ) -> list[tuple[tuple[Any, ...], str, RunSpec]]:
    """Each suite of the document (the setups its sections simulate), every configuration of the study
    twice: with the paper's plan (every move free: before) and with moves that pay (after)."""
    out = []
    for k, s in enumerate(study.extra["suites"]):
        tr, nm = resolve_trace(s.trace, models=s.profile)
        for config in study.configs:
            for paper in (True, False):
                label = "paper" if paper else "paying"
                spec = RunSpec(tuple(tr), nm, s.cluster, config, s.profile, paper_plan=paper)
                out.append(((k, config, label), f"s{k}-{config}-{label}", spec))
    return out


SLURM_STUDIES = ("slurm-a100", "slurm-gavel", "slurm-philly")
