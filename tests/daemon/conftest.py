"""A real local Slurm for the daemon tests: 2 nodes x 4 fake GPUs, shared by the session.

Each test gets its own state database and output directory; `clean_cluster` cancels every job a test
left behind. Slurm missing or not starting is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tesserae_slurm.devcluster import DevCluster
from tesserae_slurm.devcluster.errors import DevClusterError
from tesserae_slurm.devcluster.install import ensure_slurm_installed

from .helpers import ROOT, Env, wait_for


@pytest.fixture(scope="session", autouse=True)
def checkout_reachable_by_other_users() -> Iterator[None]:
    """Other local users (`nobody`, the bypass test's user) run this checkout's venv and jobscripts.

    A clone under a private directory (`mktemp -d`, /root: mode 0700) keeps them out, and their commands
    would fail on the path, not on what the tests check. For the session, each such ancestor gets o+x
    (traverse only, no listing); the modes are restored after."""
    changed: list[tuple[Path, int]] = []
    for d in ROOT.parents:
        mode = d.stat().st_mode
        if not mode & stat.S_IXOTH:
            changed.append((d, mode))
            d.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
    try:
        yield
    finally:
        for d, mode in changed:
            d.chmod(stat.S_IMODE(mode))


@pytest.fixture(scope="session")
def daemon_cluster() -> Iterator[DevCluster]:
    # Not under pytest's tmp dirs (mode 0700): other local users submit to it too (test_bypass_live.py).
    root = Path(tempfile.mkdtemp(prefix="tesserae-dc-", dir="/tmp"))
    root.chmod(0o755)
    cluster = DevCluster(root, nodes=2, gpus_per_node=4)
    problem = None
    try:
        ensure_slurm_installed()
        cluster.up()
    except (DevClusterError, ValueError, OSError) as exc:
        problem = str(exc)
    if problem is not None:
        pytest.fail(f"local Slurm dev cluster could not start: {problem}", pytrace=False)
    try:
        yield cluster
    finally:
        try:
            cluster.down()
        except (DevClusterError, OSError):
            pass
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def env(daemon_cluster: DevCluster, tmp_path) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    """Per-test config, state database and output directory on the shared cluster; jobs cancelled after."""
    e = Env(daemon_cluster, tmp_path)
    if not daemon_cluster.status().up:  # a previous test stopped the controller and failed to restart it
        daemon_cluster.start_controller()
    try:
        yield e
    finally:
        if not _ctld_up(e):
            daemon_cluster.start_controller()
        subprocess.run(["scancel", "--partition", "tesserae"], env=e.os_env(), capture_output=True, timeout=30,
                       check=False)
        # the next test starts on an empty cluster, or this one fails saying what is left
        wait_for(lambda: not e.squeue_ids(active=True), 60, "the test's jobs to end after scancel",
                 explain=lambda: f"still active: {e.squeue_ids(active=True)}")


def _ctld_up(e: Env) -> bool:
    out = subprocess.run(["scontrol", "ping"], env=e.os_env(), capture_output=True, text=True, timeout=20, check=False)
    return "UP" in out.stdout


@pytest.fixture(autouse=True)
def _no_failpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESSERAE_FAILPOINTS", raising=False)
    monkeypatch.delenv("TESSERAE_CONFIG", raising=False)
    monkeypatch.delenv("TESSERAE_DB", raising=False)
    os.environ.pop("TESSERAE_FAILPOINTS", None)
