"""Which processes belong to a dev cluster: its SLURM_CONF *and* this process's filesystem root.

Two Slurm lanes run side by side in Debian roots (chroots) that share one PID namespace, and pytest
gives both the same temporary paths, so both lanes' clusters carry the same SLURM_CONF string. A
cluster that went by the string alone counted the other lane's daemons as its own (a CI failure on
24.11: `down()` "left" four processes that were 26.05's) and could kill its job processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_for

from tesserae_slurm.devcluster import procs

CONF = "/tmp/pytest-of-root/pytest-0/devcluster0/etc/slurm.conf"  # what both lanes' fixtures use


def _chroot_with_sleep(root: Path) -> None:
    """A root holding /bin/sleep and the libraries it links (ldd), nothing else."""
    libs = subprocess.run(["ldd", "/bin/sleep"], capture_output=True, text=True, check=True).stdout
    files = ["/bin/sleep", *(w for line in libs.splitlines() for w in line.split() if w.startswith("/"))]
    for f in files:
        dest = root / f.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dest)


@pytest.fixture
def sleepers(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """(a sleep under this root, a sleep in another root), both with SLURM_CONF=CONF."""
    if os.geteuid() != 0:
        pytest.fail("needs root (chroot), as the dev cluster does")
    _chroot_with_sleep(tmp_path / "root")
    env = {"SLURM_CONF": CONF, "PATH": "/bin:/usr/bin"}
    here = subprocess.Popen(["/bin/sleep", "60"], env=env)
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    there = subprocess.Popen([chroot, str(tmp_path / "root"), "/bin/sleep", "60"], env=env)
    try:
        wait_for(lambda: procs.proc_comm(there.pid) == "sleep", 10, "chroot to exec sleep in its root")
        yield here.pid, there.pid
    finally:
        for p in (here, there):
            p.kill()
            p.wait()


def test_a_process_with_the_same_slurm_conf_in_another_root_is_not_the_clusters(sleepers):
    here, there = sleepers
    assert procs.proc_environ(there).get("SLURM_CONF") == CONF  # the string alone would match
    assert procs.belongs_to(here, CONF)
    assert not procs.belongs_to(there, CONF)
    assert procs.same_root(here) and not procs.same_root(there)


def test_describe_names_a_process_and_its_state(sleepers):
    here, _ = sleepers
    assert procs.describe(here) == f"{here} (sleep, state S)"
    assert procs.describe(2**22 + 1) == f"{2**22 + 1} (gone)"
