"""Stop records: a stopping job's launcher says its payload checkpointed and exited (harness/stop_record.py).

The daemon reads the record of a job only while it stops that job, and only the record of the run it
signalled (``<job>.<Slurm's restart count>.stopped``), under the trust rules of the throughput reports
(``report_files.read_new``: a regular file, no symlink, owned by the job's Slurm user). What a record
can do is end that stop's grace early: the requeue-hold the daemon sends anyway, sooner. A user can
thus only hurry the stop of their own job, as `scancel --signal` already can; nobody can requeue or
release a job through it (docs/daemon.md, "Users cannot bypass the daemon").
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ...harness.stop_record import STOP_RECORD_VERSION, record_path
from .report_files import ReportFileError, read_new, uid_of

log = logging.getLogger(__name__)
MAX_BYTES = 4096


def checkpointed(directory: str, job: str, restart: int, user: str) -> bool:
    """Whether the record of this run is there and checks out."""
    uid = uid_of(user)
    if not directory or uid is None:
        return False
    path = record_path(directory, job, restart)
    try:
        lines, _ = read_new(path, 0, uid, MAX_BYTES)
    except ReportFileError as exc:
        log.warning("job %s: stop record %s refused: %s", job, path, exc)
        return False
    for line in lines:
        try:
            body = json.loads(line)
        except ValueError:
            continue
        if isinstance(body, dict) and body.get("v") == STOP_RECORD_VERSION and str(body.get("job")) == job \
                and body.get("restart") == restart:
            return True
    return False


def forget(directory: str, job: str, restart: int) -> None:
    """Remove a record the daemon acted on (the directory is sticky and the daemon's: it may)."""
    if directory:
        try:
            os.unlink(Path(record_path(directory, job, restart)))
        except OSError:
            pass


def ensure_dir(directory: str) -> None:
    """Create the shared directory, mode 1777 like /tmp (each job writes its own records), when missing."""
    d = Path(directory)
    if not directory or d.is_dir():
        return
    try:
        d.mkdir(parents=True)
        os.chmod(d, 0o1777)
        log.info("created the stop records directory %s (mode 1777)", d)
    except OSError as exc:
        log.error("cannot create the stop records directory %s: %s; stops wait out the grace", d, exc)
