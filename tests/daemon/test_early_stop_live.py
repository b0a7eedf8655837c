"""Stops that end with the checkpoint, on the real dev cluster: a stopped job whose payload checkpointed and
exited is requeue-held as soon as its launcher records it (``preemption.stop_records_dir``), not after the
grace; a job whose payload does not exit takes the grace; a job that ends (scancel, exit) while its stop
ends early is never requeued. Each stop is an operator's `tesserae requeue`, carried out by the next round.

The jobs run tests/daemon/jobs/tick.py (``submit_tick``): ``checkpoint`` exits after its checkpoint (the
launcher waits for the requeue-hold and writes the record), ``wait`` checkpoints and waits itself (no
record: the grace), ``exit`` ends the job on the signal. Bounds are fractions of the grace they rule out
(docs/testing.md); the latency itself is measured by `./dev bench responsive`.
"""

from __future__ import annotations

import subprocess
import threading

import pytest

from tesserae_slurm.daemon.loop import Daemon
from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.state.store import ActionRow
from tesserae_slurm.harness.stop_record import StopRecord
from tesserae_slurm.site.load import load_config

from .helpers import Env, progressed, submit_tick, wait_for

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]
LONG_GRACE = 60.0


def _running(env: Env, grace: float, on_signal: str) -> tuple[Daemon, str]:
    env.write_config(scheduler={"policy": "fifo", "round_seconds": 300, "policy_options": {}},
                     preemption={"grace_seconds": grace, "stop_records_dir": str(env.tmp / "stops")})
    d = env.daemon()
    job = submit_tick(env, 1, 100_000, name=f"stop-{on_signal}", step_time=0.05, on_signal=on_signal)
    assert d.run_round().status == "applied"
    wait_for(lambda: progressed(env, job, 20), 60, f"job {job} to run")
    return d, job


def _ask_requeue(env: Env, job: str) -> None:
    """`tesserae requeue JOB`: the request file the daemon takes in at its next round."""
    cfg = load_config(env.config)
    admin.ensure_dir(admin.requests_dir(cfg))  # `tesserae daemon` makes it; here the daemon is in-process
    admin.submit(cfg, "requeue", job)


def _requeue(env: Env, d: Daemon, job: str) -> ActionRow:
    """`tesserae requeue JOB`, carried out by a round; returns the stop's action."""
    _ask_requeue(env, job)
    result = d.run_round()
    assert result.status in ("applied", "partial"), result
    (stop,) = [a for a in env.store().actions(job_id=job) if a.kind == "requeue"]
    assert stop.finished_at is not None
    return stop


def _restarts(env: Env, job: str) -> int:
    return int(env.squeue()[job]["restarts"])


def test_a_stop_ends_when_the_payload_has_checkpointed(env: Env) -> None:
    d, job = _running(env, LONG_GRACE, "checkpoint")
    stop = _requeue(env, d, job)
    assert stop.status == "done" and not stop.error, stop.error
    assert stop.finished_at - stop.created_at < LONG_GRACE / 3, (stop.created_at, stop.finished_at)
    q = env.squeue()[job]
    assert q["state"] == "PENDING" and _restarts(env, job) == 1, q
    assert any(e["event"] == "checkpoint" for e in env.events(job))
    assert not list((env.tmp / "stops").iterdir())  # the record is gone with the run
    # the next round runs it again, from its checkpoint
    assert d.run_round().status == "applied"
    wait_for(lambda: sum(e["event"] == "start" for e in env.events(job)) == 2, 60, f"job {job} to run again")
    starts = [e for e in env.events(job) if e["event"] == "start"]
    checkpoint = next(e for e in env.events(job) if e["event"] == "checkpoint")
    assert starts[1]["step"] == checkpoint["step"] > 0


def test_a_stop_takes_the_grace_when_the_payload_does_not_exit(env: Env) -> None:
    grace = 6.0
    d, job = _running(env, grace, "wait")
    stop = _requeue(env, d, job)
    assert stop.status == "done" and stop.finished_at - stop.created_at >= grace
    assert env.squeue()[job]["state"] == "PENDING" and _restarts(env, job) == 1
    assert not (env.tmp / "stops").exists() or not list((env.tmp / "stops").iterdir())


def _stop_in_thread(env: Env, d: Daemon, job: str) -> threading.Thread:
    _ask_requeue(env, job)
    t = threading.Thread(target=d.run_round, daemon=True)
    t.start()
    wait_for(lambda: any(e["event"] == "checkpoint" for e in env.events(job)), 60, f"job {job} to be signalled")
    return t


def _stays_ended(env: Env, d: Daemon, job: str, want: str) -> None:
    wait_for(lambda: env.squeue()[job]["state"] == want, 30, f"Slurm to list job {job} as {want}")
    for _ in range(2):
        assert d.run_round().status in ("applied", "partial")
        q = env.squeue()[job]
        assert q["state"] == want and q["restarts"] == 0, q
        row = env.store().job(job)
        assert row is not None and row.state == want, row.state if row else None
    assert sum(e["event"] == "start" for e in env.events(job)) == 1, f"job {job} ran again"


def test_a_job_cancelled_after_its_record_is_not_requeued(env: Env) -> None:
    """The worst order: the record is there and the job has been cancelled when the daemon reads it
    (its payload waits, so the test writes the record itself, as the job's launcher would)."""
    d, job = _running(env, LONG_GRACE, "wait")
    t = _stop_in_thread(env, d, job)
    subprocess.run(["scancel", job], env=env.os_env(), check=True, timeout=30)
    assert StopRecord(str(env.tmp / "stops"), job, 0).write(0)
    t.join(LONG_GRACE + 60)
    assert not t.is_alive()
    _stays_ended(env, d, job, "CANCELLED")


def test_a_job_that_exits_during_an_early_stop_is_not_requeued(env: Env) -> None:
    """The payload exits on the signal and so does its launcher (the job ends, COMPLETED); a record of
    that run appears as well (a launcher that recorded, then ended): the job stays ended."""
    d, job = _running(env, LONG_GRACE, "exit")
    t = _stop_in_thread(env, d, job)
    assert StopRecord(str(env.tmp / "stops"), job, 0).write(0)
    t.join(LONG_GRACE + 60)
    assert not t.is_alive()
    _stays_ended(env, d, job, "COMPLETED")
