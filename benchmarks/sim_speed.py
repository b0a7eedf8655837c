"""Benchmark: wall time of a whole simulation (default: 900-job tesserae-900 trace, 80 A100 GPUs,
tesserae-t), median of several runs. Not a test: speed targets live here.

    .venv/bin/python benchmarks/sim_speed.py [--policy tesserae-t] [--trace tesserae-900]
                                              [--cluster 20x4:a100] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tesserae_slurm.model import Cluster
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.configs import get_config
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.trace_source import resolve_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="tesserae-t")
    ap.add_argument("--trace", default="tesserae-900")
    ap.add_argument("--cluster", default="20x4:a100")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    trace, name = resolve_trace(args.trace, models="a100")
    cluster, config, profile = Cluster.from_spec(args.cluster), get_config(args.policy), load_profile("a100")
    times, result = [], None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        result = simulate(trace, cluster, config, profile, trace_name=name)
        times.append(time.perf_counter() - t0)
    assert result is not None
    s = result.summary()
    out = {"policy": args.policy, "trace": name, "jobs": len(trace), "cluster": args.cluster,
           "rounds": s["rounds"], "median_s": statistics.median(times), "runs_s": times,
           "decision_ms_median": s["decision_ms"]["median"], "stages_ms_median": s["decision_ms"]["stages_median"]}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{args.policy} on {name} ({len(trace)} jobs), {args.cluster}: median {out['median_s']:.2f} s over "
              f"{args.repeats} runs ({', '.join(f'{t:.2f}' for t in times)}); {s['rounds']} rounds, "
              f"decision median {s['decision_ms']['median']:.1f} ms")


if __name__ == "__main__":
    main()
