"""Jobs changed by hand while the daemon was not looking, on the real dev cluster: after a restart the
daemon reconciles each one with what Slurm says (docs/daemon.md, "Reconciliation")."""

from __future__ import annotations

import pytest
import subprocess

from .helpers import Env, progressed, submit_tick, wait_for

# every_release: also run in the 24.11 and 26.05 lanes (./dev test), as the outcome depends on the release
pytestmark = pytest.mark.every_release


def scontrol(env: Env, *args: str) -> None:
    subprocess.run(["scontrol", *args], env=env.os_env(), capture_output=True, text=True, timeout=30, check=True)


def test_hand_changes_are_reconciled_on_restart(env: Env) -> None:
    d = env.daemon()
    running = [submit_tick(env, 2, 3000, name=f"r{i}", step_time=0.05) for i in range(3)]
    first = d.run_round()
    assert first.plan is not None and len(first.plan.starts) == 3
    wait_for(lambda: all(progressed(env, j, 10) for j in running), 60, "three jobs to run")
    requeued, edited, cancelled = running
    waiting = submit_tick(env, 2, 3000, name="fourth")
    d.run_round()  # fits: the cluster is full now
    wait_for(lambda: progressed(env, waiting, 10), 60, "the fourth job to run")
    admin_held = submit_tick(env, 2, 3000, name="admin-held")  # waits, held by tsbatch

    # --- the daemon is down; an admin does things by hand -------------------------------------------
    del d
    scontrol(env, "requeuehold", requeued)  # preempted by hand
    scontrol(env, "update", f"JobId={edited}", "AdminComment=tesserae-assign:{}")  # assignment edited
    subprocess.run(["scancel", cancelled], env=env.os_env(), check=True)
    scontrol(env, "hold", admin_held)  # root's hold is an administrator's hold (JobHeldAdmin)
    late = submit_tick(env, 1, 3000, name="released-late")
    scontrol(env, "update", f"JobId={late}", "StartTime=now+3600")
    scontrol(env, "release", late)  # released outside tesserae (cannot start for an hour)
    wait_for(lambda: env.squeue()[cancelled]["state"] == "CANCELLED" and all(
        env.squeue()[j]["state"] == "PENDING" for j in (requeued,)), 30, "Slurm to act on all that")

    # --- restart -------------------------------------------------------------------------------------
    d = env.daemon()
    d.look(None)  # what the start of the next round does first, before any followup
    rows = {r.job_id: r for r in env.store().jobs()}
    assert rows[requeued].state == "PENDING"
    assert rows[edited].state == "PENDING" and rows[edited].reason == "started outside tesserae: stopped and held"
    assert rows[cancelled].state == "CANCELLED"
    assert rows[admin_held].state == "PENDING" and "administrator" in rows[admin_held].reason
    assert rows[late].state == "PENDING"
    assert rows[waiting].state == "RUNNING"

    result = d.run_round()  # followups (requeue-hold the edited one at once, hold the late one), then decide
    assert result.status == "applied", result.error
    store = env.store()
    kinds = {(a.kind, a.job_id) for a in store.actions(round_id=result.round_id)}
    assert ("evict", edited) in kinds and ("hold", late) in kinds
    slurm = env.squeue()
    # held back (an administrator's hold the daemon records as its own), then placed by the daemon
    assert {a.status for a in store.actions(job_id=late)} == {"done"}
    assert slurm[admin_held]["state"] == "PENDING" and slurm[admin_held]["reason"] == "JobHeldAdmin"
    rows = {r.job_id: r for r in store.jobs()}
    assert admin_held not in {p.job_id for p in store.placements(result.round_id)}  # never scheduled
    for j in (requeued, edited, late):
        assert rows[j].state in ("PENDING", "STARTING", "RUNNING"), (j, rows[j].state)
        if rows[j].state != "PENDING":
            assert slurm[j]["admin_comment"] == rows[j].assignment
    events = " ".join(e.message for e in store.events(limit=100))
    assert "released outside tesserae" in events and "running without the daemon's current assignment" in events


def test_the_daemons_hold_is_a_user_hold_not_an_administrators(env: Env) -> None:
    from tesserae_slurm.site.load import load_config
    from tesserae_slurm.site.connect import backend_from_config

    job = submit_tick(env, 1, 10, name="hold-me")
    scontrol(env, "update", f"JobId={job}", "StartTime=now+3600")
    scontrol(env, "release", job)
    assert env.squeue()[job]["reason"] != "JobHeldUser"
    backend_from_config(load_config(env.config), env.cluster.env()).hold([int(job)])
    assert env.squeue()[job]["reason"] == "JobHeldUser"  # what tsbatch's --hold gives, not JobHeldAdmin
