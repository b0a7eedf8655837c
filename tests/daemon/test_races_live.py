"""Ended jobs never run again, one daemon per state, stops never hold up the round: on the real dev cluster.

The jobs follow the job-side protocol (tests/daemon/jobs/tick.py): on the checkpoint signal they
checkpoint and wait for the daemon's requeue-hold; a job told to ``exit`` finishes (exit 0) on the signal
instead, one told to ``ignore`` is a stuck stop. Each race ends the job at a different moment of the
protocol (while it is being preempted, while it is being started, between rounds, inside the grace
period), with and without a kill -9 of the daemon around it, and then checks over several more rounds
that Slurm and the database both keep the job ended and that it never ran again.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest

from tesserae_slurm.daemon.loop import Daemon

from .helpers import Env, progressed, submit_tick, wait_for
from .test_crash import crash_round
from .test_service import Background

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]
GRACE = 8


def _fill(env: Env, on_signal: str = "wait", grace: float = GRACE) -> tuple[Daemon, list[str], str]:
    """Two 4-GPU jobs fill the cluster and are demoted; a 1-GPU newcomer ranks first, so the next round
    preempts one of them and starts the newcomer on its GPUs."""
    env.write_config(preemption={"grace_seconds": grace})
    d = env.daemon()
    jobs = [submit_tick(env, 4, 3000, name=f"f{i}", step_time=0.05, on_signal=on_signal) for i in range(2)]
    first = d.run_round()
    assert first.status == "applied" and first.plan is not None and len(first.plan.starts) == 2, first
    wait_for(lambda: all(progressed(env, j, 20) for j in jobs), 60, "the two 4-GPU jobs to run")
    newcomer = submit_tick(env, 1, 3000, name="newcomer", step_time=0.05)
    return d, jobs, newcomer


def _scancel(env: Env, job: str) -> None:
    subprocess.run(["scancel", job], env=env.os_env(), check=True, timeout=30)


def _starts(env: Env, job: str) -> int:
    return sum(e["event"] == "start" for e in env.events(job))


def _state_in_db(env: Env, job: str) -> str:
    row = env.store().job(job)
    return row.state if row is not None else ""


def _stays_ended(env: Env, d: Daemon, job: str, want: str, rounds: int = 3) -> None:
    """Over several rounds the ended job stays ended in Slurm and in the database, and never runs again."""
    wait_for(lambda: env.squeue()[job]["state"] == want, 30, f"Slurm to list job {job} as {want}")
    ended_at = time.time()
    runs = _starts(env, job)
    for _ in range(rounds):
        d.run_round()
        time.sleep(1.0)
        q = env.squeue()[job]
        assert q["state"] == want and q["restarts"] == 0, (job, q)
        assert _state_in_db(env, job) == want, (job, _state_in_db(env, job))
        assert _starts(env, job) == runs, f"job {job} ran again"
    late = [(a.round_id, a.kind, a.created_at) for a in env.store().actions(job_id=job)
            if a.kind in ("start", "migrate-start") and a.status == "done" and a.created_at > ended_at]
    assert not late, (job, ended_at, late)


def _round_in_thread(d: Daemon) -> threading.Thread:
    t = threading.Thread(target=d.run_round, daemon=True)
    t.start()
    return t


def _preempted(env: Env, jobs: list[str]) -> str:
    """The job the round preempts, from its recorded intent: a job that exits on the signal leaves
    PREEMPTING within a poll, so the state alone can be missed (seen on 22.05, stop 42)."""
    def victim() -> str:
        store = env.store()
        return next((j for j in jobs if any(a.kind == "preempt" for a in store.actions(job_id=j))), "")

    return wait_for(victim, 30, "a job to be preempted")


def test_scancel_while_preempting(env: Env) -> None:
    d, jobs, newcomer = _fill(env)
    t = _round_in_thread(d)
    victim = _preempted(env, jobs)
    wait_for(lambda: any(e["event"] == "checkpoint" for e in env.events(victim)), 20, "the checkpoint signal")
    _scancel(env, victim)  # inside the grace period, while the job waits for its requeue-hold
    t.join(120)
    _stays_ended(env, d, victim, "CANCELLED")
    assert _state_in_db(env, newcomer) in ("STARTING", "RUNNING")


def test_a_job_that_exits_in_the_grace_period_completes_and_never_runs_again(env: Env) -> None:
    d, jobs, newcomer = _fill(env, on_signal="exit")
    t = _round_in_thread(d)
    victim = _preempted(env, jobs)
    t.join(120)
    _stays_ended(env, d, victim, "COMPLETED")
    assert any(e["event"] == "checkpoint" for e in env.events(victim))
    assert _state_in_db(env, newcomer) in ("STARTING", "RUNNING")


def test_scancel_while_starting_and_between_rounds(env: Env) -> None:
    d, jobs, newcomer = _fill(env)
    t = _round_in_thread(d)
    wait_for(lambda: _state_in_db(env, newcomer) == "STARTING", 60, "the newcomer to be started")
    _scancel(env, newcomer)  # between its intent and (or just after) its release
    t.join(120)
    _stays_ended(env, d, newcomer, "CANCELLED")
    running = next(j for j in jobs if _state_in_db(env, j) == "RUNNING")
    _scancel(env, running)  # between rounds
    _stays_ended(env, d, running, "CANCELLED")


@pytest.mark.parametrize("point,how", [("after-signal:1", "scancel"), ("after-signal:1", "exit"),
                                       ("after-intent:1", "scancel"), ("after-place:1", "scancel"),
                                       ("after-release:1", "scancel")])
def test_kill_9_then_the_job_ends_then_restart(env: Env, point: str, how: str) -> None:
    """The daemon dies mid-round; the job being stopped (or started) ends while nobody looks; the
    restarted daemon re-checks the interrupted intents against Slurm and never runs the job again."""
    d, jobs, newcomer = _fill(env, on_signal="exit" if how == "exit" else "wait")
    assert crash_round(env, point) == -9, f"fail point {point} was not reached"
    store = env.store()
    left = {a.job_id: a.kind for a in store.actions(status="intent")}
    if point.startswith(("after-place", "after-release")):
        target = newcomer
    else:
        target = next(j for j in jobs if left.get(j) == "preempt")
    if how == "scancel":
        _scancel(env, target)
    want = "CANCELLED" if how == "scancel" else "COMPLETED"
    wait_for(lambda: env.squeue()[target]["state"] == want, 30, f"job {target} to end ({want})")
    d = env.daemon()  # restart: intents interrupted (under the lock), then reconciled with Slurm
    assert any(a.status == "interrupted" for a in env.store().actions())
    _stays_ended(env, d, target, want)


def test_a_second_daemon_is_refused_while_the_admin_cli_reads(env: Env) -> None:
    env.write_config(scheduler={"round_seconds": 1})
    first = Background(env)
    try:
        first.wait_log(r"round \d+ applied")
        for args in (("--once",), ()):
            proc = env.daemon_cli(*args, timeout=30)
            assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("INFO")]
            assert lines == [lines[0]] and "another tesserae daemon" in lines[0], proc.stderr
        for args in (("jobs",), ("rounds",), ("round", "show", "1"), ("explain", "1")):
            out = env.tesserae(*args)
            assert out.returncode in (0, 2) and "another tesserae daemon" not in out.stderr, (args, out.stderr)
        assert env.tesserae("rounds").returncode == 0
        assert first.proc.poll() is None
    finally:
        assert first.stop() == 0
    assert env.daemon_cli("--once", timeout=60).returncode == 0  # the lock went with the first daemon


def test_sigterm_in_the_grace_period_stops_within_seconds(env: Env) -> None:
    env.write_config(preemption={"grace_seconds": 120}, scheduler={"round_seconds": 1})
    jobs = [submit_tick(env, 4, 3000, name=f"g{i}", step_time=0.05) for i in range(2)]
    daemon = Background(env)
    try:
        wait_for(lambda: all(progressed(env, j, 20) for j in jobs), 60, "the two 4-GPU jobs to run")
        submit_tick(env, 1, 3000, name="newcomer", step_time=0.05)
        daemon.wait_log(r"grace period up to 120s")
        t0 = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        code = daemon.proc.wait(30)
        took = time.monotonic() - t0
    finally:
        daemon.stop()
    print(f"SIGTERM mid-grace: exited {code} after {took:.2f} s")
    # within seconds, not after the 120 s grace (a quarter of it leaves room for a loaded machine)
    assert code == 0 and took < 30, (code, took, daemon.text()[-2000:])
    victim = next(j for j in jobs if _state_in_db(env, j) == "PREEMPTING")
    d = env.daemon()  # the next start finishes the preemption (signal again, grace, requeue-hold)
    env.write_config(preemption={"grace_seconds": 3})
    d.configure(__import__("tesserae_slurm.site.load", fromlist=["load_config"]).load_config(env.config))
    d.run_round()
    assert _state_in_db(env, victim) == "PENDING" and env.squeue()[victim]["state"] == "PENDING"


def test_a_stuck_stop_does_not_delay_unrelated_starts(env: Env) -> None:
    """A 4-GPU job that ignores the checkpoint signal is preempted for two 4-GPU newcomers: the one that
    goes to the other node starts at once, not after the grace period."""
    grace = 12
    env.write_config(preemption={"grace_seconds": grace})
    d = env.daemon()
    stuck = submit_tick(env, 4, 3000, name="stuck", step_time=0.05, on_signal="ignore")
    d.run_round()
    wait_for(lambda: progressed(env, stuck, 20), 60, "the stuck job to run")
    news = [submit_tick(env, 4, 3000, name=f"n{i}", step_time=0.05) for i in range(2)]
    t0 = time.time()
    result = d.run_round()
    took = time.time() - t0
    assert result.status == "applied", result.error
    assert result.plan is not None and [a.job_id for a in result.plan.stops] == [stuck]
    wait_for(lambda: all(_starts(env, j) == 1 for j in news), 60, "both newcomers to run")
    first = {j: min(e["time"] for e in env.events(j) if e["event"] == "start") - t0 for j in news}
    print(f"stuck stop: round {took:.1f} s (grace {grace} s); newcomers ran after "
          + ", ".join(f"{v:.1f} s" for v in sorted(first.values())))
    # judged by the order of the daemon's own actions, which load cannot change: the unrelated start was
    # sent before the stuck job's requeue-hold ended its grace, the other one only after it
    actions = {(a.job_id, a.kind): a for a in env.store().actions(round_id=result.round_id) if a.status == "done"}
    stopped_at = actions[(stuck, "preempt")].finished_at
    starts = sorted((actions[(j, "start")].finished_at, j) for j in news)
    assert starts[0][0] < stopped_at < starts[1][0], (starts, stopped_at)
    assert stopped_at - t0 >= grace - 1, stopped_at - t0  # the grace was waited out: the job ignored the signal
    assert took < grace + 20, took


@pytest.mark.parametrize("how", ["scancel", "finish"])
def test_a_job_that_ended_before_the_stop_phase_is_not_requeued(env: Env, how: str) -> None:
    """The round's snapshot still shows the job running, but it ended before the stop phase reached it
    (the signal is refused): the requeue-hold must not bring it back (Slurm requeues a finished batch
    job on a plain requeuehold; `Incomplete` leaves it ended)."""
    from tesserae_slurm.daemon.round.actions import StopItem
    from tesserae_slurm.daemon.round.stop_start import ApplyResult

    env.write_config(preemption={"grace_seconds": GRACE})
    d = env.daemon()
    job = submit_tick(env, 2, 3000 if how == "scancel" else 30, name="ends", step_time=0.05)
    d.run_round()
    wait_for(lambda: progressed(env, job, 10), 60, "the job to run")
    seen = {str(j.job_id): j for j in d.backend.list_jobs()}[job]  # the round's (now stale) view
    if how == "scancel":
        _scancel(env, job)
    want = "CANCELLED" if how == "scancel" else "COMPLETED"
    wait_for(lambda: env.squeue()[job]["state"] == want, 30, f"job {job} to end")
    time.sleep(4)  # a plain requeuehold brings back a job whose end has settled (seen on 22.05), not one still ending
    rid = d.journal.begin_round(time.time(), "test", False)
    result = ApplyResult()
    d.applier.stop_jobs(rid, [StopItem("preempt", job, {"node1": (0, 1)})], {job: seen}, result)
    assert result.ended == {job: want} and not result.stopped, result
    d.journal.update_round(rid, status="applied")
    _stays_ended(env, d, job, want)
