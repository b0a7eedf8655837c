"""Operators' one-off requests (`tesserae requeue|cancel JOB`), carried out in the round that took them in,
before its decision, so the decision sees their effect (docs/daemon.md, "Operators' actions")."""

from __future__ import annotations

from ...slurm import SlurmBackend, SlurmError
from ..state.store import AdminRow, Store
from .actions import StopItem, assigned_gpus
from .observe import Snapshot
from .stop_start import Applier, ApplyResult


def carry_out(rows: list[AdminRow], snap: Snapshot, applier: Applier, backend: SlurmBackend, store: Store,
              round_id: int) -> bool:
    """Each request's outcome goes to its row; True when Slurm was asked anything (the round looks again)."""
    asked = False
    for row in rows:
        mj = snap.jobs.get(row.target)
        if mj is None or not mj.slurm.state.is_active:
            store.finish_admin_actions([row.id], "failed", "not an active managed job in the partition")
            continue
        if row.command == "cancel":
            try:
                backend.cancel(int(row.target))
                store.finish_admin_actions([row.id], "done", f"cancelled in round {round_id}")
            except SlurmError as exc:
                store.finish_admin_actions([row.id], "failed", str(exc)[:300])
            asked = True
            continue
        # requeue
        jr = store.job(row.target)
        if mj.slurm.state.value != "RUNNING" or jr is None:
            store.finish_admin_actions([row.id], "done", "not running: nothing to requeue")
            continue
        result = ApplyResult()
        applier.stop_jobs(round_id, [StopItem("requeue", row.target, assigned_gpus(jr.assignment))],
                          {row.target: mj.slurm}, result)
        failed = result.failed.get(row.target)
        store.finish_admin_actions([row.id], "failed" if failed else "done",
                                   failed or f"checkpoint-signalled and requeued in round {round_id}")
        asked = True
    return asked
