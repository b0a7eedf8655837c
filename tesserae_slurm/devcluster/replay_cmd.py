"""`tesserae devcluster replay`: bring the cluster up with its plain partition, replay the trace once per
run (plain Slurm, or the daemon under a policy), and report each run beside the simulator's prediction.

The replaying and measuring are in replay.py; this is the command's shell: which cluster, where the
files go, what is printed, and that a cluster it brought up goes down again (also on an error or Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..model import InputError
from ..presets import get_config
from ..profiles import ThroughputProfile, profile_from_spec
from ..sim.metrics import SimResult
from ..sim.trace_source import resolve_trace
from ..slurm import SlurmError
from .cluster import DevCluster
from .errors import DevClusterError
from .replay import (
    JobMeasure,
    ReplayPlan,
    plan_replay,
    render_jobs,
    render_summary,
    replay_one,
    report_json,
    summarize_real,
    summarize_sim,
)
from .runs import DAEMON, PLAIN, RunError, Settings, bf_interval, cluster_for_runs

EXIT_INPUT, EXIT_FAILED = 2, 1
PROG = "tesserae devcluster replay"


def parse_modes(text: str) -> list[tuple[str, str]]:
    """``daemon:POLICY`` and ``plain``, comma-separated -> [(label, policy or "")]; InputError otherwise."""
    out: list[tuple[str, str]] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item == PLAIN:
            out.append((PLAIN, ""))
            continue
        kind, _, policy = item.partition(":")
        if kind != DAEMON or not policy:
            raise InputError(f"--mode takes plain or daemon:POLICY (comma-separated), got {item!r}")
        get_config(policy)
        out.append((item, policy))
    if not out:
        raise InputError("--mode names no run")
    if len({label for label, _ in out}) < len(out):
        raise InputError(f"--mode names a run twice: {text!r}")
    return out


Runs = dict[str, list[tuple[list[JobMeasure], SimResult, Settings]]]  # label -> one entry per repeat


def plan_from_args(cluster: DevCluster, args: argparse.Namespace) -> tuple[list[tuple[str, str]], ThroughputProfile,
                                                                         ReplayPlan]:
    """The runs, the profile and the plan the arguments ask for (InputError: one line, exit 2)."""
    modes = parse_modes(args.mode)
    profile = profile_from_spec(args.profile)
    trace, name = resolve_trace(args.trace, models="a100" if args.profile == "a100" else None)
    plan = plan_replay(trace, name, profile, scale=args.scale, nodes=cluster.nodes,
                       gpus_per_node=cluster.gpus_per_node, round_s=args.round, grace_s=args.grace,
                       jobs=args.replay_jobs, seed=args.seed)
    if any(importlib.util.find_spec(m) is None for m in ("yaml", "sqlalchemy")):  # before the cluster starts
        raise InputError("the daemon runs need the 'daemon' extra: pip install 'tesserae-slurm[daemon]'")
    return modes, profile, plan


def replay_runs(cluster: DevCluster, plan: ReplayPlan, profile: ThroughputProfile, modes: Sequence[tuple[str, str]],
                out: Path, *, repeats: int = 1, feedback: bool = True, install: bool = True, keep_up: bool = False,
                prog: str = PROG, on_run: Callable[[Runs], None] | None = None) -> Runs:
    """Every run ``repeats`` times in ``out/<label>[-<repeat>]``, on the cluster (brought up here when
    it is not up, and taken down again unless ``keep_up``); prints a line per run, and gives the runs
    so far to ``on_run`` after each (a report that survives a later run's failure)."""
    plain = cluster.plain_partition or "plain"
    base = Settings(partition=cluster.partition, plain_partition=plain)
    total = cluster.nodes * cluster.gpus_per_node
    runs: Runs = {label: [] for label, _ in modes}
    brought_up = False
    try:
        brought_up = cluster_for_runs(cluster, plain, install=install)
        out.mkdir(parents=True, exist_ok=True)
        out.chmod(0o755)
        print(f"dev cluster {cluster.root}: {cluster.nodes} nodes x {cluster.gpus_per_node} emulated GPUs; "
              f"trace {plan.name}: {len(plan.jobs)} jobs, scale {plan.scale:g} (a trace hour is "
              f"{3600 / plan.scale:.0f} s), rounds {plan.round_s:g} s and grace {plan.grace_s:g} s of trace time; "
              f"plain Slurm backfills every {bf_interval(cluster)} s", flush=True)
        for note in plan.notes:
            print(f"note: {note}", flush=True)
        for k in range(repeats):
            for label, policy in modes:
                where = label.replace(":", "-") + (f"-{k + 1}" if repeats > 1 else "")
                print(f"running {label}{f' ({k + 1} of {repeats})' if repeats > 1 else ''} ...", flush=True)
                measures, predicted, settings = replay_one(plan, profile, label, policy, cluster.env(), out / where,
                                                           base, feedback=feedback)
                runs[label].append((measures, predicted, settings))
                row = render_summary([(summarize_real(label, measures, plan.scale, total),
                                       summarize_sim(label, predicted, total))])
                print(row.splitlines()[-1], flush=True)
                if on_run is not None:
                    on_run(runs)
    finally:
        if brought_up and not keep_up:
            try:
                cluster.down()
            except DevClusterError as exc:
                print(f"{prog}: cleanup: {exc}", file=sys.stderr)
    return runs


def intro(plan: ReplayPlan) -> str:
    return "\n\n".join([
        f"Trace `{plan.name}` ({len(plan.jobs)} jobs) on `{plan.cluster_spec}` (emulated GPUs), scale "
        f"{plan.scale:g}, rounds {plan.round_s:g} s, grace {plan.grace_s:g} s; trace time. `sim`: the "
        "simulator's prediction of the same run; dev.: its deviation from the real run.",
        *(f"Note: {n}." for n in plan.notes)])


def run_replay(cluster: DevCluster, args: argparse.Namespace) -> int:
    try:
        modes, profile, plan = plan_from_args(cluster, args)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    out = Path(args.out or "out/devcluster-replay").resolve()
    try:
        runs = replay_runs(cluster, plan, profile, modes, out, feedback=not args.no_feedback,
                           install=not args.no_install, keep_up=args.keep_up)
    except (DevClusterError, RunError, SlurmError, InputError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    total = plan.nodes * plan.gpus_per_node
    results = {label: (m, r) for label, [(m, r, _)] in runs.items()}
    rows = [(summarize_real(label, m, plan.scale, total), summarize_sim(label, r, total))
            for label, (m, r) in results.items()]
    text = "\n\n".join([intro(plan), render_summary(rows), render_jobs(plan, results)])
    print("\n" + text)
    (out / "report.md").write_text(text + "\n")
    settings = {label: s for label, [(_, _, s)] in runs.items()}
    (out / "report.json").write_text(json.dumps(report_json(plan, results, settings), indent=1) + "\n")
    print(f"\nwrote {out / 'report.md'} and {out / 'report.json'}")
    ok = all(r.completed == r.jobs and r.work_conserved == r.jobs for r, _ in rows)
    return 0 if ok else EXIT_FAILED
