"""`tesserae simulate` and `tesserae compare`: what-if studies on traces with the daemon's engine."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from ..model import Cluster, InputError
from ..model.gpu_limits import GpuLimits, limits_from
from ..presets import CONFIGS, get_config
from ..profiles import profile_from_spec
from ..sim.compare import CROSS_USER_CHOICES, RunSpec, run_many, write_report
from ..sim.restart import RestartCost
from ..sim.strategies import LLM_STRATEGIES
from ..sim.trace_source import resolve_trace
from .gc_tuning import long_run_gc
from .jsonio import dump_json
from .progress import Progress
from .render import table

# the paper's comparison, the daemon's default (tesserae-t-fair) and plain Slurm
DEFAULT_COMPARE = ("tiresias", "tiresias-single", "tesserae-t", "tesserae-t-fair", "tesserae-t-nomig", "slurm-backfill")
TRACE_HELP = ("trace file (CSV, Gavel/Shockwave/Philly .trace), a shipped name (demo, sample, tesserae-900, "
              "shockwave-120) or gen:tesserae|gavel:JOBS[:RATE[:SEED]] (default: demo)")


def add_common(p: argparse.ArgumentParser, *, cluster: str = "20x4:a100", trace: str = "demo") -> None:
    p.add_argument("--trace", default=trace, help=TRACE_HELP)
    p.add_argument("--cluster", default=cluster, help=f"NODESxGPUS[:TYPE][,...] (default {cluster})")
    p.add_argument("--profile", default=None,
                   help="a100 | gavel | PATH (default: a100 when every node is a100, else gavel)")
    p.add_argument("--round", type=float, default=360.0, dest="round_s", help="round length in seconds (360)")
    p.add_argument("--seed", type=int, default=0, help="seed for profile noise and randomized policies (0)")
    p.add_argument("--noise", type=float, default=0.0,
                   help="profile noise n in [0, 1]: decisions see values x U[1-n, 1+n]; true values drive progress")
    p.add_argument("--restart-s", type=float, default=None, metavar="S",
                   help="restart overhead of every model, seconds (default: 30, LLMs 90; docs/simulator.md)")
    p.add_argument("--restart-model", action="append", default=[], metavar="MODEL=S",
                   help="restart overhead of one model (repeatable)")
    p.add_argument("--decision-profile", default="", metavar="PROFILE",
                   help="what the scheduler decides with, e.g. a table completed by `tesserae estimate fill` "
                        "(default: --profile); --profile stays the truth that drives progress")
    p.add_argument("--llm-strategy", default="best", choices=LLM_STRATEGIES,
                   help="LLM parallelism the engine may choose: best (default), dp or default-pp when packed, "
                        "default-pp-always (docs/simulator.md)")
    p.add_argument("--min-speed", type=float, default=0.0, metavar="M",
                   help="pack a pair only if each job keeps at least M of its speed alone (0-1; default 0: any "
                        "pair that raises throughput; the daemon's packing.min_speed)")
    p.add_argument("--cross-user", default="timeslice", choices=CROSS_USER_CHOICES,
                   help="pairs of two users' jobs (the trace's user column), which time-slice a GPU: score them "
                        "with the profile's time-sliced speeds (timeslice, default), with the MPS speeds of one "
                        "user's pair (mps), or never pack them (never); progress uses time-sliced speeds always")
    p.add_argument("--paper-plan", action="store_true",
                   help="every move free: the consolidated placement rebuilt each round and relabeled, as the paper "
                        "publishes it (default: a move or preemption only when it pays for its restart)")
    p.add_argument("--check", action="store_true", help="check invariants on every round (slower)")
    p.add_argument("--limits", default="", metavar="YAML",
                   help="per-user/account GPU limits: a file with a `limits:` mapping, as the daemon's config "
                        "(the trace's user and account columns count against them)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="simulate one policy configuration on a trace")
    add_common(s)
    s.add_argument("--policy", default="tesserae-t", help=f"configuration: {', '.join(CONFIGS)} (tesserae-t)")
    s.add_argument("--policy-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="policy option, VALUE as JSON (e.g. promote_knob=2, queue_limits=[3600]); repeatable")
    s.add_argument("--json", metavar="OUT", help="write the result JSON here ('-' for stdout)")
    s.set_defaults(func=run_simulate)

    c = sub.add_parser("compare", help="simulate several configurations on the same trace and write a report")
    add_common(c)
    c.add_argument("--policies", default=",".join(DEFAULT_COMPARE),
                   help=f"comma-separated (default {','.join(DEFAULT_COMPARE)}); known: {', '.join(CONFIGS)}")
    c.add_argument("--out", default="out/compare", help="report directory (default out/compare)")
    c.add_argument("--workers", type=int, default=None, help="parallel processes (default: CPU count)")
    c.set_defaults(func=run_compare)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{what}: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def restart_from_args(args: argparse.Namespace) -> RestartCost:
    base = RestartCost() if args.restart_s is None else RestartCost.uniform(args.restart_s)
    overrides = {}
    for model, text in _pairs(args.restart_model, "--restart-model").items():
        try:
            overrides[model] = float(text)
        except ValueError:
            raise InputError(f"--restart-model {model}: expected seconds, got {text!r}") from None
    return base.with_overrides(overrides)


def specs_from_args(args: argparse.Namespace, policies: list[str],
                    policy_options: dict[str, Any] | None = None) -> list[RunSpec]:
    """One RunSpec per policy; validates every argument first (InputError: one line, exit 2)."""
    unknown = [p for p in policies if p not in CONFIGS]
    if unknown or not policies:
        raise InputError(f"unknown policy configuration(s) {', '.join(unknown) or '(none given)'}; "
                         f"known: {', '.join(CONFIGS)}")
    if not (args.round_s > 0 and math.isfinite(args.round_s)):
        raise InputError(f"--round must be > 0 seconds, got {args.round_s:g}")
    if not 0.0 <= args.noise <= 1.0:
        raise InputError(f"--noise must be in [0, 1], got {args.noise:g}")
    min_speed = getattr(args, "min_speed", 0.0)
    if not 0.0 <= min_speed <= 1.0:
        raise InputError(f"--min-speed must be in [0, 1], got {min_speed:g}")
    cluster = Cluster.from_spec(args.cluster)
    profile = args.profile or ("a100" if set(cluster.gpu_types) <= {"a100"} else "gavel")
    models = profile.lower() if profile.lower() in ("a100", "gavel") else None
    trace, name = resolve_trace(args.trace, models=models)
    if not len(trace):
        raise InputError(f"trace {name}: no jobs")
    restart = restart_from_args(args)
    decision = getattr(args, "decision_profile", "") or ""
    if decision:
        profile_from_spec(decision)  # fail here with one line, not in a worker process
    limits = limits_file(args.limits) if getattr(args, "limits", "") else None
    return [RunSpec(tuple(trace), name, args.cluster, p, profile, args.round_s, args.seed, args.noise,
                    args.check, restart, tuple(sorted((policy_options or {}).items())), decision,
                    getattr(args, "llm_strategy", "best"), limits, min_speed,
                    cross_user=getattr(args, "cross_user", "timeslice"), paper_plan=getattr(args, "paper_plan", False))
            for p in policies]


def limits_file(path: str) -> GpuLimits | None:
    """The ``limits:`` mapping of a YAML file (the daemon's config works as is)."""
    try:
        import yaml
    except ImportError:
        raise InputError("--limits needs PyYAML: pip install 'tesserae-slurm[daemon]'") from None
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--limits {path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise InputError(f"--limits {path}: malformed YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict) or "limits" not in raw:
        raise InputError(f"--limits {path}: no top-level `limits:` mapping")
    return limits_from(raw["limits"], f"--limits {path}")


def _policy_options(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, text in _pairs(items, "--policy-opt").items():
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def run_simulate(args: argparse.Namespace) -> int:
    spec = specs_from_args(args, [args.policy], _policy_options(args.policy_opt))[0]
    get_config(spec.policy)
    bar = Progress(args.policy, len(spec.trace))
    from ..sim.compare import run_one
    try:
        with long_run_gc():
            res = run_one(spec, on_round=bar)
    finally:
        bar.close()
    if args.json == "-":
        dump_json(res.to_json())
        return 0
    if args.json:
        out = Path(args.json)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(res.to_json(), indent=1))
        except OSError as exc:
            raise InputError(f"{out}: cannot write ({exc.strerror})") from None
    print(summary_table([res.summary()]))
    if args.json:
        print(f"\nresult: {args.json}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if len(set(policies)) != len(policies):
        raise InputError(f"--policies lists a configuration twice: {args.policies}")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    specs = specs_from_args(args, policies)
    print(f"comparing {len(policies)} configurations on {specs[0].trace_name} ({len(specs[0].trace)} jobs), "
          f"cluster {args.cluster}, round {args.round_s:g} s ...", file=sys.stderr, flush=True)

    def progress(done: int, total: int, spec: RunSpec, seconds: float) -> None:
        print(f"compare: {done}/{total} runs done ({spec.policy}), {seconds:.1f} s", file=sys.stderr, flush=True)

    with long_run_gc():  # forked workers inherit the settings
        results = run_many(specs, workers=args.workers, on_done=progress)
    out = Path(args.out)
    write_report(results, out, title=f"{specs[0].trace_name} on {args.cluster}")
    print(summary_table([r.summary() for r in results]))
    print(f"\nreport: {out / 'report.md'} (plots and results.json beside it)")
    return 0


def summary_table(summaries: list[dict[str, Any]]) -> str:
    base = summaries[0]["avg_jct_s"]
    rows = [[s["policy"], f"{s['avg_jct_s'] / 3600:.2f}", f"{base / s['avg_jct_s']:.2f}x",
             f"{s['makespan_s'] / 3600:.2f}", s["migrations"], s["preemptions"], f"{s['ftf']['worst']:.2f}",
             f"{s['ftf']['median']:.2f}", f"{s['gpu_utilization']:.0%}",
             f"{s['decision_ms']['median']:.1f}/{s['decision_ms']['p99']:.1f}"] for s in summaries]
    return table(["POLICY", "AVG_JCT_H", "VS_FIRST", "MAKESPAN_H", "MIGRATIONS", "PREEMPTIONS", "FTF_WORST",
                  "FTF_MEDIAN", "GPU_UTIL", "DECISION_MS(med/p99)"], rows)
