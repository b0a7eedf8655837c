"""A database written by the tesserae from before migrations, through real rounds on the dev cluster,
upgraded by this one: history, policy state and throughput measurements survive, a backup stays beside
it, and a database newer than this tesserae is refused in one line (exit 2)."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tesserae_slurm.daemon.state import schema
from tesserae_slurm.policies import state_codec

from .helpers import ROOT, Env, progressed, submit_tick, wait_for

# Host lane only (not every_release): the pre-migration code this test runs reads Slurm 22.05's output only.
pytestmark = pytest.mark.slurm_live

PRE_MIGRATION = "ea23314d5d45a22b65090dc0d3462b64e381aa40"  # main before schema migrations (kv schema_version 2)


def _old_tree(dest: Path) -> Path:
    """The package at PRE_MIGRATION, extracted from git (no checkout, no worktree to clean up)."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", PRE_MIGRATION, "tesserae_slurm"],
                          capture_output=True, check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _old_daemon(env: Env, old: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys, tesserae_slurm; assert tesserae_slurm.__file__.startswith(sys.argv[1]); " \
           "from tesserae_slurm.cli.main import main; sys.argv[1:] = sys.argv[2:]; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, str(old), "daemon", "--config", str(env.config), "--once"],
                          env=env.os_env(PYTHONPATH=str(old)), cwd=old, capture_output=True, text=True, timeout=180,
                          check=False)


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(sql).fetchall()


def test_a_pre_migration_database_upgrades_and_keeps_its_history(env: Env, tmp_path: Path) -> None:
    old = _old_tree(tmp_path / "old")
    reports = env.tmp / "reports"
    # a policy the old code knows (tesserae-t-fair came after it)
    env.write_config(feedback={"reports_dir": str(reports), "report_every_s": 0.5, "min_reports": 1},
                     scheduler={"policy": "tesserae-t"})
    cfg = yaml.safe_load(env.config.read_text())
    del cfg["preemption"]["stop_records_dir"]  # the old code refuses keys it does not know
    del cfg["moves"]
    env.config.write_text(yaml.safe_dump(cfg))
    jobs = [submit_tick(env, 1, 3000, name=f"up{i}", step_time=0.02, model="DCGAN", batch="32") for i in range(3)]
    first = _old_daemon(env, old)
    assert first.returncode == 0, first.stderr
    wait_for(lambda: all(progressed(env, j, 20) for j in jobs), 90, "the jobs to run and report")
    wait_for(lambda: all((reports / f"{j}.jsonl").exists() for j in jobs), 60, "throughput reports")
    second = _old_daemon(env, old)
    assert second.returncode == 0, second.stderr

    db = env.db
    tables = {t for (t,) in _rows(db, "select name from sqlite_master where type='table'")}
    assert "alembic_version" not in tables  # the old code wrote it
    rounds = _rows(db, "select * from rounds order by round_id")
    actions = _rows(db, "select * from actions order by id")
    placements = _rows(db, "select * from placements order by id")
    jobs_before = _rows(db, "select * from jobs order by job_id")
    job_columns = [c for _, c, *_ in _rows(db, "pragma table_info(jobs)")]
    round_columns = [c for _, c, *_ in _rows(db, "pragma table_info(rounds)")]
    kv = dict(_rows(db, "select key, value from kv"))
    assert kv["schema_version"] == b"2" and len(rounds) == 2 and len(actions) >= 3
    (pkey,) = [k for k in kv if k.startswith("policy_state:")]
    assert kv[pkey][:1] == b"\x80"  # pickled
    measured = json.loads(kv["online_feedback"])
    assert measured and kv["online_feedback"].count(b"DCGAN") >= 1, kv["online_feedback"][:300]
    expected_state = state_codec.encode(state_codec.unpickle_legacy(kv[pkey]))

    # readers refuse the old schema in one line until the daemon upgraded it
    out = env.tesserae("rounds")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "start this version's daemon" in out.stderr

    from tesserae_slurm.daemon.state.store import Store
    Store.open(db).close()  # what the daemon does first on start
    (bak,) = [p for p in db.parent.iterdir() if p.name.startswith("state.db.bak-0001-")]
    assert _rows(bak, "select count(*) from rounds") == [(2,)]
    assert _rows(db, "select version_num from alembic_version") == [(schema.HEAD,)]
    assert _rows(db, f"select {', '.join(round_columns)} from rounds order by round_id") == rounds
    assert _rows(db, "select distinct kind from rounds") == [("round",)]  # 0006: every old row a round
    assert _rows(db, "select * from actions order by id") == actions
    assert _rows(db, "select * from placements order by id") == placements
    assert _rows(db, f"select {', '.join(job_columns)} from jobs order by job_id") == jobs_before
    # columns added since (0005): the time the jobs ran counts as work at full speed
    assert _rows(db, "select speed, work_done = executed_time from jobs") == [(1.0, 1)] * len(jobs_before)
    after = dict(_rows(db, "select key, value from kv"))
    assert after["online_feedback"] == kv["online_feedback"]
    assert after[pkey] == expected_state and state_codec.decode(after[pkey]) is not None

    # the old code, run outside systemd (no UMask), left the database readable by every user: the new
    # daemon refuses it in one line until an administrator closes it (under systemd's unit it was 0640)
    refused = env.daemon_cli("--once")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "readable by every user" in refused.stderr and "chmod 640" in refused.stderr
    for f in db.parent.glob("state.db*"):
        if not f.name.startswith("state.db.bak-"):
            f.chmod(0o640)

    # the new daemon goes on from there: round ids continue and the policy state is the one carried over
    third = env.daemon_cli("--once")
    assert third.returncode == 0, third.stderr
    assert [r[0] for r in _rows(db, "select round_id from rounds order by round_id")] == [1, 2, 3]
    state = state_codec.decode(dict(_rows(db, "select key, value from kv"))[pkey])
    carried = state_codec.decode(expected_state)
    assert set(state.jobs) == set(jobs) and state.next_seq > carried.next_seq  # not restarted from empty
    out = env.tesserae("explain", jobs[0])
    assert out.returncode == 0, out.stderr

    # a database from a newer tesserae: the daemon refuses it in one line, exit 2, and leaves it alone
    with sqlite3.connect(db) as c:
        c.execute("update alembic_version set version_num='0099'")
    newer = env.daemon_cli("--once")
    errors = [x for x in newer.stderr.splitlines() if not x.startswith("INFO ")]  # the start's log line aside
    assert newer.returncode == 2 and len(errors) == 1 and "Traceback" not in newer.stderr, newer.stderr
    assert f"is at schema 0099, newer than this tesserae ({schema.HEAD})" in errors[0]
    assert len([p for p in db.parent.iterdir() if ".bak-" in p.name]) == 1
