"""The state database (daemon/state/store.py) on a real SQLite file: opening it (one-line errors, readers
of a stopped daemon's file), its lock (one daemon per state database, held through the kernel's flock,
so another process, or another descriptor of the same file, is refused while it is held), job updates,
and the queries the admin commands, the feedback and retention read."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tesserae_slurm.daemon.state import store
from tesserae_slurm.daemon.state.journal import Journal
from tesserae_slurm.daemon.state.store import (
    UNSET,
    ActionRow,
    AdminRow,
    DaemonRunning,
    EventRow,
    JobRow,
    JobUpdate,
    PlacementRow,
    RoundRow,
    SlurmCallRow,
    Store,
    acquire_lock,
    dumps,
    lock_path,
    release_lock,
    unchanged_dropped,
)
from tesserae_slurm.model import InputError


@contextmanager
def _immutable(d: Path) -> Iterator[None]:
    """Nobody may create a file in ``d``, root included (chattr +i binds root; chmod does not)."""
    subprocess.run(["chattr", "+i", str(d)] if os.geteuid() == 0 else ["chmod", "555", str(d)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(d)] if os.geteuid() == 0 else ["chmod", "755", str(d)], check=True)


# ---- opening ----------------------------------------------------------------------------------------
def test_the_daemon_creates_its_database_and_the_directories_above_it(tmp_path: Path) -> None:
    db = tmp_path / "var" / "lib" / "tesserae" / "state.db"
    s = Store.open(db)
    s.set_kv("k", b"v")
    s.close()
    assert Store.open(db, read_only=True).get_kv("k") == b"v"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # readers never wait for the daemon


def test_a_reader_of_a_database_that_does_not_exist_is_told_the_daemon_has_not_run(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with pytest.raises(InputError) as exc:
        Store.open(db, read_only=True)
    assert str(exc.value) == f"state database {db} does not exist (has the daemon run yet?)"
    assert not db.exists()


def test_a_database_path_below_a_file_is_one_line_naming_the_directory(tmp_path: Path) -> None:
    (tmp_path / "etc").write_text("a file, not a directory")
    db = tmp_path / "etc" / "state.db"
    with pytest.raises(InputError) as exc:
        Store.open(db)
    assert str(exc.value) == (f"cannot open state database {db} for writing: Not a directory "
                              f"(may this user write to {tmp_path / 'etc'}?)")


def test_a_database_the_daemon_makes_is_closed_to_other_users_whatever_the_umask(tmp_path: Path) -> None:
    db = tmp_path / "state" / "state.db"
    old = os.umask(0o022)
    try:
        Store.open(db).close()
    finally:
        os.umask(old)
    assert (os.stat(db.parent).st_mode & 0o777, os.stat(db).st_mode & 0o777) == (0o750, 0o640)


def test_a_database_that_sqlite_cannot_open_is_one_line_in_sqlites_words(tmp_path: Path) -> None:
    (tmp_path / "state.db").mkdir()  # a directory where the file should be
    with pytest.raises(InputError) as exc:
        Store.open(tmp_path / "state.db")
    assert str(exc.value) == (f"cannot open state database {tmp_path / 'state.db'} for writing: unable to open "
                              f"database file (may this user write to {tmp_path}?)")


def test_a_file_that_is_not_a_database_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "tesserae.yaml"
    db.write_text("scheduler: {policy: fifo}\n")  # --db given the config file by mistake
    with pytest.raises(InputError) as exc:
        Store.open(db, read_only=True)
    assert str(exc.value) == f"cannot read state database {db}: file is not a database (may this user read it?)"
    with pytest.raises(InputError, match=r"^cannot open state database .* for writing: file is not a database"):
        Store.open(db)
    assert db.read_text() == "scheduler: {policy: fifo}\n"  # nothing lost


def test_a_reader_names_a_file_without_tesserae_tables(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 1")  # a SQLite file with no table at all
    with pytest.raises(InputError) as exc:
        Store.open(db, read_only=True)
    assert str(exc.value) == f"state database {db} has no tesserae schema (not a tesserae state file?)"


def test_a_stopped_daemons_database_is_read_where_the_reader_may_not_create_files(tmp_path: Path) -> None:
    # The daemon stopped: its WAL file has no -shm beside it, and a reader who may not write to the directory
    # cannot create one; such a file is read as immutable.
    d = tmp_path / "state"
    d.mkdir()
    s = Store.open(d / "state.db")
    s.add_rows([JobRow(job_id="7", num_gpus=2, submit_time=1.0)])
    s.close()
    assert sorted(p.name for p in d.iterdir()) == ["state.db"]
    with _immutable(d):
        reader = Store.open(d / "state.db", read_only=True)
        assert [(j.job_id, j.num_gpus) for j in reader.jobs()] == [("7", 2)]
        reader.close()


# ---- the lock -----------------------------------------------------------------------------------------
def test_the_lock_file_sits_beside_the_database_and_home_is_expanded() -> None:
    assert lock_path("~/tesserae/state.db") == Path.home() / "tesserae" / "state.db.lock"
    assert lock_path(Path("/var/lib/t/state.db")) == Path("/var/lib/t/state.db.lock")


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


def test_the_lock_file_names_only_the_holder_and_only_its_owner_group_may_read_it(tmp_path: Path) -> None:
    db = tmp_path / "new" / "state.db"
    db.parent.mkdir()
    lock_path(db).write_text("123456789012\n")  # left by an earlier daemon with a longer pid
    umask = os.umask(0)
    os.umask(umask)
    try:
        lock_path(db).unlink()
        acquire_lock(db)
        assert lock_path(db).read_text() == f"{os.getpid()}\n"
        assert stat.S_IMODE(lock_path(db).stat().st_mode) == 0o640 & ~umask
    finally:
        release_lock(db)
    lock_path(db).write_text("123456789012\n")
    try:
        acquire_lock(db)
        assert lock_path(db).read_text() == f"{os.getpid()}\n"
    finally:
        release_lock(db)


def test_the_lock_creates_the_directories_above_it(tmp_path: Path) -> None:
    db = tmp_path / "a" / "b" / "state.db"
    try:
        assert acquire_lock(db) == lock_path(db) and lock_path(db).exists()
    finally:
        release_lock(db)


def test_a_lock_file_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "etc").write_text("a file")
    db = tmp_path / "etc" / "state.db"
    with pytest.raises(InputError) as exc:
        acquire_lock(db)
    assert str(exc.value) == (f"cannot create the daemon's lock file {lock_path(db)}: File exists "
                              f"(may this user write to {tmp_path / 'etc'}?)")


def test_a_holder_that_wrote_no_pid_is_named_as_unknown(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    fd = os.open(lock_path(db), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a holder between its flock and writing its pid
        with pytest.raises(DaemonRunning, match=r"another tesserae daemon \(pid \?\) is running"):
            acquire_lock(db)
        os.pwrite(fd, b"\xff\xfe\n", 0)  # not even text: still one line
        with pytest.raises(DaemonRunning, match="another tesserae daemon \\(pid \ufffd\ufffd\\) is running"):
            acquire_lock(db)
    finally:
        os.close(fd)


def test_each_database_has_its_own_lock(tmp_path: Path) -> None:
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    try:
        acquire_lock(one)
        acquire_lock(two)
        for db in (one, two):  # each file locked: another descriptor of it is refused
            fd = os.open(lock_path(db), os.O_RDWR)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)
    finally:
        release_lock(one)
        release_lock(two)


def test_release_of_a_lock_not_held_does_nothing(tmp_path: Path) -> None:
    release_lock(tmp_path / "state.db")
    assert not store._LOCKS.get(str(lock_path(tmp_path / "state.db").resolve()))


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


# ---- job updates ----------------------------------------------------------------------------------------
def test_an_update_writes_only_the_columns_it_sets_and_shows_the_others_as_unset() -> None:
    up = JobUpdate(state="RUNNING", reason="")
    assert up.columns() == {"state": "RUNNING", "reason": ""}
    assert repr(UNSET) == "UNSET" and "slurm_state=UNSET" in repr(up)


def test_cleared_takes_every_trace_of_a_placement_and_keeps_the_rest() -> None:
    assert JobUpdate(state="PENDING", reason="preempted").cleared() == JobUpdate(
        state="PENDING", reason="preempted", nodes="", gpus="", assignment="", assign_round=None, placed_at=None,
        packed_with="")


def test_first_start_is_written_once_and_counters_add(tmp_path: Path) -> None:
    journal = Journal(Store.open(tmp_path / "state.db"))
    journal.store.add_rows([JobRow(job_id="1", num_gpus=1, submit_time=0.0, first_start=5.0, preemptions=2,
                                   migrations=1),
                            JobRow(job_id="2", num_gpus=1, submit_time=0.0)])
    up = JobUpdate(first_start=9.0, preemptions_added=1, migrations_added=2)
    journal.update_jobs({"1": up, "2": up})
    one, two = journal.store.job("1"), journal.store.job("2")
    assert (one.first_start, one.preemptions, one.migrations) == (5.0, 3, 3)
    assert (two.first_start, two.preemptions, two.migrations) == (9.0, 1, 2)


def test_an_update_against_the_row_as_read_writes_only_what_changed(tmp_path: Path) -> None:
    """``known``: the row as last read; a field it holds already is not written (so a row another writer changed
    meanwhile keeps that change), one it does not carry is, and a row with nothing new is not touched."""
    journal = Journal(Store.open(tmp_path / "state.db"))
    journal.store.add_rows([JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="PENDING", reason="waiting",
                                   first_start=None if j == "3" else 5.0, preemptions=1) for j in ("1", "2", "3")])
    with journal.store.session() as s:  # what a reader would not know: the rows changed after they were read
        s.execute(text("update jobs set reason = 'changed', last_seen = 7.0"))
    known = journal.facts(["1", "2", "3"])
    known = {j: replace(f, reason="waiting") for j, f in known.items()}  # as read before the change
    journal.update_jobs({
        "1": JobUpdate(state="PENDING", reason="waiting", first_start=9.0),  # nothing new: untouched
        "2": JobUpdate(state="RUNNING", reason="waiting", last_seen=8.0, preemptions_added=1),
        "3": JobUpdate(first_start=9.0),  # none yet: written
    }, known=known)
    rows = {r.job_id: r for r in journal.store.jobs()}
    assert (rows["1"].state, rows["1"].reason, rows["1"].first_start) == ("PENDING", "changed", 5.0)
    assert (rows["2"].state, rows["2"].reason, rows["2"].last_seen, rows["2"].preemptions) == ("RUNNING", "changed",
                                                                                                8.0, 2)
    assert rows["3"].first_start == 9.0
    assert unchanged_dropped({"reason": "x", "state": "PENDING"}, object()) == {"reason": "x", "state": "PENDING"}


def test_seen_active_stamps_every_row_not_finished_and_only_those(tmp_path: Path) -> None:
    journal = Journal(Store.open(tmp_path / "state.db"))
    journal.store.add_rows([JobRow(job_id=j, num_gpus=1, submit_time=0.0, state=st, last_seen=1.0)
                            for j, st in (("1", "PENDING"), ("2", "RUNNING"), ("3", "COMPLETED"), ("4", "LOST"))])
    journal.seen_active(50.0)
    assert {r.job_id: r.last_seen for r in journal.store.jobs()} == {"1": 50.0, "2": 50.0, "3": 1.0, "4": 1.0}


# ---- what the database enforces ------------------------------------------------------------------------------
def test_every_connection_checks_references_and_waits_for_the_writer(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    with s.engine.connect() as conn:
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 5000
    with pytest.raises(IntegrityError):
        s.add_rows([PlacementRow(round_id=99, job_id="1", gpus="n1:0")])  # no round 99


def test_dumps_is_compact_and_sorted() -> None:
    assert dumps({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'


# ---- queries -----------------------------------------------------------------------------------------------
def _history(s: Store) -> None:
    """Rounds 1-3 (3 failed); actions in rounds 1 and 2, added in reverse order."""
    rows: list[object] = [RoundRow(round_id=r, started_at=10.0 * r, finished_at=10.0 * r + 5 if r < 3 else None,
                                   policy="p", status="failed" if r == 3 else "applied") for r in (1, 2, 3)]
    s.add_rows(rows)  # type: ignore[arg-type]
    s.add_rows([ActionRow(round_id=r, seq=q, job_id=j, kind=k, status=st, created_at=0.0) for r, q, j, k, st in (
        (2, 2, "1", "migrate-start", "done"), (2, 1, "11", "start", "done"), (2, 0, "1", "preempt", "done"),
        (1, 1, "1", "migrate-start", "done"), (1, 0, "1", "start", "failed"))])


def test_actions_come_in_round_and_sequence_order_filtered_by_round_status_and_job(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    _history(s)
    assert [(a.round_id, a.seq) for a in s.actions()] == [(1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]
    assert [(a.round_id, a.seq) for a in s.actions(round_id=2)] == [(2, 0), (2, 1), (2, 2)]
    assert [(a.round_id, a.seq) for a in s.actions(status="done")] == [(1, 1), (2, 0), (2, 1), (2, 2)]
    assert [(a.round_id, a.seq) for a in s.actions(job_id="11")] == [(2, 1)]
    # what the feedback reads: each job's done starts and moves, in the order they happened
    assert [(a.round_id, a.seq, a.kind) for a in s.done_actions(["1"], ("start", "migrate-start", "preempt"))] == [
        (1, 1, "migrate-start"), (2, 0, "preempt"), (2, 2, "migrate-start")]
    assert s.done_actions(["1"], ("start",)) == []  # its start failed; 11's is another job's
    assert [(a.job_id, a.kind) for a in s.done_actions(["1", "11"], ("start", "preempt"))] == [
        ("1", "preempt"), ("11", "start")]


def test_rounds_are_newest_first_and_spans_are_in_order_of_the_statuses_asked(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    _history(s)
    assert [r.round_id for r in s.rounds(limit=2)] == [3, 2] and s.round(2).started_at == 20.0
    assert s.round_spans(2, ("applied", "failed")) == [(2, 20.0, 25.0), (3, 30.0, None)]
    assert s.round_spans(1, ("applied",)) == [(1, 10.0, 15.0), (2, 20.0, 25.0)]


def test_queries_by_job_id_read_lists_longer_than_one_sqlite_statement_takes(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    ids = [str(i) for i in range(1, 1202)]
    s.add_rows([RoundRow(round_id=1, started_at=0.0, policy="p"), RoundRow(round_id=2, started_at=1.0, policy="p")])
    s.add_rows([JobRow(job_id=j, num_gpus=1, submit_time=0.0) for j in [*ids, "0"]])
    s.add_rows([PlacementRow(round_id=r, job_id=j, gpus="n1:0") for r in (1, 2) for j in [*ids, "0"]])
    s.add_rows([ActionRow(round_id=1, seq=i, job_id=j, kind="start", status="done", created_at=0.0)
                for i, j in enumerate([*ids, "0"])])
    assert sorted(int(r.job_id) for r in s.jobs_by_id(ids)) == list(range(1, 1202))
    placed = s.placements_of([2], ids)
    assert sorted(int(p.job_id) for p in placed) == list(range(1, 1202)) and {p.round_id for p in placed} == {2}
    assert s.placements_of([], ids) == []
    assert sorted(int(a.job_id) for a in s.done_actions(ids, ("start",))) == list(range(1, 1202))


def test_jobs_come_in_arrival_order_and_by_state(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    s.add_rows([JobRow(job_id="2", num_gpus=1, submit_time=5.0, state="RUNNING"),
                JobRow(job_id="10", num_gpus=1, submit_time=1.0, state="PENDING"),
                JobRow(job_id="1", num_gpus=1, submit_time=5.0, state="COMPLETED")])
    assert [j.job_id for j in s.jobs()] == ["10", "1", "2"]
    assert [j.job_id for j in s.jobs(("RUNNING", "COMPLETED"))] == ["1", "2"]


def test_slurm_calls_of_a_job_match_whole_job_ids(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    s.add_rows([SlurmCallRow(round_id=1, time=0.0, method="release", job_ids="11,12"),
                SlurmCallRow(round_id=2, time=0.0, method="release", job_ids="1"),
                SlurmCallRow(round_id=2, time=0.0, method="hold", job_ids="12,1")])
    assert [c.method for c in s.slurm_calls(job_id="1")] == ["release", "hold"]
    assert [c.job_ids for c in s.slurm_calls(round_id=2)] == ["1", "12,1"]
    assert len(s.slurm_calls()) == 3


def test_events_are_newest_first_by_job_and_bounded(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    s.add_rows([EventRow(time=float(t), kind="k", job_id=j, message=f"{j}@{t}") for t, j in
                ((1, "1"), (2, "2"), (3, "1"), (4, "1"))])
    assert [e.message for e in s.events("1", limit=2)] == ["1@4", "1@3"]
    assert [e.message for e in s.events()] == ["1@4", "1@3", "2@2", "1@1"]


def test_operators_requests_in_the_order_taken_by_target_and_status(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "state.db")
    s.add_admin_actions([AdminRow(time=float(t), user="op", uid=0, command=c, target=j, status=st)
                         for t, c, j, st in ((3, "hold", "1", "done"), (1, "release", "2", "accepted"),
                                             (2, "cancel", "1", "accepted"))])
    assert [a.command for a in s.admin_actions()] == ["hold", "release", "cancel"]
    assert [a.command for a in s.admin_actions(target="1")] == ["hold", "cancel"]
    assert [a.command for a in s.admin_actions(statuses=("accepted",))] == ["release", "cancel"]
    s.finish_admin_actions([a.id for a in s.admin_actions(target="1")], "failed", "gone")
    assert [(a.status, a.note) for a in s.admin_actions()] == [("failed", "gone"), ("accepted", ""), ("failed", "gone")]
