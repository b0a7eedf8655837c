"""The state database's lock: one daemon per state database (daemon/state/store.py), held through the
kernel's flock, so another process, or another descriptor of the same file, is refused while it is held."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tesserae_slurm.daemon.state import store
from tesserae_slurm.daemon.state.store import DaemonRunning, acquire_lock, lock_path, release_lock


def test_a_second_daemon_on_the_same_database_is_refused_naming_the_first(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    assert acquire_lock(db) == lock_path(db)
    try:
        held = dict(store._LOCKS)
        store._LOCKS.clear()  # as another process sees it: its own descriptor of the same lock file
        try:
            with pytest.raises(DaemonRunning, match=rf"another tesserae daemon \(pid {os.getpid()}\) is running "
                                                    rf"on {db}; one daemon per state database"):
                acquire_lock(db)
            assert not store._LOCKS  # the refused one holds nothing
        finally:
            store._LOCKS.update(held)
        assert acquire_lock(db) == lock_path(db)  # the holder itself may ask again (its forked children too)
        assert lock_path(db).read_text() == f"{os.getpid()}\n"
    finally:
        release_lock(db)


def test_the_lock_holds_across_processes_and_is_free_once_its_holder_is_killed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tesserae_slurm.daemon.state.store import acquire_lock; "
                               "acquire_lock(sys.argv[1]); print('held', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(DaemonRunning, match=rf"\(pid {holder.pid}\)"):
            acquire_lock(db)
    finally:
        holder.kill()  # kill -9: no clean-up of its own; the kernel drops the flock
        holder.wait()
    try:
        assert acquire_lock(db) == lock_path(db)
    finally:
        release_lock(db)


def test_release_gives_the_lock_to_the_next_daemon(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    acquire_lock(db)
    release_lock(db)
    out = subprocess.run([sys.executable, "-c", "import sys; from tesserae_slurm.daemon.state.store import "
                          "acquire_lock; acquire_lock(sys.argv[1])", str(db)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
