"""Marks every test that drives a real local Slurm with `slurm_live`, so each Slurm lane of `./dev test`
selects them (`-m slurm_live`) without a list to keep up to date."""

from __future__ import annotations

import pytest

# Session fixtures that start the dev cluster; a test reaches them directly or through others
# (`env`, `scenario`, `backend`, ...), and item.fixturenames holds that whole closure.
LIVE_FIXTURES = frozenset({"devcluster", "daemon_cluster"})
# The lanes on other Slurm releases collect only these (the rest imports torch, numba or cvxpy, which
# their roots lack), so a live test elsewhere would silently run on the host's Slurm alone.
LANE_DIRS = ("tests/slurm/", "tests/daemon/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slurm_live)
        if item.get_closest_marker("slurm_live") and not item.nodeid.startswith(LANE_DIRS):
            raise pytest.UsageError(f"{item.nodeid}: slurm_live tests belong under {' or '.join(LANE_DIRS)} "
                                    "(scripts/slurm-lane.sh collects only those)")
