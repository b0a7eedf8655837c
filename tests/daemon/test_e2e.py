"""End to end on the real local Slurm: tsbatch -> daemon rounds -> toy torch jobs -> admin CLI.

One scenario (2 nodes x 4 GPUs, tesserae-t with a 1 GPU-second Tiresias queue limit, so every job
that ran is demoted and newcomers rank first), driven round by round by the test:

1. packing: 10 jobs (2x GPT2-Medium and 2x DCGAN on 2 GPUs, 6x DCGAN on 1 GPU) on 8 GPUs -> all start,
   4 pairs share GPUs under MPS settings, GPT2 gets the pair's parallelism strategy;
2. migration: X,Y,Z,W (2 GPUs, no profile) fill the nodes pairwise ({X,Y} and {Z,W}); when X ends,
   the consolidated placement puts Y and Z on one node: exactly one job moves (checkpoint, requeue,
   start on the new GPUs, resume);
3. preemption: E (4 GPUs) arrives and ranks first: one 2-GPU job is preempted to make room; then
   P (8 GPUs) arrives and takes the whole cluster: the other three checkpoint, are requeue-held, and
   every preempted job resumes from its checkpoint once there is room.

The tests below check the outcome against the job logs (what really ran where) and the state
database (what the daemon decided and which Slurm calls it made).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tesserae_slurm.cli.main import main
from tesserae_slurm.daemon.round.observe import observe
from tesserae_slurm.daemon.state.gpuset import parse_gpus

from .helpers import Env, completed, done, not_completed, progressed, wait_for

# every_release: also run in the 24.11 and 26.05 lanes (./dev test), as the outcome depends on the release
pytestmark = pytest.mark.every_release

STEPS = {"phase1": 40, "short": 20, "long": 1500, "E": 200, "P": 30}  # at 0.05 s per step


@dataclass
class Scenario:
    env: Env
    jobs: dict[str, str]  # label -> Slurm job id
    steps: dict[str, int]  # job id -> total steps
    migration_round: int
    preemption_round: int
    policy_work: dict[str, tuple[float | None, float]]  # mid-run: job -> (work_done the policy saw, the row's)


@pytest.fixture(scope="module")
def scenario(daemon_cluster, tmp_path_factory) -> Scenario:  # type: ignore[no-untyped-def]
    env = Env(daemon_cluster, tmp_path_factory.mktemp("e2e"))
    # the paper's Tesserae-T, not the shipped default: the scenario needs its consolidating move (the
    # default's sticky placement keeps Y where it runs, as it should when nothing waits)
    env.write_config(scheduler={"policy": "tesserae-t"})
    try:
        yield _run(env)
    finally:
        import subprocess
        subprocess.run(["scancel", "--partition", "tesserae"], env=env.os_env(), capture_output=True, check=False)


def _run(env: Env) -> Scenario:
    d = env.daemon()
    jobs: dict[str, str] = {}
    steps: dict[str, int] = {}

    def submit(label: str, gpus: int, n: int, **kw: Any) -> None:
        jobs[label] = env.submit_toy(gpus, n, name=label, **kw)
        steps[jobs[label]] = n

    def round_() -> None:
        d.run_round()

    # 1. packing
    for label in ("G1", "G2"):
        submit(label, 2, STEPS["phase1"], model="GPT2-Medium", batch="")
    for i in range(1, 5):
        submit(f"D{i}", 1, STEPS["phase1"])
    for label in ("DD1", "DD2"):
        submit(label, 2, STEPS["phase1"])
    for label in ("D5", "D6"):
        submit(label, 1, STEPS["phase1"])
    first = d.run_round()
    assert first.status == "applied", first.error
    assert first.decision is not None and len(first.decision.packed) == 4, first.decision
    phase1 = [jobs[k] for k in ("G1", "G2", "D1", "D2", "D3", "D4", "DD1", "DD2", "D5", "D6")]
    wait_for(lambda: all(done(env, j) for j in phase1), 240, "phase-1 jobs to finish", tick=round_, every=2)

    # 2. migration: {X,Y} and {Z,W} share the nodes; when X ends, consolidation wants Y and Z together
    for label, n in (("X", STEPS["short"]), ("Y", STEPS["long"]), ("Z", STEPS["long"]), ("W", STEPS["long"])):
        submit(label, 2, n, model=None)
    round_()
    wait_for(lambda: completed(env, jobs["X"]) and all(progressed(env, jobs[k], 20) for k in "YZW"), 120,
             "X to finish and Y, Z, W to make progress")  # no rounds meanwhile: the next one sees it all
    mig = d.run_round()
    assert mig.plan is not None and [a.kind for a in mig.plan.actions] == ["migrate"], mig.plan
    moved = mig.plan.actions[0].job_id
    rows = {r.job_id: r.work_done for r in env.store().jobs()}
    seen = observe(d.backend, d.cfg, d.clock(), {})
    views = d.inputs.build(seen, d.cfg, d.profile, d.admin, False).views
    policy_work = {v.id: (v.work_done, rows[v.id]) for v in views}
    wait_for(lambda: len([e for e in env.events(moved) if e["event"] == "start"]) == 2 and progressed(env, moved, 40),
             120, "the migrated job to resume", tick=round_, every=2)

    # 3. preemption: E (4 GPUs) is new and ranks first: one 2-GPU job makes room; then P (8 GPUs) takes all
    submit("E", 4, STEPS["E"], model=None)
    first_pre = d.run_round()
    assert first_pre.plan is not None and sorted(a.kind for a in first_pre.plan.actions) == ["preempt", "start"]
    wait_for(lambda: progressed(env, jobs["E"], 20), 120, "E to make progress", tick=round_, every=2)
    submit("P", 8, STEPS["P"], model=None)
    pre = d.run_round()
    kinds = sorted(a.kind for a in pre.plan.actions) if pre.plan else []
    assert kinds.count("start") == 1 and kinds.count("preempt") >= 2 and set(kinds) == {"preempt", "start"}, pre.plan
    assert pre.plan is not None and pre.plan.kept == ()  # the 8-GPU job takes every GPU
    wait_for(lambda: all(done(env, j) for j in jobs.values()), 300, "every job to finish", tick=round_, every=2)
    # Rounds go on meanwhile: a job whose checkpoint signal came in its last step logged "done", and its
    # launcher still waits for the requeue-hold; the daemon holds it after the grace and runs it again
    # (it resumes at its last step and ends at once) -- Slurm cannot tell that job from one that checkpointed.
    wait_for(lambda: completed(env, *jobs.values()), 120, "Slurm to list every job as completed", tick=round_,
             every=2, explain=lambda: f"not completed: {not_completed(env, *jobs.values())}")
    round_()
    return Scenario(env, jobs, steps, mig.round_id, pre.round_id, policy_work)


# ---- helpers over the records ----------------------------------------------------------------------

def _starts(env: Env, job: str) -> list[dict[str, Any]]:
    return [e for e in env.events(job) if e["event"] == "start"]


def _placement(env: Env, round_id: int, job: str) -> Any:
    rows = [p for p in env.store().placements(round_id) if p.job_id == job]
    assert rows, f"job {job} has no recorded placement in round {round_id}"
    return rows[0]


# ---- the checks ------------------------------------------------------------------------------------

def test_at_least_twelve_jobs_of_mixed_gpu_counts_all_completed(scenario: Scenario) -> None:
    env, ids = scenario.env, list(scenario.jobs.values())
    assert len(ids) >= 12
    rows = {r.job_id: r for r in env.store().jobs()}
    assert {rows[j].num_gpus for j in ids} == {1, 2, 4, 8}
    assert not not_completed(env, *ids)  # squeue, or the jobcomp log for jobs ended MinJobAge ago
    for j in ids:
        assert rows[j].state == "COMPLETED", (j, rows[j].state, rows[j].reason)
        last = [e for e in env.events(j) if e["event"] == "done"]
        assert last and last[-1]["step"] == scenario.steps[j]
        assert rows[j].executed_time > 0 and rows[j].attained_service == pytest.approx(
            rows[j].executed_time * rows[j].num_gpus)


def test_work_done_is_the_time_run_at_the_speeds_the_rounds_placed_each_job_at(scenario: Scenario) -> None:
    """The daemon's progress count (Tiresias ``service: progress``): each second a job ran adds the speed
    of its placement, so a job packed with a partner that slows it is charged less than its time."""
    store = scenario.env.store()
    rows = {r.job_id: r for r in store.jobs()}
    rounds = [r for r, _, _ in store.round_spans(1, ("applied", "failed"))]
    speeds: dict[str, list[float]] = {}
    for p in store.placements_of(rounds, list(scenario.jobs.values())):
        speeds.setdefault(p.job_id, []).append(p.speed)
    charged_less = 0
    for job in scenario.jobs.values():
        r, seen = rows[job], speeds[job]
        assert min(seen) * r.executed_time - 1e-6 <= r.work_done <= max(seen) * r.executed_time + 1e-6, \
            (job, r.work_done, r.executed_time, seen)
        if len(set(seen)) == 1:  # one speed all along: exactly that share of its time
            assert r.work_done == pytest.approx(seen[0] * r.executed_time), (job, seen)
        charged_less += r.work_done < 0.95 * r.executed_time
    assert charged_less >= 2  # the packed pairs of phase 1 ran below full speed
    # and the policy is given that count (Tiresias' service: progress), for the jobs running mid-scenario
    assert {scenario.jobs[k] for k in "YZW"} <= scenario.policy_work.keys()
    assert all(seen == row and row > 0 for seen, row in scenario.policy_work.values()), scenario.policy_work


def test_every_run_used_the_node_and_gpus_the_decision_chose(scenario: Scenario) -> None:
    env = scenario.env
    checked = 0
    for job in scenario.jobs.values():
        for start in _starts(env, job):
            rid = int(start["tesserae_round"])
            chosen = parse_gpus(_placement(env, rid, job).gpus)
            node = start["slurmd_nodename"]
            assert node in chosen, (job, rid, node, chosen)
            assert tuple(int(g) for g in start["cuda_visible_devices"].split(",")) == chosen[node], (job, rid)
            checked += 1
    assert checked >= len(scenario.jobs)


def test_packed_pairs_ran_together_on_the_same_gpus_with_mps(scenario: Scenario) -> None:
    env, store = scenario.env, scenario.env.store()
    pairs = set()
    for a in store.actions(status="done"):
        detail = json.loads(a.detail)
        if a.kind == "start" and detail.get("partner"):
            pairs.add((a.round_id, tuple(sorted((a.job_id, detail["partner"])))))
    started_together = [(rid, p) for rid, p in pairs
                        if all(any(int(s["tesserae_round"]) == rid for s in _starts(env, j)) for j in p)]
    assert len(started_together) >= 4, pairs
    strategies = 0
    for rid, (a, b) in started_together:
        sa = next(s for s in _starts(env, a) if int(s["tesserae_round"]) == rid)
        sb = next(s for s in _starts(env, b) if int(s["tesserae_round"]) == rid)
        assert sa["slurmd_nodename"] == sb["slurmd_nodename"]
        assert sa["cuda_visible_devices"] == sb["cuda_visible_devices"]
        assert sa["cuda_mps_active_thread_percentage"] == sb["cuda_mps_active_thread_percentage"] == "50"
        assert sa["tesserae_partner"] == b and sb["tesserae_partner"] == a
        end_a = max(e["time"] for e in env.events(a) if e["time"] >= sa["time"])
        end_b = max(e["time"] for e in env.events(b) if e["time"] >= sb["time"])
        assert max(sa["time"], sb["time"]) < min(end_a, end_b), "the pair did not run at the same time"
        for job, s in ((a, sa), (b, sb)):
            want = _placement(env, rid, job).strategy
            assert s.get("tesserae_strategy", "") == want
            strategies += bool(want)
    assert strategies >= 2  # the GPT2 jobs ran with the pair's pipeline split


def _launch_records(env: Env, job: str) -> list[dict[str, Any]]:
    """What the launcher recorded about each run of the job (its output file; one line per run)."""
    marker = "tesserae-launch: record "
    return [json.loads(line.split(marker, 1)[1]) for line in env.job_output(job).splitlines() if marker in line]


def test_both_members_of_every_pair_got_consistent_mps_settings(scenario: Scenario) -> None:
    """Every packable job is an MPS client from its start: both members of each pair use one pipe
    directory (one per user, node and GPUs) with the assigned thread percentage. No GPU here: the
    launcher says MPS was skipped, and why, and the payload ran anyway."""
    env, store = scenario.env, scenario.env.store()
    rows = {r.job_id: r for r in store.jobs()}
    records = {job: _launch_records(env, job) for job in scenario.jobs.values()}
    pipe_of: dict[tuple[str, tuple[int, ...]], set[str]] = {}
    for job, runs in records.items():
        assert runs and len(runs) == len(_starts(env, job)), (job, runs)
        for rec in runs:
            packable = not rows[job].no_pack and rows[job].model != "(no profile)"
            assert rec["packable"] == packable, (job, rec)
            if not packable:
                assert rec["mps"] is None, (job, rec)
                continue
            mps = rec["mps"]
            assert mps["active"] is False and "nvidia-cuda-mps-control not found" in mps["skipped"], rec
            assert mps["started_server"] is False
            pipe_of.setdefault((rec["node"], tuple(rec["gpus"])), set()).add(mps["pipe_dir"])
    assert pipe_of and all(len(dirs) == 1 for dirs in pipe_of.values()), pipe_of  # one server per user and GPUs
    pairs = 0
    for a in store.actions(status="done"):
        detail = json.loads(a.detail)
        if a.kind != "start" or not detail.get("partner"):
            continue
        partner = detail["partner"]
        mine = [r for r in records[a.job_id] if r["round"] == a.round_id]
        theirs = [r for r in records[partner] if r["partner"] == a.job_id]
        if not mine or not theirs:  # stopped again before its program ran (see _check_runs_match_starts)
            continue
        assert mine[0]["mps"]["pipe_dir"] == theirs[-1]["mps"]["pipe_dir"], (a.job_id, partner)
        assert mine[0]["mps"]["thread_percentage"] == 50  # mps.thread_percentage of the test config
        assert mine[0]["gpus"] == theirs[-1]["gpus"] and mine[0]["node"] == theirs[-1]["node"]
        pairs += 1
    assert pairs >= 8, pairs  # both members of at least four pairs


def test_preempted_jobs_resumed_from_their_checkpoints(scenario: Scenario) -> None:
    """Every run starts at the step of the job's last checkpoint: progress continues, never repeats."""
    env = scenario.env
    # a short job may end inside its grace period: the preemption is then done but nothing was requeued
    preempted = {a.job_id for a in env.store().actions(status="done") if a.kind == "preempt"
                 and "not requeued" not in a.error}
    assert len(preempted) >= 3 and scenario.jobs["E"] in preempted
    resumed = set()
    for job in scenario.jobs.values():
        last_checkpoint = 0
        for e in env.events(job):
            if e["event"] in ("checkpoint", "done"):  # a job done as its signal came may run once more
                last_checkpoint = e["step"]
            elif e["event"] == "start":
                assert e["step"] == last_checkpoint, (job, e, last_checkpoint)
                if e["step"] > 0:
                    resumed.add(job)
        assert env.events(job)[-1]["event"] == "done"
    assert len(resumed & preempted) >= 2, (resumed, preempted)
    rows = {r.job_id: r for r in env.store().jobs()}
    assert all(rows[j].preemptions >= 1 and rows[j].restarts >= 1 for j in preempted)


