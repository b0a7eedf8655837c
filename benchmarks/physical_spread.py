"""Analysis: how far the simulator's prediction of a replay moves with where its rounds fall against the
arrivals, beside the real runs (docs/results.md, section 11).

    python benchmarks/physical_spread.py OUT [--label daemon:tesserae-t ...] [--phases 24]

OUT is a `tesserae bench physical` directory (its report.json and run directories; read only). The
prediction (`replay.predict`, as `--from-dir` makes it) begins its first round at the first submission;
a real run's rounds tick on the daemon's clock, which began before it (the replay submits once the
daemon's first round has ended), so each run's rounds fall elsewhere against the arrivals. The simulator
is deterministic and the decisions are not smooth in that: which arrivals a round sees, and which running
job crosses a Tiresias limit just before a round rather than just after, change the next moves, and
those change the ones after. Here the first round begins PHASE trace seconds before the first submission,
for PHASES phases spread over one round and at each real run's own offset (its first round's start
less its first submission, from its state database), and a cluster left idle waits for the next round
instead of jumping to the next arrival, as the daemon's clock does. Everything else is the prediction's.
Prints, per daemon configuration, the real runs, the prediction, and the mean, standard deviation and
range over the phases of avg JCT, makespan, preemptions and migrations. Not a test.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tesserae_slurm.sim.runner as runner
from tesserae_slurm.bench.physical import run_dir, runs_from_report
from tesserae_slurm.devcluster.replay import predict
from tesserae_slurm.profiles import profile_from_spec

Row = tuple[float, float, float, float]  # avg JCT (h), makespan (h), preemptions, migrations
_phase: list[float | None] = [None]  # None: the prediction as it is
_init, _admit = runner._Run.__init__, runner._Run.admit_arrivals


def _init_on_grid(self: Any, *args: Any, **kw: Any) -> None:
    _init(self, *args, **kw)
    if _phase[0] is not None:
        self.grid0 = self.now - _phase[0]
        self.now = self.grid0


def _admit_on_grid(self: Any) -> bool:
    before = self.now
    arrived: bool = _admit(self)
    if _phase[0] is not None and self.now != before:  # idle: the next round, not the next arrival
        self.now = self.grid0 + math.ceil((self.now - self.grid0) / self.round_s - 1e-9) * self.round_s
    return arrived


def real_phase(where: Path, first_submit: float, scale: float) -> float:
    """Trace seconds from a real run's first round to its first submission."""
    db = sqlite3.connect(f"file:{where / 'state.db'}?mode=ro", uri=True)
    try:
        (first,) = db.execute("SELECT min(started_at) FROM rounds WHERE kind = 'round'").fetchone()
    finally:
        db.close()
    return (first_submit - float(first)) * scale


def _row(res: Any) -> Row:
    return (statistics.fmean(j.jct for j in res.jobs) / 3600, res.makespan / 3600,
            float(res.preemptions), float(res.migrations))


def _real_row(measures: Sequence[Any], scale: float) -> Row:
    ends = [m.end for m in measures if m.end is not None]
    if len(ends) < len(measures):
        raise SystemExit("a real run left a job unfinished: its JCT and the makespan are not known")
    return (statistics.fmean((e - m.submit) * scale for e, m in zip(ends, measures)) / 3600,
            (max(ends) - min(m.submit for m in measures)) * scale / 3600,
            float(sum(m.preemptions for m in measures)), float(sum(m.migrations for m in measures)))


def _line(name: str, rows: Sequence[Row]) -> str:
    if len(rows) == 1:
        return f"| {name} | " + " | ".join(f"{v:.2f}" if k < 2 else f"{v:.0f}" for k, v in enumerate(rows[0])) + " |"
    cells = []
    for k in range(4):
        v = [r[k] for r in rows]
        d = 2 if k < 2 else 0
        cells.append(f"{statistics.fmean(v):.{d}f} ± {statistics.stdev(v):.{d}f} ({min(v):.{d}f}-{max(v):.{d}f})")
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--label", action="append", help="daemon configurations (default: every one)")
    p.add_argument("--phases", type=int, default=24, help="phases spread evenly over one round")
    a = p.parse_args()
    modes, plan, runs, asked = runs_from_report(a.out, "a100", 0)
    profile = profile_from_spec("a100")
    runner._Run.__init__ = _init_on_grid  # type: ignore[method-assign]
    runner._Run.admit_arrivals = _admit_on_grid  # type: ignore[method-assign]
    for label, policy in modes:
        if label == "plain" or (a.label and label not in a.label):
            continue
        settings = runs[label][0][2]

        def at(phase: float | None, policy: str = policy, settings: Any = settings) -> Row:
            _phase[0] = phase
            return _row(predict(plan, "daemon", policy, profile, settings=settings))

        real = [_real_row(ms, plan.scale) for ms, _, _ in runs[label]]
        offsets = [real_phase(run_dir(a.out, label, k, asked), min(m.submit for m in ms), plan.scale)
                   for k, (ms, _, _) in enumerate(runs[label])]
        step = plan.round_s / a.phases
        spread = [at(step * (k + 0.5)) for k in range(a.phases)]
        own = [at(o) for o in offsets]
        print(f"\n## {label}\n")
        print("| | avg JCT (h) | makespan (h) | preemptions | migrations |")
        print("|---|---|---|---|---|")
        print(_line(f"real runs ({len(real)})", real))
        print(_line("prediction (first round at the first submission)", [at(None)]))
        print(_line(f"{a.phases} phases over a round", spread))
        print(_line("the real runs' own phases (" + ", ".join(f"{o:.0f} s" for o in offsets) + ")", own))


if __name__ == "__main__":
    main()
