"""Schema migrations (daemon/state/schema.py): the migrations build exactly the models, a fresh database is at
HEAD, a database newer than this tesserae or of an unknown old kind is refused with one line, and an
upgrade leaves a consistent backup. The upgrade of a real pre-migration database is test_upgrade_live.py."""

from __future__ import annotations

import os
import sqlite3

import pytest
from sqlalchemy import create_engine

from tesserae_slurm.daemon.state import schema
from tesserae_slurm.daemon.state.store import Base, Store
from tesserae_slurm.model import InputError


def test_head_is_the_newest_migration_and_migrations_build_the_models(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(schema._alembic_config(None))
    assert [s.revision for s in scripts.walk_revisions()][::-1] == list(schema.REVISIONS)
    assert scripts.get_current_head() == schema.HEAD
    Store.open(tmp_path / "state.db").close()
    engine = create_engine(f"sqlite:///{tmp_path / 'state.db'}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    # a model changed without a migration shows up here: write one (docs/daemon.md, "Upgrading")
    assert diff == [], diff


def test_fresh_database_is_at_head_without_backup(tmp_path):
    db = tmp_path / "state.db"
    Store.open(db).close()
    assert [p.name for p in tmp_path.iterdir() if ".bak-" in p.name] == []
    with sqlite3.connect(db) as c:
        assert c.execute("select version_num from alembic_version").fetchall() == [(schema.HEAD,)]
        assert c.execute("select value from kv where key='schema_version'").fetchone() == (b"3",)
    Store.open(db, read_only=True).close()


def _set_rev(db, rev):
    with sqlite3.connect(db) as c:
        c.execute("update alembic_version set version_num=?", (rev,))


def test_newer_database_is_refused_by_daemon_and_readers(tmp_path):
    db = tmp_path / "state.db"
    Store.open(db).close()
    _set_rev(db, "9999")
    with pytest.raises(InputError, match=r"is at schema 9999, newer than this tesserae \(" + schema.HEAD + r"\)") as exc:
        Store.open(db)
    assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match=r"is at schema 9999, newer than this tesserae \(" + schema.HEAD + r"\): use the newer"):
        Store.open(db, read_only=True)
    assert [p.name for p in tmp_path.iterdir() if ".bak-" in p.name] == []  # refused before any backup


def _at(db, rev):
    """A database built by the migrations up to ``rev`` only (what that tesserae would have written)."""
    from alembic import command

    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        command.upgrade(schema._alembic_config(conn), rev)
        conn.commit()
    engine.dispose()


def test_an_older_revision_is_upgraded_after_a_backup(tmp_path):
    db = tmp_path / "state.db"
    _at(db, "0001")
    with sqlite3.connect(db) as c:
        c.execute("insert into kv values ('policy_state:x', ?)", (b"\x80\x04N.",))  # pickle of None, before 0002
        c.execute("insert into kv values ('schema_version', ?)", (b"2",))
    with pytest.raises(InputError, match=f"at schema 0001, this tesserae reads {schema.HEAD}: start"):
        Store.open(db, read_only=True)
    os.chmod(db, 0o640)
    old_umask = os.umask(0o022)  # a umask that would leave a new file readable by every user
    try:
        Store.open(db).close()
    finally:
        os.umask(old_umask)
    (bak,) = [p for p in tmp_path.iterdir() if ".bak-" in p.name]
    assert bak.name.startswith("state.db.bak-0001-")
    assert os.stat(bak).st_mode & 0o777 == 0o640  # the copy is as closed as the database
    with sqlite3.connect(bak) as c:  # the backup holds the database as it was
        assert c.execute("select value from kv where key='policy_state:x'").fetchone() == (b"\x80\x04N.",)
    with sqlite3.connect(db) as c:
        assert c.execute("select version_num from alembic_version").fetchall() == [(schema.HEAD,)]
        assert c.execute("select value from kv where key='policy_state:x'").fetchone() == \
            (b'{"version":1,"state":null}',)
        assert c.execute("select count(*) from admin_actions").fetchone() == (0,)


def test_unknown_pre_migration_schema_is_refused(tmp_path):
    db = tmp_path / "state.db"
    with sqlite3.connect(db) as c:
        c.execute("create table kv (key text primary key, value blob)")
        c.execute("insert into kv values ('schema_version', x'31')")  # b"1": older than any migration knows
    with pytest.raises(InputError, match="cannot upgrade; move it aside"):
        Store.open(db)


def test_jobs_that_ran_before_0005_count_their_time_as_work_at_full_speed(tmp_path):
    db = tmp_path / "state.db"
    _at(db, "0004")
    with sqlite3.connect(db) as c:
        c.execute("insert into jobs (job_id, name, user, num_gpus, model, batch_size, parallelism, no_pack, meta, "
                  "submit_time, state, slurm_state, reason, attained_service, executed_time, run_counted, "
                  "rounds_run, nodes, gpus, assignment, packed_with, strategy, restarts, preemptions, migrations, "
                  "last_seen) values ('7', '', 'u', 2, 'resnet50', '64', '[]', 0, '', 1.0, 'RUNNING', 'RUNNING', "
                  "'', 1200.0, 600.0, 600.0, 2, 'node1', 'node1:0-1', '', '', '', 0, 0, 0, 1.0)")
    Store.open(db).close()
    with sqlite3.connect(db) as c:
        assert c.execute("select speed, work_done from jobs where job_id='7'").fetchone() == (1.0, 600.0)
