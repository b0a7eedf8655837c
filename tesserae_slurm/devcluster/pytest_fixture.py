"""Session fixture `devcluster`: a real local Slurm for tests; import it into any conftest.py.

    from tesserae_slurm.devcluster.pytest_fixture import devcluster  # noqa: F401

If Slurm cannot be installed or started the tests FAIL with the reason (never skip): CI
installs Slurm first (scripts/install-slurm.sh), so a missing cluster is a real defect.
Set TESSERAE_DEVCLUSTER_NODES / TESSERAE_DEVCLUSTER_GPUS to change the shape.

The fixture runs without job_submit.lua: the Slurm-layer tests drive Slurm's own mechanics with plain
jobs (untagged, pinned, asking for GPUs), which the managed partition's script refuses by design. The
daemon's tests (tests/daemon/conftest.py) run with it, as a site does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from .cluster import DevCluster
from .errors import DevClusterError
from .install import ensure_slurm_installed

log = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def devcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    nodes = int(os.environ.get("TESSERAE_DEVCLUSTER_NODES", "4"))
    gpus = int(os.environ.get("TESSERAE_DEVCLUSTER_GPUS", "4"))
    root = tmp_path_factory.mktemp("devcluster")
    problem = None
    try:
        cluster = DevCluster(root, nodes=nodes, gpus_per_node=gpus, job_submit=False)
        ensure_slurm_installed()
        cluster.up()
    except (DevClusterError, ValueError) as exc:
        problem = str(exc)
    if problem is not None:  # fail outside the except block: one message, no chained traceback
        pytest.fail(f"local Slurm dev cluster could not start: {problem}", pytrace=False)
    try:
        yield cluster
    finally:
        _safe_down(cluster)


def _safe_down(cluster: DevCluster) -> None:
    try:
        cluster.down()
    except (DevClusterError, OSError) as exc:  # teardown must not mask the test outcome
        log.warning("dev cluster teardown failed: %s", exc)
