"""Which Slurm backend the live tests drive: TESSERAE_TEST_SLURM_BACKEND, `cli` unless the pyslurm lane
sets `pyslurm` (scripts/slurm-lane.sh, docs/slurm-versions.md). Never `auto`: a lane must fail when the
backend it names cannot load, not pass on the other one."""

from __future__ import annotations

import os


def slurm_backend() -> str:
    name = os.environ.get("TESSERAE_TEST_SLURM_BACKEND", "cli")
    if name not in ("cli", "pyslurm"):
        raise AssertionError(f"TESSERAE_TEST_SLURM_BACKEND={name!r}: expected 'cli' or 'pyslurm'")
    return name
