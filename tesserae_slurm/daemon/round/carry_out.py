"""Operators' one-off requests (`tesserae requeue|cancel JOB`), carried out in the round that took them in,
before its decision, so the decision sees their effect (docs/daemon.md, "Operators' actions")."""

from __future__ import annotations

import logging

from ...slurm import SlurmBackend, SlurmError
from ..state.store import AdminRow, Store
from .actions import StopItem, assigned_gpus
from .observe import Snapshot
from .stop_start import Applier, ApplyResult

log = logging.getLogger(__name__)


def carry_out(rows: list[AdminRow], snap: Snapshot, applier: Applier, backend: SlurmBackend, store: Store,
              round_id: int) -> bool:
    """Each request's outcome goes to its row and to the daemon's log; True when Slurm was asked anything
    (the round looks again)."""
    asked = False
    for row in rows:
        status, note, called = _carry(row, snap, applier, backend, store, round_id)
        store.finish_admin_actions([row.id], status, note)
        log.info("operator %s: %s job %s %s in round %d: %s", row.user, row.command, row.target, status, round_id,
                 note, extra={"job": row.target, "action": f"operator-{row.command}", "outcome": status})
        asked = asked or called
    return asked


def _carry(row: AdminRow, snap: Snapshot, applier: Applier, backend: SlurmBackend, store: Store,
           round_id: int) -> tuple[str, str, bool]:
    """(status, note, whether Slurm was asked)."""
    mj = snap.jobs.get(row.target)
    if mj is None or not mj.slurm.state.is_active:
        return "failed", "not an active managed job in the partition", False
    if row.command == "cancel":
        try:
            backend.cancel(int(row.target))
            return "done", f"cancelled in round {round_id}", True
        except SlurmError as exc:
            return "failed", str(exc)[:300], True
    # requeue
    jr = store.job(row.target)
    if mj.slurm.state.value != "RUNNING" or jr is None:
        return "done", "not running: nothing to requeue", False
    result = ApplyResult()
    applier.stop_jobs(round_id, [StopItem("requeue", row.target, assigned_gpus(jr.assignment))],
                      {row.target: mj.slurm}, result)
    failed = result.failed.get(row.target)
    return ("failed" if failed else "done"), failed or f"checkpoint-signalled and requeued in round {round_id}", True
