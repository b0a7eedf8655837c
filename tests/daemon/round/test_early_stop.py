"""Stops that end with the checkpoint, on the in-memory Slurm: while the applier stops a job it
requeue-holds it as soon as the job's launcher records that the payload checkpointed and exited
(``preemption.stop_records_dir``), and only for the record of the run it signalled, owned by the job's
user, a regular file. Otherwise the grace is the bound, as before. The job side: test_launcher.py; on
a real Slurm: test_early_stop_live.py."""

from __future__ import annotations

import os
import pwd
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tesserae_slurm.daemon.round.actions import StopItem
from tesserae_slurm.daemon.round.stop_start import ApplyResult
from tesserae_slurm.daemon.state.store import JobRow
from tesserae_slurm.harness.stop_record import StopRecord
from tesserae_slurm.slurm import SlurmJobState as S

from ..fake_slurm import managed
from .world import World, make_world

ME = pwd.getpwuid(os.getuid()).pw_name
GRACE = 4.0


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = make_world(tmp_path, preemption={"grace_seconds": GRACE, "stop_records_dir": str(tmp_path / "stops")})
    (tmp_path / "stops").mkdir()
    w.slurm.jobs = {"5": managed(5, state=S.RUNNING, user=ME, restart_count=1)}
    with w.store.session() as s:
        s.add(JobRow(job_id="5", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:0", user=ME))
    return w


def _stop(world: World, on_signal: object = None) -> tuple[float, float, ApplyResult]:
    """Stop job 5; returns the wall times of its signal and of its requeue-hold, and the result."""
    times: dict[str, float] = {}

    def seen(method: str, ids: tuple[str, ...]) -> None:
        times.setdefault(method, time.monotonic())
        if method == "signal" and callable(on_signal):
            on_signal()
    world.slurm.on_call = seen
    applier, result = world.applier(), ApplyResult()
    applier.poll_s = 0.05
    applier.stop_jobs(world.begin_round(), [StopItem("preempt", "5", {"node1": (0,)})],
                      {j: sj for j, sj in world.slurm.jobs.items()}, result)
    return times["signal"], times["requeue_hold"], result


def _record(world: World, restart: int = 1) -> Path:
    rec = StopRecord(world.cfg.preemption.stop_records_dir, "5", restart)
    assert rec.write(0)
    return rec.path


def test_the_record_of_the_signalled_run_ends_the_stop_at_once(world: World) -> None:
    signalled, held, result = _stop(world, on_signal=lambda: _record(world))
    assert held - signalled < GRACE / 2  # not the grace: the record
    assert result.stopped == {"5"} and world.store.job("5").state == "PENDING"
    assert world.slurm.writes() == [("signal", ("5",)), ("requeue_hold", ("5",))]
    assert not (Path(world.cfg.preemption.stop_records_dir) / "5.1.stopped").exists()  # taken: removed


@pytest.mark.parametrize("spoil", ["earlier run", "symlink", "other owner", "unknown user", "no directory"])
def test_a_record_that_does_not_check_out_leaves_the_grace_as_the_bound(world: World, spoil: str) -> None:
    stops = Path(world.cfg.preemption.stop_records_dir)

    def write() -> None:
        if spoil == "earlier run":
            _record(world, restart=0)
        elif spoil == "symlink":  # a good record elsewhere, linked in
            elsewhere = stops.parent / "elsewhere"
            elsewhere.mkdir()
            os.symlink(StopRecord(str(elsewhere), "5", 1).path, stops / "5.1.stopped")
            assert StopRecord(str(elsewhere), "5", 1).write(0)
        elif spoil == "other owner":
            os.chown(_record(world), 65534, 65534)  # nobody's file for a job of ours
        elif spoil == "unknown user":
            world.slurm.jobs["5"] = replace(world.slurm.jobs["5"], user="no-such-user-here")
            _record(world)
        else:
            _record(world)
            world.cfg = replace(world.cfg, preemption=replace(world.cfg.preemption, stop_records_dir=""))
    if spoil == "no directory":
        write()
        signalled, held, result = _stop(world)
    else:
        signalled, held, result = _stop(world, on_signal=write)
    assert held - signalled >= GRACE * 0.9, spoil
    assert result.stopped == {"5"}


def test_a_job_that_ended_before_its_record_was_read_is_not_requeued(world: World) -> None:
    """scancel after the launcher wrote the record: the requeue-hold (Incomplete) leaves it ended."""
    def cancel_and_record() -> None:
        world.slurm.finish("5", S.CANCELLED)
        _record(world)
    _, _, result = _stop(world, on_signal=cancel_and_record)
    assert result.ended == {"5": "CANCELLED"} and not result.stopped
    assert world.slurm.jobs["5"].state is S.CANCELLED and world.slurm.jobs["5"].restart_count == 1
    assert world.store.job("5").state == "CANCELLED"


def test_the_daemon_makes_the_shared_directory_as_a_sticky_one(tmp_path: Path) -> None:
    from tesserae_slurm.daemon.loop import Daemon

    stops = tmp_path / "shared" / "stops"
    w = make_world(tmp_path, preemption={"stop_records_dir": str(stops)})
    Daemon(w.cfg, w.slurm, w.store)
    assert stops.is_dir() and stops.stat().st_mode & 0o7777 == 0o1777
