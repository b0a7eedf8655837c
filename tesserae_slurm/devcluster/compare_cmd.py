"""`tesserae devcluster compare`: bring the cluster up with its plain partition, run both modes, report.

The measuring is in compare.py; this is the command's shell: which cluster, where the files go, what
is printed, and that a cluster it brought up goes down again (also on an error or Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from ..model import InputError
from ..slurm import SlurmError
from .cluster import DevCluster
from .compare import (
    JobResult,
    generate_jobs,
    policy_options,
    render_jobs,
    render_summary,
    report_json,
    run_mode,
    summarize,
)
from .errors import DevClusterError
from .runs import DAEMON, MODES, PLAIN, RunError, Settings, bf_interval, cluster_for_runs

EXIT_INPUT, EXIT_FAILED = 2, 1


def run_compare(cluster: DevCluster, args: argparse.Namespace) -> int:
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        print(f"tesserae devcluster compare: error: --modes takes {' and/or '.join(MODES)}, got {args.modes!r}",
              file=sys.stderr)
        return EXIT_INPUT
    try:
        jobs = generate_jobs(args.jobs, args.seed, gpus_per_node=cluster.gpus_per_node, min_s=args.min_duration,
                             max_s=args.max_duration, mean_gap_s=args.mean_gap)
    except ValueError as exc:
        print(f"tesserae devcluster compare: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if any(importlib.util.find_spec(m) is None for m in ("yaml", "sqlalchemy")):  # before the cluster starts
        print("tesserae devcluster compare: error: the daemon run needs the 'daemon' extra: "
              "pip install 'tesserae-slurm[daemon]'", file=sys.stderr)
        return EXIT_INPUT
    plain = cluster.plain_partition or "plain"
    base = Settings(partition=cluster.partition, plain_partition=plain, round_seconds=args.round_seconds,
                    grace_seconds=args.grace_seconds)
    runs: dict[str, Settings] = {}  # label -> settings, in the order they run
    try:
        for mode in modes:
            if mode == PLAIN:
                runs[PLAIN] = base
                continue
            for policy in [p.strip() for p in str(args.policy).split(",") if p.strip()]:
                runs[f"{DAEMON}:{policy}"] = replace(base, policy=policy, policy_options=policy_options(policy))
    except InputError as exc:
        print(f"tesserae devcluster compare: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    out = Path(args.out or "out/devcluster-compare").resolve()
    results: dict[str, list[JobResult]] = {}
    brought_up = False
    try:
        brought_up = cluster_for_runs(cluster, plain, install=not args.no_install)
        out.mkdir(parents=True, exist_ok=True)
        out.chmod(0o755)
        print(f"dev cluster {cluster.root}: {cluster.nodes} nodes x {cluster.gpus_per_node} fake GPUs; "
              f"plain Slurm in partition {plain!r} (backfill every {bf_interval(cluster)} s), the daemon in "
              f"{base.partition!r} ({base.round_seconds:g} s rounds, {base.grace_seconds:g} s grace); "
              f"{len(jobs)} jobs, seed {args.seed}", flush=True)
        for label, settings in runs.items():
            workdir = out / label.replace(":", "-")
            shutil.rmtree(workdir, ignore_errors=True)  # a stale checkpoint of a reused job id would resume
            workdir.mkdir(parents=True)
            workdir.chmod(0o755)
            mode = PLAIN if label == PLAIN else DAEMON
            print(f"running the job set under {'plain Slurm' if mode == PLAIN else f'the daemon ({settings.policy})'}"
                  " ...", flush=True)
            results[label] = run_mode(mode, jobs, cluster.env(), workdir, settings)
            print(render_summary([summarize(label, results[label])]).splitlines()[-1], flush=True)
    except (DevClusterError, RunError, SlurmError, InputError) as exc:
        print(f"tesserae devcluster compare: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if brought_up and not args.keep_up:
            try:
                cluster.down()
            except DevClusterError as exc:
                print(f"tesserae devcluster compare: cleanup: {exc}", file=sys.stderr)
    summaries = [summarize(m, rs) for m, rs in results.items()]
    text = "\n\n".join([render_summary(summaries), render_jobs(jobs, results)])
    print("\n" + text)
    (out / "report.md").write_text(text + "\n")
    shape = {"nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node, "seed": args.seed}
    (out / "report.json").write_text(json.dumps(report_json(jobs, results, runs, shape), indent=1) + "\n")
    print(f"\nwrote {out / 'report.md'} and {out / 'report.json'}")
    return 0 if all(s.completed == s.jobs for s in summaries) else EXIT_FAILED
