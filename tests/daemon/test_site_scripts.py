"""The site install and walkthrough scripts refuse bad input with one line and exit status 2, before
installing or starting anything (their working paths run in test_site_install_live.py and
test_walkthrough_live.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *argv], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("args", "words"), [
    (["--prefix", "relative/dir"], "--prefix must be an absolute path, got 'relative/dir'"),
    (["--source", "/nonexistent/checkout"], "--source /nonexistent/checkout: no such file or directory"),
])
def test_install_site_refuses_bad_input(tmp_path: Path, args: list[str], words: str) -> None:
    p = run(str(ROOT / "scripts" / "install-site.sh"), "--bin-dir", str(tmp_path / "bin"), *args)
    assert p.returncode == 2 and p.stderr.strip().endswith(words) and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / "bin").exists()


def test_walkthrough_refuses_bad_input(tmp_path: Path) -> None:
    d = tmp_path / "walk"
    p = run(str(ROOT / "scripts" / "walkthrough.sh"), "sideways", TESSERAE_WALKTHROUGH_DIR=str(d))
    if os.geteuid() != 0:  # a dev cluster and a second user need root: said first
        assert p.returncode == 2 and "run it as root" in p.stderr and not d.exists()
        return
    assert p.returncode == 2 and "unknown command 'sideways' (up, status, down [--purge])" in p.stderr
    p = run(str(ROOT / "scripts" / "walkthrough.sh"), "up", TESSERAE_WALKTHROUGH_DIR="relative")
    assert p.returncode == 2 and "must be an absolute path" in p.stderr and len(p.stderr.splitlines()) == 1
    assert not d.exists()