def test_the_migrated_job_moved_and_resumed(scenario: Scenario) -> None:
    env = scenario.env
    moved = [a for a in env.store().actions(round_id=scenario.migration_round) if a.kind == "migrate"]
    assert len(moved) == 1 and moved[0].status == "done", moved
    job = moved[0].job_id
    assert job in (scenario.jobs["Y"], scenario.jobs["Z"], scenario.jobs["W"])
    starts = _starts(env, job)
    before = next(s for s in starts if int(s["tesserae_round"]) < scenario.migration_round)
    after = next(s for s in starts if int(s["tesserae_round"]) == scenario.migration_round)
    assert (before["slurmd_nodename"], before["cuda_visible_devices"]) != (after["slurmd_nodename"],
                                                                           after["cuda_visible_devices"])
    assert after["step"] > 0
    assert next(r for r in env.store().jobs() if r.job_id == job).migrations == 1


def test_kept_jobs_got_no_slurm_calls(scenario: Scenario) -> None:
    env, store = scenario.env, scenario.env.store()
    rounds = sorted(r.round_id for r in store.rounds(limit=10_000))
    previous: dict[str, str] = {}
    kept_checked = 0
    for rid in rounds:
        now = {p.job_id: p.gpus for p in store.placements(rid)}
        acted = {a.job_id for a in store.actions(round_id=rid)}
        touched = {j for c in store.slurm_calls(rid) for j in c.job_ids.split(",") if j}
        for job, gpus in now.items():
            if previous.get(job) == gpus and job not in acted:
                assert job not in touched, f"kept job {job} got a Slurm call in round {rid}"
                kept_checked += 1
        previous = now
    assert kept_checked >= 20
    # and Slurm agrees: every run the job's program logged belongs to exactly one of the daemon's starts
    for job in scenario.jobs.values():
        _check_runs_match_starts(env, store, job)


