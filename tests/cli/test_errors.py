"""Issue 20 item 7: state-file and dependency problems are one line on stderr and a nonzero exit.

Run as root here, so "may not write" is an immutable directory (chattr +i binds root too) and "may
not read" is the CLI run as user nobody (the interpreter drops privileges after its imports: the
virtualenv's Python lives where only root may read).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tesserae_slurm.daemon.state.store import Store

AS_NOBODY = """
import importlib, os, pkgutil, sys
import tesserae_slurm, tesserae_slurm.cli.main as m
for mod in pkgutil.walk_packages(tesserae_slurm.__path__, "tesserae_slurm."):
    if mod.name.startswith(("tesserae_slurm.cli", "tesserae_slurm.daemon", "tesserae_slurm.site")) \
            and ".schema_versions" not in mod.name:
        importlib.import_module(mod.name)
import sqlalchemy.dialects.sqlite  # noqa: F401
import encodings.idna  # noqa: F401  (the API fallback resolves a host name after the privilege drop)
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
sys.exit(m.main(sys.argv[1:]))
"""
HIDE_SQLALCHEMY = """
import sys
sys.modules["sqlalchemy"] = None  # as if it were not installed
from tesserae_slurm.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _one_line_error(proc: subprocess.CompletedProcess[str], prefix: str, *parts: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def _config(tmp_path: Path, db: Path) -> Path:
    cfg = tmp_path / "tesserae.yaml"
    cfg.write_text(f"state: {{database: {db}}}\nmetrics: {{listen: ''}}\n")
    return cfg


def _run(tmp_path: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERAE_")}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)


def test_unwritable_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    locked = ["chattr", "+i", str(state)] if os.geteuid() == 0 else ["chmod", "555", str(state)]
    subprocess.run(locked, check=True)
    try:
        proc = _run(tmp_path, HIDE_SQLALCHEMY.replace('sys.modules["sqlalchemy"] = None', "pass"), "daemon", "--once",
                    "--config", str(_config(tmp_path, state / "state.db")))
    finally:
        subprocess.run(["chattr", "-i", str(state)] if os.geteuid() == 0 else ["chmod", "755", str(state)], check=True)
    _one_line_error(proc, "tesserae daemon: error: cannot open state database", str(state))


def test_state_database_the_user_may_not_read(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Store.open(db).close()
    db.chmod(0o600 if os.geteuid() == 0 else 0o000)  # root's file, read by nobody
    tmp_path.chmod(0o755)
    proc = _run(tmp_path, AS_NOBODY, "jobs", "--db", str(db))
    # the admin CLI then asks the daemon's read-only API (issue 23); none runs here, so one line names both
    _one_line_error(proc, "tesserae jobs: error: cannot reach the daemon's API", str(db), "not readable")


def test_daemon_without_sqlalchemy(tmp_path: Path) -> None:
    proc = _run(tmp_path, HIDE_SQLALCHEMY, "daemon", "--once", "--config", str(_config(tmp_path, tmp_path / "s.db")))
    _one_line_error(proc, "tesserae daemon: error: this command needs the 'daemon' extra", "tesserae-slurm[daemon]")

