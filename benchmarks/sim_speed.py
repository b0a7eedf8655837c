"""Benchmark: wall and CPU time of a whole simulation (default: 900-job tesserae-900 trace, 80 A100
GPUs, tesserae-t), median of several runs. Not a test: speed targets live here.

    .venv/bin/python benchmarks/sim_speed.py [--policy tesserae-t] [--trace tesserae-900]
                                              [--cluster 20x4:a100] [--profile a100|gavel|PATH]
                                              [--repeats 3] [--json]
    .venv/bin/python benchmarks/sim_speed.py --trace philly --cluster 125x4:v100 --repeats 1   # issue 6: <= 60 s

CPU time is reported beside wall time: on a shared VM the wall time of the same run varies by tens of
percent with the host's load, the process's CPU time much less.

A/B against another commit, in the same run (the development VM's speed drifts by up to 1.5x within
an hour, so only runs side by side compare):

    .venv/bin/python benchmarks/sim_speed.py --trace philly --cluster 125x4:v100 --against 8066a64 --pairs 2

checks REV out into a temporary git worktree, warms both trees' numba caches, then runs the two
trees alternately (REV first in odd pairs, this tree first in even ones), one simulation per process,
and reports each tree's median and the median of the pairwise ratios this / REV.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tesserae_slurm import rank_decide
from tesserae_slurm.cli.gc_tuning import long_run_gc
from tesserae_slurm.presets import get_config
from tesserae_slurm.model import Cluster
from tesserae_slurm.profiles import profile_from_spec
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.trace_source import resolve_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="tesserae-t")
    ap.add_argument("--trace", default="tesserae-900")
    ap.add_argument("--cluster", default="20x4:a100")
    ap.add_argument("--profile", default="", help="a100 | gavel | PATH (default: a100 when every node is a100, "
                                                  "else gavel, as `tesserae simulate`)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--against", metavar="REV", help="also time git commit REV, alternately, and report ratios")
    ap.add_argument("--pairs", type=int, default=2, help="with --against: runs of each tree (default 2)")
    args = ap.parse_args()
    if args.against:
        _against(args)
        return
    cluster, config = Cluster.from_spec(args.cluster), get_config(args.policy)
    spec = args.profile or ("a100" if set(cluster.gpu_types) <= {"a100"} else "gavel")
    trace, name = resolve_trace(args.trace, models=spec if spec in ("a100", "gavel") else None)
    profile = profile_from_spec(spec)
    times, cpu, result = [], [], None
    engine_s = _time_engine_calls()
    for _ in range(args.repeats):
        engine_s[0] = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        with long_run_gc():  # as `tesserae simulate` runs it
            result = simulate(tuple(trace), cluster, config, profile, trace_name=name)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert result is not None
    s = result.summary()
    # where the last run's time went: the stages each round timed, the engine calls as a whole, and the
    # rest (the shell's own work: job views, progress, accounting, fast-forward)
    stage_s = {k: sum(getattr(r, f"{k}_ms") for r in result.rounds) / 1e3
               for k in ("scheduling", "placement", "packing", "migration")}
    out = {"policy": args.policy, "trace": name, "jobs": len(trace), "cluster": args.cluster, "profile": spec,
           "rounds": s["rounds"], "decided_rounds": s["decided_rounds"], "median_s": statistics.median(times),
           "median_cpu_s": statistics.median(cpu), "runs_s": times, "runs_cpu_s": cpu,
           "decision_ms_median": s["decision_ms"]["median"], "stages_ms_median": s["decision_ms"]["stages_median"],
           "stage_totals_s": stage_s, "engine_calls_s": engine_s[0],
           "shell_s": times[-1] - engine_s[0] - stage_s["scheduling"]}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{args.policy} on {name} ({len(trace)} jobs), {args.cluster}: median {out['median_s']:.2f} s wall, "
              f"{out['median_cpu_s']:.2f} s CPU over {args.repeats} runs ({', '.join(f'{t:.2f}' for t in times)}); "
              f"{s['rounds']} rounds, {s['decided_rounds']} decided by the engine, "
              f"decision median {s['decision_ms']['median']:.1f} ms")
        print(f"last run: engine calls {engine_s[0]:.1f} s (placement {stage_s['placement']:.1f}, packing "
              f"{stage_s['packing']:.1f}, migration {stage_s['migration']:.1f}, the rest building the decision), "
              f"policy ranking {stage_s['scheduling']:.1f} s, the rest of the shell {out['shell_s']:.1f} s")


def _against(args: argparse.Namespace) -> None:
    """Alternate runs of this tree and of commit ``args.against`` (argv lists, no shell)."""
    here = Path(__file__).resolve().parents[1]
    rev = subprocess.run(["git", "-C", str(here), "rev-parse", "--verify", args.against + "^{commit}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        raise SystemExit(f"sim_speed: --against: not a commit: {args.against!r}")
    base = Path(tempfile.mkdtemp(prefix="sim-speed-")) / "tree"
    subprocess.run(["git", "-C", str(here), "worktree", "add", "--detach", str(base), rev.stdout.strip()],
                   check=True, capture_output=True)
    common = ["--policy", args.policy, "--trace", args.trace, "--cluster", args.cluster, "--repeats", "1", "--json"]
    if args.profile:
        common += ["--profile", args.profile]

    def run(tree: Path, extra: list[str]) -> dict:
        env = dict(os.environ, PYTHONPATH=str(tree))
        out = subprocess.run([sys.executable, str(tree / "benchmarks" / "sim_speed.py"), *extra], cwd=tree, env=env,
                             check=True, capture_output=True, text=True)
        return json.loads(out.stdout)

    try:
        for tree in (base, here):  # compile or load each tree's numba cores outside the timed runs
            run(tree, ["--repeats", "1", "--json"])
        times: dict[str, list[float]] = {"this": [], "rev": []}
        splits: dict[str, list[dict]] = {"this": [], "rev": []}  # each run's engine / stage / shell seconds
        for i in range(args.pairs):
            order = [("rev", base), ("this", here)] if i % 2 == 0 else [("this", here), ("rev", base)]
            for label, tree in order:
                got = run(tree, common)
                times[label].append(got["median_s"])
                splits[label].append({k: got[k] for k in ("engine_calls_s", "stage_totals_s", "shell_s")})
                print(f"{label} {times[label][-1]:.2f} s (engine {got['engine_calls_s']:.1f} s, placement "
                      f"{got['stage_totals_s']['placement']:.1f}, packing {got['stage_totals_s']['packing']:.1f}, "
                      f"migration {got['stage_totals_s']['migration']:.1f}, ranking "
                      f"{got['stage_totals_s']['scheduling']:.1f}, shell {got['shell_s']:.1f})", file=sys.stderr,
                      flush=True)
    finally:
        subprocess.run(["git", "-C", str(here), "worktree", "remove", "--force", str(base)], capture_output=True)
        shutil.rmtree(base.parent, ignore_errors=True)
    ratios = [a / b for a, b in zip(times["this"], times["rev"])]
    out = {"against": args.against, "trace": args.trace, "cluster": args.cluster, "runs_s": times, "splits": splits,
           "median_s": {k: statistics.median(v) for k, v in times.items()}, "ratios": ratios,
           "median_ratio": statistics.median(ratios)}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{args.trace} on {args.cluster}: this tree median {out['median_s']['this']:.2f} s, "
              f"{args.against} median {out['median_s']['rev']:.2f} s; this / {args.against} = "
              f"{out['median_ratio']:.3f} (pairs: {', '.join(f'{r:.3f}' for r in ratios)})")


def _time_engine_calls() -> list[float]:
    """Total seconds inside ``engine.decide`` as the simulator calls it (through ``rank_and_decide``;
    the stage clocks leave out the decision's assembly), so the run splits into engine, policy and the
    rest of the shell."""
    total = [0.0]
    decide = rank_decide.decide

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return decide(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - t0

    rank_decide.decide = timed  # type: ignore[assignment]
    return total


if __name__ == "__main__":
    main()