def _check_runs_match_starts(env: Env, store: Any, job: str) -> None:
    """Each start the daemon made (done) opens a window until its next start. The program logs one
    start in each window, or none when the daemon stopped the job again inside the window before the
    program got to run (a 1 GPU-second queue limit can demote and preempt an 8-GPU job one round
    after its start); no run is logged outside a window."""
    acts = sorted(store.actions(job_id=job, status="done"), key=lambda a: a.created_at)
    opens = [a.created_at for a in acts if a.kind in ("start", "migrate-start")]
    stops = [a.created_at for a in acts if a.kind in ("preempt", "migrate")]
    runs = sorted(e["time"] for e in _starts(env, job))
    assert opens and runs and runs[0] >= opens[0], (job, opens, runs)
    for begin, end in zip(opens, opens[1:] + [float("inf")]):
        logged = [t for t in runs if begin <= t < end]
        assert len(logged) <= 1, (job, begin, logged)
        if not logged:
            assert any(begin <= t < end for t in stops), f"job {job}: started at {begin} but never ran nor stopped"


def test_admin_cli_shows_the_rounds(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    env = scenario.env
    out = env.tesserae("rounds", "-n", "1000", "-p")  # the installed console script, as an admin runs it
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ROUND|STARTED|STATUS")
    assert len(lines) - 1 == len(env.store().rounds(limit=10_000))

    def cli(*argv: str) -> str:  # the same entry point in this process (no interpreter start per call)
        assert main([*argv, "--db", str(env.db)]) == 0
        return capsys.readouterr().out

    show = cli("round", "show", str(scenario.migration_round))
    assert "migrate" in show and "placement" in show, show
    jobs = json.loads(cli("jobs", "--all", "--json"))["jobs"]
    assert {j["job_id"] for j in jobs} >= set(scenario.jobs.values())
    moved = next(a.job_id for a in env.store().actions(round_id=scenario.migration_round) if a.kind == "migrate")
    assert "why moved" in cli("explain", moved)
