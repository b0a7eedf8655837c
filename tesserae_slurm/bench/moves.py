"""`tesserae bench moves`: how often the daemon moves and stops jobs on a real Slurm, and why.

The scenario (a new user's first try): the dev cluster with 8 nodes x 4 fake GPUs, the dev configuration
(`tesserae-t`, Tiresias demoting after 30 GPU-seconds, 5 s rounds, 20 s grace), and 32 jobs of 1 to 8 GPUs
over the six models of the a100 profile from two users, submitted through tsbatch at exponential gaps.
The daemon runs until every job has ended. Each round's decision inputs are recorded
(``state.record_inputs``) and dumped beside the report, so a test replays them through the engine.

Counted from the daemon's state database (``analyze``): migrations and preemptions planned and done,
placement changes between consecutive rounds, shifts between GPUs of one node, oscillations (a job back on
GPUs it left within the last rounds, model/moves.py), rounds that ended partial, round durations, and the
jobs' completion times. The job set and the submission reuse `tesserae devcluster compare`'s machinery
(devcluster/compare.py, runs.py): the same emulated GPU job at speed 1.0, which checkpoints and resumes.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..devcluster.compare import STEP_TIME_S, DemoJob, job_args
from ..devcluster.runs import (
    DaemonProcess,
    JobFiles,
    RunError,
    Settings,
    cancel_all,
    daemon_config,
    read_events,
    submit_all,
    tsbatch_submitter,
    wait_round,
    write_job_files,
)
from ..model.moves import is_return, is_shift, partners
from ..slurm import SlurmCliBackend
from ..slurm.runner import SlurmRunner

# The a100 profile's six models, with a batch size it measured for each; LLMs exist on 2 and 4 GPUs only.
MODELS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("DCGAN", "32", (1, 2, 4)), ("resnet50", "64", (1, 2, 4)), ("vgg19", "32", (1, 2, 4)),
    ("PointNet", "64", (1, 2, 4)), ("Bert-Large", "256/16", (2, 4)), ("GPT2-Medium", "512/8", (2, 4)))
GPUS: tuple[tuple[int, float], ...] = ((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1))


def scenario_jobs(count: int = 32, seed: int = 0, *, min_s: float = 20.0, max_s: float = 150.0,
                  mean_gap_s: float = 4.0) -> tuple[DemoJob, ...]:
    """``count`` jobs, deterministic from ``seed``: 1/2/4/8 GPUs (40/30/20/10 %), the models in turn (an
    LLM drawn for 1 or 8 GPUs runs as resnet50, which the profile has on 1 GPU and runs alone on 8),
    work uniform in [min_s, max_s] whole seconds, exponential gaps (mean ``mean_gap_s``), a time
    limit of twice the work in whole minutes."""
    rng = random.Random(seed)
    jobs: list[DemoJob] = []
    arrival = 0.0
    for i in range(count):
        gpus = rng.choices([g for g, _ in GPUS], weights=[w for _, w in GPUS])[0]
        model, batch, sizes = MODELS[i % len(MODELS)]
        if gpus not in sizes and gpus != 8:
            gpus = sizes[0]
        if gpus == 8 and model in ("Bert-Large", "GPT2-Medium"):
            model, batch = "resnet50", "64"
        duration = float(round(rng.uniform(min_s, max_s) / STEP_TIME_S) * STEP_TIME_S)
        if i:
            arrival = round(arrival + rng.expovariate(1.0 / mean_gap_s), 1)
        jobs.append(DemoJob(f"mv{i:02d}", gpus, model, int(batch) if batch.isdigit() else 0, duration, arrival,
                            max(1, math.ceil(duration * 2 / 60.0))))
    return tuple(jobs)


def batch_of(job: DemoJob) -> str:
    """The job's batch size as the profile spells it (the LLMs' ``global/micro``)."""
    for model, batch, _ in MODELS:
        if model == job.model:
            return batch if model in ("Bert-Large", "GPT2-Medium") else str(job.batch_size)
    return str(job.batch_size)


# ---- what a run measured -----------------------------------------------------------------------------

@dataclass(frozen=True)
class MovesReport:
    rounds: int
    rounds_partial: int
    partial_errors: tuple[str, ...]
    round_s_median: float  # rounds with active jobs
    round_s_max: float
    migrations_planned: int
    migrations_done: int
    migrations_not_done: int  # planned, then skipped or failed
    preemptions_planned: int
    preemptions_done: int
    target_changes: int  # a job's target GPUs differ between two consecutive rounds' decisions
    held_changes: int  # a job held other GPUs at the start of a round than at the start of the one before
    same_node_shifts: int  # decided migrations within the job's node(s), its partner unchanged
    oscillations: int  # decided migrations back to GPUs it held at the start of one of the two rounds before
    jobs: int
    completed: int
    avg_jct_s: float
    moves_per_job: float  # migrations and preemptions done, per job
    moves_by_cause: dict[str, int] = field(default_factory=dict)  # the decisions' reasons (cost-aware engine)
    per_job: dict[str, dict[str, Any]] = field(default_factory=dict)
    shift_examples: tuple[str, ...] = ()
    oscillation_examples: tuple[str, ...] = ()


def analyze(db: Path, examples: int = 5) -> MovesReport:
    """The counts of ``MovesReport`` from a daemon's state database. Shifts and oscillations are counted
    on the migrations each round decided, against the GPUs the jobs held at the start of that round and
    of the two rounds before (the round's recorded inputs, ``state.record_inputs``): a target that was
    never reached (a start the round skipped) is not a place the job left."""
    from ..daemon.state.store import Store
    from ..model.codec import placement_from_json

    store = Store.open(db, read_only=True)
    try:
        rows = sorted((r for r in store.rounds(limit=1_000_000) if r.decision_json not in ("", "{}")),
                      key=lambda r: r.round_id)
        targets = [{p.job_id: p.gpus for p in store.placements(r.round_id)} for r in rows]
        actions = store.actions()
        jobs = store.jobs_by_id(sorted({p for t in targets for p in t} | {a.job_id for a in actions}))
    finally:
        store.close()
    decisions = [json.loads(r.decision_json) for r in rows]
    held = [placement_from_json(d["request"]["current"]) if (d.get("request") or {}).get("current") else None
            for d in decisions]
    target_changes = sum(1 for k in range(1, len(rows)) for j, g in targets[k].items()
                         if j in targets[k - 1] and targets[k - 1][j] != g)
    held_changes = 0
    for k in range(1, len(rows)):
        a, b = held[k - 1], held[k]
        if a is not None and b is not None:
            ga, gb = a.job_gpus(), b.job_gpus()
            held_changes += sum(1 for j in gb if j in ga and ga[j] != gb[j])
    shifts = returns = 0
    shift_ex: list[str] = []
    osc_ex: list[str] = []
    per_job: dict[str, dict[str, Any]] = {}
    for k, d in enumerate(decisions):
        now = held[k]
        if now is None or not d.get("migrated"):
            continue
        after = placement_from_json(d["placement"])
        before_gpus, after_gpus = now.job_gpus(), after.job_gpus()
        was, will = partners(now), partners(after)
        earlier = [h.job_gpus() if h is not None else {} for h in held[max(0, k - 2):k][::-1]]
        for j in d["migrated"]:
            left, went = before_gpus.get(j, ()), after_gpus.get(j, ())
            rec = per_job.setdefault(j, {"shifts": 0, "oscillations": 0})
            if is_shift(left, went, was.get(j, ""), will.get(j, "")):
                shifts += 1
                rec["shifts"] += 1
                if len(shift_ex) < examples:
                    shift_ex.append(f"round {rows[k].round_id}: job {j} {_text(left)} -> {_text(went)}")
            if is_return(left, went, [e.get(j, ()) for e in earlier]):
                returns += 1
                rec["oscillations"] += 1
                if len(osc_ex) < examples:
                    osc_ex.append(f"round {rows[k].round_id}: job {j} {_text(left)} -> {_text(went)} (back)")
    causes: dict[str, int] = {}
    for d in decisions:
        for m in d.get("moves", []):
            key = f"{m['action']}:{m['cause']}"
            causes[key] = causes.get(key, 0) + 1
    done = [a for a in actions if a.status == "done"]
    jct = [j.finished_at - j.submit_time for j in jobs if j.state == "COMPLETED" and j.finished_at is not None]
    for row in jobs:
        rec = per_job.setdefault(row.job_id, {"shifts": 0, "oscillations": 0})
        rec.update(name=row.name, gpus=row.num_gpus, model=row.model, state=row.state, migrations=row.migrations,
                   preemptions=row.preemptions,
                   jct_s=None if row.finished_at is None else round(row.finished_at - row.submit_time, 1))
    spans = [r.finished_at - r.started_at for r in rows if r.finished_at is not None and r.jobs_active]
    partial = [r for r in rows if r.status == "partial"]
    moved = sum(1 for a in done if a.kind in ("migrate", "preempt"))
    return MovesReport(
        rounds=len(rows), rounds_partial=len(partial),
        partial_errors=tuple(f"round {r.round_id}: {r.error}" for r in partial[:examples]),
        round_s_median=statistics.median(spans) if spans else math.nan, round_s_max=max(spans, default=math.nan),
        migrations_planned=sum(r.migrated for r in rows),
        migrations_done=sum(1 for a in done if a.kind == "migrate"),
        migrations_not_done=sum(1 for a in actions if a.kind == "migrate" and a.status in ("skipped", "failed")),
        preemptions_planned=sum(r.preempted for r in rows),
        preemptions_done=sum(1 for a in done if a.kind == "preempt"),
        target_changes=target_changes, held_changes=held_changes, same_node_shifts=shifts, oscillations=returns,
        jobs=len(jobs), completed=len(jct), avg_jct_s=statistics.fmean(jct) if jct else math.nan,
        moves_per_job=moved / len(jobs) if jobs else 0.0, moves_by_cause=causes, per_job=per_job,
        shift_examples=tuple(shift_ex), oscillation_examples=tuple(osc_ex))


def _text(refs: Sequence[tuple[str, int]]) -> str:
    """``node3:0-1`` as the daemon writes GPU sets."""
    from ..daemon.state.gpuset import format_gpus, from_refs
    return format_gpus(from_refs(tuple(refs)))


def dump_rounds(db: Path, out: Path) -> int:
    """Every decided round's recorded inputs and decision, one JSON object a line, into ``out``; returns
    how many rounds had their inputs recorded."""
    from ..daemon.state.store import Store

    store = Store.open(db, read_only=True)
    n = 0
    try:
        with out.open("w") as fh:
            for r in sorted(store.rounds(limit=1_000_000), key=lambda r: r.round_id):
                d = json.loads(r.decision_json or "{}")
                if "request" not in d:
                    continue
                request = d.pop("request")
                fh.write(json.dumps({"round": r.round_id, "status": r.status, "error": r.error, "request": request,
                                     "decision": d}, separators=(",", ":")) + "\n")
                n += 1
    finally:
        store.close()
    return n


# ---- running the scenario -----------------------------------------------------------------------------

class _AsUser(SlurmRunner):
    """Slurm's commands run as ``user`` (runuser), so a job is that user's, as on a shared cluster."""

    def __init__(self, env: Mapping[str, str], user: str, timeout_s: float = 10.0) -> None:
        super().__init__(env, timeout_s=timeout_s)
        self.user = user

    def run(self, argv: Sequence[str], **kwargs: Any) -> str:
        return super().run(["runuser", "-u", self.user, "--", *argv], **kwargs)


def _submitter(env: Mapping[str, str], config: Path, files: JobFiles, users: Sequence[str],
               ) -> Callable[[DemoJob], str]:
    """tsbatch for each user in turn; the jobs share the emulated GPUs' registry in the run directory."""
    gpus = files.out.parent / "emulated-gpus"
    gpus.mkdir(exist_ok=True)
    gpus.chmod(0o1777)  # every user's jobs register there
    registry = ["--registry", str(gpus)]
    submitters = [tsbatch_submitter(SlurmCliBackend(env), config, files) if not u else
                  tsbatch_submitter(SlurmCliBackend(env, runner=_AsUser(env, u)), config, files, _other_user_env)
                  for u in users]
    turn = [0]

    def submit_one(job: DemoJob) -> str:
        submit = submitters[turn[0] % len(submitters)]
        turn[0] += 1
        return submit([*job_args(job), *registry], [
            "--gpus", str(job.gpus), "--model", job.model, "--batch-size", batch_of(job), "-J", job.name,
            "-t", str(job.time_limit_min), "-o", str(files.out / "%j.out")])
    return submit_one


def _other_user_env() -> dict[str, str]:
    """Another user's jobs may not reach this Python (a virtual environment under a private home): they
    run the system's python3 with this checkout on PYTHONPATH (the payload and the launcher need no
    packages beyond the standard library)."""
    system = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
    return {"TESSERAE_PYTHON": system, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def moves_config(settings: Settings, workdir: Path) -> dict[str, Any]:
    """The dev configuration (etc/tesserae-devcluster.yaml's scheduling) with each round's inputs recorded."""
    cfg = daemon_config(settings, workdir)
    cfg["state"]["record_inputs"] = True
    return cfg


def run_scenario(jobs: Sequence[DemoJob], env: Mapping[str, str], workdir: Path, settings: Settings,
                 users: Sequence[str]) -> Path:
    """Run the job set under the daemon on the running cluster (``env``); returns the state database."""
    out = workdir / "jobs"
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o1777)  # the second user's jobs write here too
    files = write_job_files(workdir, out)
    config = workdir / "tesserae.yaml"
    config.write_text(json.dumps(moves_config(settings, workdir), indent=1) + "\n")  # JSON is YAML
    db = workdir / "state.db"
    backend = SlurmCliBackend(env)
    daemon = DaemonProcess(config, workdir / "daemon.log", env)
    submitted: dict[str, tuple[str, float]] = {}
    finished = False
    try:
        wait_round(db, daemon)
        submit_all(jobs, _submitter(env, config, files, users), into=submitted)
        ids = {jid for jid, _ in submitted.values()}
        _wait_ended(backend, settings.partition, ids, time.time() + settings.timeout_s, daemon.problem)
        wait_round(db, daemon, after=time.time(), timeout_s=settings.round_seconds + 120)
        finished = True
    finally:
        daemon.stop()
        if not finished:
            cancel_all(backend, [jid for jid, _ in submitted.values()])
    (workdir / "submitted.json").write_text(json.dumps(
        {name: {"job_id": jid, "submit": at, "events": read_events(out / f"events-{jid}.jsonl")}
         for name, (jid, at) in submitted.items()}, indent=1) + "\n")
    return db


def _wait_ended(backend: SlurmCliBackend, partition: str, ids: set[str], deadline: float,
                alive: Callable[[], str]) -> None:
    """Until every job has ended: finished in squeue, or gone from it (Slurm forgets a finished job after
    MinJobAge, which a run of many minutes outlasts)."""
    while True:
        shown = {str(j.job_id): j for j in backend.list_jobs(partition)}
        if all(i not in shown or shown[i].state.is_finished for i in ids):
            return
        problem = alive()
        if problem:
            raise RunError(problem)
        if time.time() > deadline:
            left = sorted(i for i in ids if i in shown and not shown[i].state.is_finished)
            raise RunError(f"jobs {', '.join(left)} had not ended after the timeout")
        time.sleep(1.0)


def report_text(r: MovesReport, label: str = "") -> str:
    lines = [f"{label}{r.jobs} jobs ({r.completed} completed), {r.rounds} rounds ({r.rounds_partial} partial), "
             f"round {r.round_s_median:.1f} s median / {r.round_s_max:.1f} s max",
             f"  migrations: {r.migrations_done} done, {r.migrations_not_done} planned and not done "
             f"({r.migrations_planned} planned); preemptions: {r.preemptions_done} done ({r.preemptions_planned} "
             f"planned); moves per job {r.moves_per_job:.2f}",
             f"  target changes between rounds {r.target_changes} (GPUs held changed {r.held_changes} times); "
             f"same-node shifts {r.same_node_shifts}, oscillations {r.oscillations}; avg JCT {r.avg_jct_s:.1f} s"]
    if r.moves_by_cause:
        lines.append("  moves by cause: " + ", ".join(f"{k} {v}" for k, v in sorted(r.moves_by_cause.items())))
    lines += [f"  shift: {e}" for e in r.shift_examples] + [f"  oscillation: {e}" for e in r.oscillation_examples]
    lines += [f"  partial: {e}" for e in r.partial_errors]
    return "\n".join(lines)


def as_json(r: MovesReport) -> dict[str, Any]:
    return asdict(r)


__all__ = ["RunError", "MovesReport", "analyze", "as_json", "dump_rounds", "report_text", "run_scenario",
           "scenario_jobs"]
