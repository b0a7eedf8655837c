"""The round's skeleton on the in-memory Slurm (tests/daemon/fake_slurm.py): a start, a kept round that
sends Slurm nothing, a dry run that sends nothing either, and an unreachable Slurm that skips the round.
The same on a real Slurm: test_e2e.py and the other *_live.py tests."""

from __future__ import annotations

import json

from tesserae_slurm.daemon.loop import Daemon
from tesserae_slurm.slurm import SlurmUnavailable

from .fake_slurm import FakeSlurm, managed
from .round.world import make_world


def _daemon(tmp_path, *jobs, dry_run: bool = False) -> tuple[Daemon, FakeSlurm]:
    world = make_world(tmp_path)
    world.slurm.jobs = {str(j.job_id): j for j in jobs}
    d = Daemon(world.cfg, world.slurm, world.store, dry_run=dry_run, sleep=lambda _s: None)
    d.start()
    return d, world.slurm


def test_a_round_starts_the_jobs_and_the_next_keeps_them_without_a_slurm_call(tmp_path) -> None:
    d, slurm = _daemon(tmp_path, managed(1, 2, submit_time=1), managed(2, 4, submit_time=2))
    first = d.run_round()
    assert first.status == "applied" and first.plan is not None
    assert slurm.methods() == ["admin_hold", "place", "place", "release"]
    assert [r.method for r in d.journal.store.slurm_calls(first.round_id)] == slurm.methods()
    for j in ("1", "2"):
        slurm.run(j, sorted(first.plan.targets[j].gpus))
    slurm.calls.clear()
    second = d.run_round()
    assert second.status == "applied" and second.plan is not None and second.plan.kept == ("1", "2")
    assert slurm.writes() == []
    assert {r.job_id: (r.state, r.rounds_run) for r in d.journal.store.jobs()} == {"1": ("RUNNING", 2),
                                                                                     "2": ("RUNNING", 2)}


def test_a_dry_run_decides_and_records_but_sends_slurm_nothing(tmp_path) -> None:
    d, slurm = _daemon(tmp_path, managed(1, 2), dry_run=True)
    result = d.run_round()
    assert result.status == "dry-run" and slurm.writes() == []
    assert [(a.kind, a.status) for a in d.journal.store.actions(result.round_id)] == [("start", "skipped")]


def test_slurm_unreachable_skips_the_round_and_the_next_one_runs(tmp_path) -> None:
    d, slurm = _daemon(tmp_path, managed(1))

    def down(partition: str | None = None) -> tuple:
        raise SlurmUnavailable("slurm_load_jobs error: Unable to contact slurm controller")
    slurm.list_jobs = down  # type: ignore[method-assign]
    skipped = d.run_round()
    assert skipped.status == "skipped" and skipped.error.startswith("Slurm unavailable: slurm_load_jobs error")
    del slurm.list_jobs
    assert d.run_round().status == "applied"
    assert d.metrics.rounds == {"skipped": 1, "applied": 1}


def test_a_running_job_its_gpu_limit_stops_is_told_so_not_that_it_made_room(tmp_path, capsys) -> None:
    """alice may hold 4 GPUs. Her job 1 runs on one node, bob's job 3 on the other; then her job 2 comes in,
    ranked ahead (Tiresias: no service yet). Her limit stops job 1 and job 2 takes its GPUs: the move's note
    names the limit, not the job that took the GPUs."""
    from tesserae_slurm.cli.main import main

    world = make_world(tmp_path, limits={"users": {"alice": 4}},
                       scheduler={"policy": "tiresias", "policy_options": {"queue_limits": [50], "service": "time"}})
    slurm = world.slurm
    slurm.jobs = {"1": managed(1, 4, submit_time=2), "3": managed(3, 4, submit_time=3, user="bob")}
    d = Daemon(world.cfg, slurm, world.store, sleep=lambda _s: None)
    d.start()
    first = d.run_round()
    assert first.plan is not None and sorted(first.plan.targets) == ["1", "3"]
    for j in ("1", "3"):
        slurm.run(j, sorted(first.plan.targets[j].gpus))
    slurm.now += 100  # jobs 1 and 3 ran past the first queue's limit
    slurm.jobs["2"] = managed(2, 4, submit_time=slurm.now)
    second = d.run_round()
    assert second.status == "applied" and second.plan is not None
    decision = json.loads(world.store.round(second.round_id).decision_json)
    assert decision["order"] == ["2", "1", "3"]
    assert decision["preempted"] == ["1"] and decision["started"] == ["2"]
    [move] = decision["moves"]
    assert (move["job"], move["action"], move["cause"], move["for"]) == ("1", "preempt", "limit", [])
    assert "its GPU limit stopped it (needs 4 GPUs; user alice holds 4 of 4 GPUs)" in move["detail"]
    assert main(["explain", "1", "--db", str(world.cfg.state.database)]) == 0
    out = capsys.readouterr().out
    assert f"why preempted in round {second.round_id}: its GPU limit stopped it (needs 4 GPUs; user alice holds " \
        "4 of 4 GPUs); cost" in out and "made room" not in out, out
