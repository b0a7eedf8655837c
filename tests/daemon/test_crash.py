"""Crash safety: kill -9 the daemon at each step of applying a round, restart it, and check that no job
is lost or placed twice and that the database agrees with Slurm.

The round under test preempts a running job (signal, grace, requeue-hold) and starts a newcomer
(assignment, node list, release), so it passes every fail point. The daemon that dies is a real
process (forked from the test, or the `tesserae daemon` CLI) killed by SIGKILL at the fail point.
"""

from __future__ import annotations

import multiprocessing
import os

import pytest

from tesserae_slurm.daemon.state.gpuset import parse_gpus
from tesserae_slurm.daemon.state.store import PLACED_STATES, release_lock

from .helpers import Env, consistency_problems, progressed, submit_tick, wait_for

POINTS = ["after-intent:1", "after-signal:1", "after-requeue:1", "after-intent:2", "after-place:1",
          "after-release:1"]
# The 24.11 and 26.05 lanes take one fail point per phase (stop, start, release); the host takes all.
EVERY_RELEASE = {"after-signal:1", "after-place:1", "after-release:1"}


def _round_in_child(env: Env, point: str) -> None:
    os.environ["TESSERAE_FAILPOINTS"] = point
    env.daemon().run_round()
    os._exit(0)  # reaching this means the fail point was never hit


def crash_round(env: Env, point: str) -> int:
    proc = multiprocessing.get_context("fork").Process(target=_round_in_child, args=(env, point))
    proc.start()
    proc.join(120)
    return proc.exitcode if proc.exitcode is not None else 0


def _setup(env: Env) -> list[str]:
    """Two 4-GPU jobs fill the cluster and are demoted (4 GPU-s each); a 1-GPU newcomer ranks first: the
    round under test preempts one of them and starts the newcomer, and the newcomer keeps its rank for
    4 s of running (so the rounds after the crash are stable)."""
    env.write_config(preemption={"grace_seconds": 15}, scheduler={"policy_options": {"queue_limits": [4.0]}})
    d = env.daemon()
    jobs = [submit_tick(env, 4, 3000, name=f"c{i}", step_time=0.05) for i in range(2)]
    first = d.run_round()
    assert first.status == "applied" and len(first.plan.starts) == 2, first  # type: ignore[union-attr]
    wait_for(lambda: all(progressed(env, j, 30) for j in jobs), 60, "the first two jobs to run for 1.5 s")
    jobs.append(submit_tick(env, 1, 3000, name="newcomer", step_time=0.05))
    return jobs


def _recover_and_check(env: Env, jobs: list[str]) -> None:
    crash_round = max(r.round_id for r in env.store().rounds(limit=5))
    d = env.daemon()  # a restarted daemon: stale intents become "interrupted", then reconciliation
    assert any(a.status == "interrupted" for a in env.store().actions()), "the crash left no interrupted intent"
    for _ in range(3):  # the recovery round and two more: after every round Slurm and the database agree
        result = d.run_round()
        assert result.status in ("applied", "partial"), result.error
        assert consistency_problems(env, jobs) == []
    store = env.store()
    newcomer = jobs[-1]
    assert any(a.kind == "start" and a.round_id >= crash_round for a in store.actions(job_id=newcomer)
               if a.status in ("done", "interrupted")), "the newcomer was never started"
    # the GPUs each running job really uses are the ones the database says
    rows = {r.job_id: r for r in store.jobs()}
    running = [j for j in jobs if rows[j].state in PLACED_STATES]
    assert newcomer in running and len(running) == 2  # the newcomer and the 4-GPU job that was not preempted
    for j in running:
        wait_for(lambda j=j: any(e["event"] == "start" and e.get("tesserae_round") == str(rows[j].assign_round)
                                 for e in env.events(j)), 30, f"job {j} to start its current run")
        start = [e for e in env.events(j) if e["event"] == "start"][-1]
        assert parse_gpus(rows[j].gpus) == {
            start["slurmd_nodename"]: tuple(int(g) for g in start["cuda_visible_devices"].split(","))}
    # preempted jobs kept their progress: every run starts where the last checkpoint left off
    for j in jobs:
        last = 0
        for e in env.events(j):
            if e["event"] == "checkpoint":
                last = e["step"]
            elif e["event"] == "start":
                assert e["step"] == last, (j, e, last)


@pytest.mark.parametrize("point", [pytest.param(p, marks=pytest.mark.every_release) if p in EVERY_RELEASE else p
                                   for p in POINTS])
def test_kill_9_at_each_step_loses_nothing(env: Env, point: str) -> None:
    jobs = _setup(env)
    assert crash_round(env, point) == -9, f"fail point {point} was not reached"
    _recover_and_check(env, jobs)


@pytest.mark.every_release
def test_kill_9_of_the_cli_daemon_mid_round(env: Env) -> None:
    """The same through `tesserae daemon --once`, killed between placing and releasing."""
    jobs = _setup(env)
    release_lock(env.db)  # this test process ran the setup rounds; the CLI daemon takes the state over
    proc = env.daemon_cli("--once", TESSERAE_FAILPOINTS="after-place:1")
    assert proc.returncode == -9, proc.stderr
    assert "fail point after-place reached" in proc.stderr
    _recover_and_check(env, jobs)
