"""Benchmark: state database size and admin command latency after many rounds, with and without
retention (issue 22). Not a test: it writes two databases of up to a few hundred MB.

    .venv/bin/python benchmarks/retention.py [--rounds 10000] [--jobs 1000] [--nodes 64]
                                             [--rounds-days 7] [--jobs-days 7] [--max-rounds 0]
                                             [--repeats 3] [--dir DIR] [--json]

Rounds are 360 s apart, so 10,000 rounds span 41.7 days; two jobs end and two arrive every round.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from tesserae_slurm.bench.retention import run
from tesserae_slurm.daemon.config import RetentionSection


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10_000)
    p.add_argument("--jobs", type=int, default=1_000, help="active jobs at any time")
    p.add_argument("--nodes", type=int, default=64, help="4-GPU nodes (placed jobs per round = 4 x nodes)")
    p.add_argument("--rounds-days", type=float, default=7.0)
    p.add_argument("--jobs-days", type=float, default=7.0)
    p.add_argument("--max-rounds", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None, help="keep the databases here (default: a temp dir, removed)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    ret = RetentionSection(rounds_days=a.rounds_days, jobs_days=a.jobs_days, max_rounds=a.max_rounds)
    with tempfile.TemporaryDirectory(prefix="tesserae-bench-retention-") as tmp:
        work = Path(a.dir) if a.dir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        res = run(work, a.rounds, a.jobs, a.nodes, a.repeats, ret,
                  lambda t: print(f"bench retention: {t} ...", file=sys.stderr, flush=True))
    if a.json:
        print(json.dumps([dataclasses.asdict(r) for r in res], indent=1))
        return 0
    print(f"{a.rounds} rounds at {a.jobs} active jobs, {4 * a.nodes} GPUs; admin commands: median of {a.repeats}")
    for r in res:
        print(f"\n{r.label}: {r.rounds_kept} rounds and {r.jobs_kept} job rows kept, database {r.size_mb:.1f} MB "
              f"(built in {r.build_s:.0f} s)" + (f"; prune per round median {r.prune_ms_median:.2f} ms, "
                                                 f"max {r.prune_ms_max:.1f} ms" if r.prune_ms_max else ""))
        for name, s in r.commands.items():
            print(f"  tesserae {name:<22} {s:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
