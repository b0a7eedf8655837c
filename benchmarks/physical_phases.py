"""Analysis: where each job's time went in the physical experiment's real runs and in the simulator's
prediction of them, phase by phase, to find what the simulator misses (docs/results.md, section 11).

    python benchmarks/physical_phases.py OUT [--label daemon:tiresias ...] [--jobs]

OUT is a `tesserae bench physical` directory (its report.json and run directories; read only). Per
daemon configuration, per job and averaged over the jobs, in trace hours: the wait before the first
start, the gaps between a run's end and the next start, the time in runs (warm-up of a resume
included) and the number of runs; JCT = wait + runs + gaps on both sides. The real side is read from
the emulated jobs' events (start, checkpoint, done); the simulator's is the current prediction
(`replay.predict`, as `--from-dir` makes it), whose rounds this script records by wrapping the
simulator's round (`sim.runner.run_round`): a run begins at its round plus the job's delay
(``sim/overheads.py``; negative: it started between rounds) and ends at the round that stops it or
where it finishes. ``--jobs`` lists the jobs whose number of runs the prediction gets wrong in every
real run. Not a test: it prints tables.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tesserae_slurm.sim.runner as runner
from tesserae_slurm.bench.physical import run_dir, runs_from_report
from tesserae_slurm.devcluster.replay import predict
from tesserae_slurm.devcluster.runs import read_events
from tesserae_slurm.profiles import profile_from_spec

Run = tuple[float, float, float]  # (begin, warm-up, end), seconds
PHASES = ("jct", "queue", "gaps", "run", "runs")
_rounds: list[tuple[float, Any, dict[str, float], dict[str, float | None], dict[str, float]]] = []
_run_round = runner.run_round


def _recording(decision: Any, live: Any, cols: Any, speeds: Any, restart: Any, round_s: float, now: float,
               views: Any, steady: Any = None, delays: Mapping[str, float] | None = None) -> Any:
    res = _run_round(decision, live, cols, speeds, restart, round_s, now, views, steady, delays)
    resumes = {j: restart.of(live[j].job.model) for j in decision.placement.job_nodes() if j in live}
    _rounds.append((now, decision, dict(delays or {}), {j: o.finish for j, o in res.outcomes.items()}, resumes))
    return res


def sim_runs() -> dict[str, list[Run]]:
    """Each job's runs in the recorded simulation."""
    runs: dict[str, list[Run]] = {}
    open_: dict[str, tuple[float, float]] = {}
    for now, d, delays, finish, resume in _rounds:
        for j in (*d.preempted, *d.migrated):
            if j in open_:
                b, w = open_.pop(j)
                runs.setdefault(j, []).append((b, w, now))
        for j in (*d.started, *d.migrated):
            resumed = j in d.migrated or bool(runs.get(j))
            open_[j] = (now + delays.get(j, 0.0), resume.get(j, 0.0) if resumed else 0.0)
        for j, f in finish.items():
            if j in open_ and f is not None:
                b, w = open_.pop(j)
                runs.setdefault(j, []).append((b, w, now + f))
    return runs


def real_runs(events: Sequence[Mapping[str, Any]], scale: float, restart_s: float) -> list[Run]:
    """A real job's runs from its payload's events, in trace seconds."""
    out: list[Run] = []
    begin: tuple[float, float] | None = None
    for e in events:
        t = float(e["time"]) * scale
        if e.get("event") == "start":
            begin = (t, restart_s if e.get("resumed") else 0.0)
        elif e.get("event") in ("checkpoint", "done") and begin is not None:
            out.append((begin[0], begin[1], t))
            begin = None
    return out


def phases(submit: float, runs: Sequence[Run]) -> dict[str, float]:
    return {"jct": runs[-1][2] - submit, "queue": runs[0][0] - submit,
            "gaps": sum(b[0] - a[2] for a, b in zip(runs, runs[1:])),
            "run": sum(e - b for b, _, e in runs), "runs": float(len(runs))}


def _mean_row(name: str, per_job: Mapping[str, Mapping[str, float]]) -> str:
    cells = [statistics.fmean(p[k] for p in per_job.values()) for k in PHASES]
    return f"| {name} | " + " | ".join(f"{c / 3600:.3f}" if k != "runs" else f"{c:.2f}"
                                       for k, c in zip(PHASES, cells)) + " |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--label", action="append", help="daemon configurations (default: every one)")
    p.add_argument("--jobs", action="store_true", help="list the jobs whose runs the prediction gets wrong")
    a = p.parse_args()
    modes, plan, runs, asked = runs_from_report(a.out, "a100", 0)
    profile = profile_from_spec("a100")
    restart = {j.trace_id: j.restart_s for j in plan.jobs}
    runner.run_round = _recording
    for label, policy in modes:
        if label == "plain" or (a.label and label not in a.label):
            continue
        _rounds.clear()
        res = predict(plan, "daemon", policy, profile, settings=runs[label][0][2])
        submit = {j.job_id: j.submit_time for j in res.jobs}
        sim = {j: phases(submit[j], rs) for j, rs in sim_runs().items()}
        real = []
        for k, (measures, _, _) in enumerate(runs[label]):
            where = run_dir(a.out, label, k, asked)
            real.append({m.trace_id: phases(m.submit * plan.scale, real_runs(
                read_events(where / "jobs" / f"events-{m.slurm_id}.jsonl"), plan.scale, restart[m.trace_id]))
                for m in measures})
        print(f"\n## {label}: mean per job (trace hours; runs: count)\n")
        print("| | JCT | wait before the first start | gaps between runs | in runs | runs |")
        print("|---|---|---|---|---|---|")
        print(_mean_row("simulator", sim))
        for k, r in enumerate(real):
            print(_mean_row(f"real run {k + 1}", r))
        if a.jobs:
            wrong = [j for j in sim if all(r[j]["runs"] != sim[j]["runs"] for r in real)]
            print(f"\n{len(wrong)} jobs whose number of runs the prediction gets wrong in every real run:\n")
            print("| job | GPUs | work (h) | runs: sim | real | JCT (h): sim | real |")
            print("|---|---|---|---|---|---|---|")
            by_id = {j.trace_id: j for j in plan.jobs}
            for j in sorted(wrong, key=lambda j: by_id[j].work_s):
                n_real = ", ".join(f"{r[j]['runs']:.0f}" for r in real)
                jct_real = ", ".join(f"{r[j]['jct'] / 3600:.2f}" for r in real)
                print(f"| {j} | {by_id[j].gpus} | {by_id[j].work_s / 3600:.2f} | {sim[j]['runs']:.0f} | {n_real} | "
                      f"{sim[j]['jct'] / 3600:.2f} | {jct_real} |")


if __name__ == "__main__":
    main()
