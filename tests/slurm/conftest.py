"""Fixtures for the Slurm layer tests: recorded Slurm output, and the real local dev cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tesserae_slurm.devcluster.pytest_fixture import devcluster  # noqa: F401  (session fixture)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text():
    def read(name: str) -> str:
        return (FIXTURES / name).read_text()

    return read
