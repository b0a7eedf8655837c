"""`scripts/reproduce_results.py` (or ``python -m tesserae_slurm.results``): regenerate docs/results.md.

    .venv/bin/python scripts/reproduce_results.py                 # everything (about 5 minutes)
    .venv/bin/python scripts/reproduce_results.py --only a100,noise
    .venv/bin/python scripts/reproduce_results.py --jobs 12 --cluster 1x4 --out /tmp/r.md   # smoke run
    .venv/bin/python scripts/reproduce_results.py --only estimators,parallelism   # sections 6 and 7 only

Every simulation's summary is cached under ``--cache`` (default out/reproduce; ``runner.py``), so an
interrupted run resumes and the document can be re-rendered without re-simulating. Configurations
whose policy module is missing are reported as not run.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from . import profile_studies as profiling
from .render import FAIR_TITLE, MOVES_TITLE, ROOT, render, render_fairness, render_moves, render_slurm, splice
from .runner import run_study
from .studies import SLURM_STUDIES, studies

log = logging.getLogger("reproduce")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "results.md"))
    ap.add_argument("--cache", default=str(ROOT / "out" / "reproduce"))
    ap.add_argument("--jobs", type=int, default=900, help="jobs per trace (900; fewer for a smoke run)")
    ap.add_argument("--cluster", default="20x4", help="NODESxGPUS without type (20x4 = 80 GPUs)")
    ap.add_argument("--only", default="",
                    help="comma-separated studies to simulate: a100, restart, ftf, noise, v100, estimators, "
                         "parallelism, gavel-trace, slurm-a100, slurm-gavel, slurm-philly, fairness, moves")
    ap.add_argument("--budgets", default=",".join(map(str, profiling.BUDGETS)),
                    help="estimators study: strategies measured per LLM search problem (2,3,4,6)")
    ap.add_argument("--llm-shares", default=",".join(f"{x:g}" for x in profiling.LLM_SHARES),
                    help="parallelism study: shares of the 2- and 4-GPU jobs that are LLMs (0.2,0.4,0.6,0.8)")
    ap.add_argument("--repeats", type=int, default=5, help="seeds per point of the estimators and parallelism studies")
    ap.add_argument("--trace-seeds", type=int, default=5,
                    help="fairness study: trace seeds 0..N-1 of the generated traces (5)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fresh", action="store_true", help="ignore cached results")
    ap.add_argument("--render-only", action="store_true", help="simulate nothing; write the document from the cache")
    ap.add_argument("--splice", action="store_true",
                    help="replace only section 8 (Against plain Slurm), or with --only fairness section 9, or with "
                         "--only moves section 10, of the existing --out document")
    args = ap.parse_args(argv)
    try:
        args.budgets = tuple(int(x) for x in args.budgets.split(",") if x.strip())
        args.llm_shares = tuple(float(x) for x in args.llm_shares.split(",") if x.strip())
    except ValueError:
        ap.error("--budgets takes integers and --llm-shares numbers, comma-separated")
    if args.repeats < 1 or not args.budgets or any(b < 1 for b in args.budgets) or not args.llm_shares \
            or any(not 0.0 <= x <= 1.0 for x in args.llm_shares):
        ap.error("--repeats and budgets must be >= 1, LLM shares in [0, 1]")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    every = studies(args)
    unknown = set(filter(None, args.only.split(","))) - {s.key for s in every}
    if unknown:
        ap.error(f"unknown studies {sorted(unknown)}; known: {', '.join(s.key for s in every)}")
    t0 = time.perf_counter()
    alone = args.only.split(",")[0] if args.only.split(",") in (["fairness"], ["moves"]) else ""
    if args.splice:  # section 8 (or 9, or 10) alone, into the document as it stands
        every = [s for s in every if s.key in ((alone,) if alone else SLURM_STUDIES)]
    for study in every:  # --only limits what is simulated; the document shows everything cached
        wanted = not args.render_only and (not args.only or study.key in args.only.split(","))
        run_study(study, cache, args.workers, args.fresh, simulate=wanted)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if args.splice:
        old = Path(args.out).read_text() if Path(args.out).exists() else ""
        by = {s.key: s for s in every}
        if alone == "fairness":
            new = splice(old, render_fairness(by, Path(args.out)), FAIR_TITLE)
        elif alone == "moves":
            new = splice(old, render_moves(by), MOVES_TITLE)
        else:
            new = splice(old, render_slurm(by))
        Path(args.out).write_text(new)
    else:
        Path(args.out).write_text(render(every, args, time.perf_counter() - t0))
    log.info("wrote %s", args.out)
    return 0

