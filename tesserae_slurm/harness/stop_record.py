"""Job side of an early stop: the launcher tells the daemon that its payload checkpointed and exited.

After the checkpoint signal the launcher outlives the payload until the daemon's requeue-hold (a job
that exits by itself has really ended). So that the daemon need not wait out the whole grace, the
launcher then writes one small record for its own run in the shared ``preemption.stop_records_dir``
(the daemon names it in the assignment), ``<job id>.<restart count>.stopped``:

    {"v": 1, "job": "4711", "restart": 2, "time": 1700000000.0, "exit": 0}

The daemon, while it stops that job, requeue-holds it as soon as the record of the current run
appears (``daemon/feedback/stop_records.py`` checks it as it checks throughput reports: a regular
file, no symlink, owned by the job's user). The record asks nothing of Slurm: only the daemon, which
is stopping the job anyway, acts on it. The launcher removes it when it ends.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

STOP_RECORD_VERSION = 1
SUFFIX = ".stopped"


def record_path(directory: str | Path, job: str, restart: int) -> Path:
    return Path(directory) / f"{job}.{restart}{SUFFIX}"


@dataclass(frozen=True)
class StopRecord:
    """Where this run's record goes: the directory from the assignment, the job and Slurm's restart count."""

    directory: str
    job: str
    restart: int

    @property
    def path(self) -> Path:
        return record_path(self.directory, self.job, self.restart)

    def write(self, exit_code: int, clock: Callable[[], float] = time.time) -> bool:
        """One line, written at once; False (logged) when it cannot be: the grace then ends the stop."""
        body = {"v": STOP_RECORD_VERSION, "job": self.job, "restart": self.restart, "time": clock(),
                "exit": exit_code}
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, (json.dumps(body, separators=(",", ":")) + "\n").encode())
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("cannot write the stop record %s (%s): the daemon waits out the grace", self.path, exc)
            return False
        return True

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
