"""Marks every test that drives a real local Slurm with `slurm_live`, so each Slurm lane of `./dev test`
selects them (`-m slurm_live`) without a list to keep up to date; and picks the Hypothesis profile.

Property tests draw new examples every run on a developer's machine (Hypothesis's default). Where
``CI`` is set they draw the same ones every run (``derandomize``: seeded by each test), so a CI verdict
depends on the code alone; random search belongs to ``./dev fuzz`` (scripts/fuzz.py), which runs
them under the seed it passes as ``--hypothesis-seed``. ``TESSERAE_EXAMPLES=N`` gives every property
test N examples instead of its own count: many for the fuzz command, few for each mutant of
``./dev mutate`` (scripts/mutate.py, with ``CI`` set: the same examples for every mutant). Neither
profile saves examples to a database (a failure found becomes an ``@example`` in its test) or has
deadlines or the too-slow health check, which time the machine rather than the code.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, is_hypothesis_test, settings

_UNTIMED = {"database": None, "deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}
settings.register_profile("ci", derandomize=True, **_UNTIMED)
settings.register_profile("fuzz", **_UNTIMED)
EXAMPLES = int(os.environ.get("TESSERAE_EXAMPLES") or 0)
if os.environ.get("CI"):
    settings.load_profile("ci")
elif EXAMPLES:
    settings.load_profile("fuzz")

# Session fixtures that start the dev cluster; a test reaches them directly or through others
# (`env`, `scenario`, `backend`, ...), and item.fixturenames holds that whole closure.
LIVE_FIXTURES = frozenset({"devcluster", "daemon_cluster"})
# The lanes on other Slurm releases collect only these (the rest imports torch, numba or cvxpy, which
# their roots lack), so a live test elsewhere would silently run on the host's Slurm alone.
LANE_DIRS = ("tests/slurm/", "tests/daemon/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        if EXAMPLES and is_hypothesis_test(test):
            # a test's own @settings(max_examples=...) outranks any profile; the runner reads this
            # attribute when the test runs
            test._hypothesis_internal_use_settings = settings(
                test._hypothesis_internal_use_settings, max_examples=EXAMPLES)
        if LIVE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slurm_live)
        if item.get_closest_marker("slurm_live") and not item.nodeid.startswith(LANE_DIRS):
            raise pytest.UsageError(f"{item.nodeid}: slurm_live tests belong under {' or '.join(LANE_DIRS)} "
                                    "(scripts/slurm-lane.sh collects only those)")
