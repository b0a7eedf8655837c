"""Issue 20 item 5 on the real local Slurm: a checkpoint signal at the very start of a job is kept.

The daemon starts toy torch jobs; the test polls squeue and sends Slurm's checkpoint signal to the
batch shell (`scancel --signal=USR1 --batch`, as the daemon does) the moment each job is RUNNING,
before the script could have started the launcher. Every job must checkpoint and none may fail.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from .helpers import Env, wait_for

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]

JOBS = 8


def _running(env: Env) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=env.os_env(), capture_output=True, text=True,
                         timeout=30, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()[1:] == ["RUNNING"]}


def _shell_start(out: str) -> float | None:
    line = next((ln for ln in out.splitlines() if ln.startswith("batch shell started ")), "")
    try:  # a signal that kills `date` in the command substitution leaves no time
        return float(line.split()[3])
    except (IndexError, ValueError):
        return None


def test_usr1_the_moment_a_job_runs_is_handled(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERAE_REQUEUE_WAIT", "3")  # jobs inherit it through sbatch's --export=ALL
    monkeypatch.setenv("TICK_ON_SIGNAL", "exit")  # the plain payload exits after its checkpoint, as toy_train.py
    monkeypatch.setenv("TICK_START_DELAY", "1")  # the plain payload's launcher starts 1 s late: the window is wide
    ids = [env.submit_toy(1, 100_000, model=None, name=f"sig{i}", step_time=0.02) for i in range(JOBS)]
    d = env.daemon()
    first = d.run_round()
    assert first.status == "applied", first.error
    signalled: dict[str, float] = {}  # when scancel was called (a shell started after it cannot have missed it)
    deadline = time.time() + 60
    while len(signalled) < JOBS:  # no sleep: signal each job as soon as Slurm says it runs
        assert time.time() < deadline, f"jobs never ran: {sorted(set(ids) - set(signalled))}"
        for job in _running(env) & set(ids) - set(signalled):
            signalled[job] = time.time()
            subprocess.run(["scancel", "--signal=USR1", "--batch", job], env=env.os_env(), check=True, timeout=30)

    def ended(j: str) -> bool:
        return env.squeue()[j]["state"] not in ("RUNNING", "COMPLETING", "PENDING")

    # the daemon's requeue-hold would end each job; here the launcher's bounded wait does (TESSERAE_REQUEUE_WAIT)
    try:
        wait_for(lambda: sum(map(ended, ids)) == JOBS or _settled(env, ids, signalled), 120,
                 "every signalled job to end")
    except AssertionError:
        left = [j for j in ids if not ended(j)]
        seen = [f"{j} signalled {signalled[j]:.3f} {env.squeue()[j]['state']} output {env.job_output(j)[:1500]!r} "
                f"events {[(e['event'], e['step'], round(e['time'], 3)) for e in env.events(j)][:3]}" for j in left]
        raise AssertionError("jobs still running: " + "; ".join(seen)) from None
    # Slurm (seen on 24.11) drops a signal that comes while the job is RUNNING but before slurmstepd has
    # started the batch shell: no process of the job exists to take it. Such a job runs on untouched;
    # the daemon's requeue-hold at the end of the grace would stop it. Here: its batch shell started after
    # scancel was called (slurmstepd may drop it a few ms before scancel returns) and nothing saw a
    # signal. It must then handle a second one.
    dropped = [j for j in ids if not ended(j) and _dropped(env, j, signalled[j])]
    for job in dropped:
        subprocess.run(["scancel", "--signal=USR1", "--batch", job], env=env.os_env(), check=True, timeout=30)
    wait_for(lambda: all(map(ended, ids)), 120, "every signalled job to end")
    slurm = env.squeue()
    early, before_script = 0, []
    for job in ids:
        out = env.job_output(job)
        if slurm[job]["state"] == "FAILED" and not out.strip():
            # killed between slurmstepd starting the batch shell and the shell's first line, which no
            # script can guard: nothing had run yet (see docs/daemon.md, "Job side")
            before_script.append(job)
            continue
        assert slurm[job]["state"] == "COMPLETED", (job, slurm[job], out[-2000:])
        events = env.events(job)
        kinds = [e["event"] for e in events]
        if job in dropped:  # it ran on until signalled again: started, checkpointed on the second signal, never done
            assert kinds[0] == "start" and kinds[-1] == "checkpoint" and "done" not in kinds, (job, kinds)
            continue
        assert kinds == ["start", "checkpoint"], (job, events, out[-2000:])
        assert events[1]["step"] < 1000  # checkpointed at once, not after running on
        record = json.loads(next(line for line in out.splitlines() if "tesserae-launch: record " in line)
                            .split("record ", 1)[1])
        assert record["job"] == job
        early += record["signals_before_launcher"] == ["USR1"]
    print(f"signalled at RUNNING: {JOBS}; before the launcher listened: {early}; "
          f"before the batch shell's first line: {len(before_script)}; before the batch shell existed "
          f"(dropped by Slurm, signalled again): {len(dropped)}")
    # Slurm's drops (up to half the jobs on 24.11 under load) are not the job side's to handle; the jobs
    # that did get the signal at start must be enough to have tested the start-up window
    reached = JOBS - len(dropped)
    assert reached >= JOBS // 4, ("Slurm dropped nearly every signal: the start-up window went untested", dropped)
    assert early >= reached // 2, "the signals did not come early: the test did not test the start-up window"
    assert len(before_script) <= JOBS // 4, before_script


def _dropped(env: Env, job: str, signalled_at: float) -> bool:
    """The batch shell started after the signal was sent, and no part of the job saw one."""
    out = env.job_output(job)
    started = _shell_start(out)
    record = next((line.split("record ", 1)[1] for line in out.splitlines() if "tesserae-launch: record " in line), "")
    if started is None or not record:
        return False
    saw = json.loads(record)["signals_before_launcher"] or any(e["event"] == "checkpoint" for e in env.events(job))
    return started > signalled_at and not saw


def _settled(env: Env, ids: list[str], signalled: dict[str, float]) -> bool:
    """Every job has ended or is one whose signal Slurm dropped (and has run a while since)."""
    q = env.squeue()
    left = [j for j in ids if q[j]["state"] in ("RUNNING", "COMPLETING", "PENDING")]
    return all(_dropped(env, j, signalled[j]) and time.time() - signalled[j] > 5 for j in left)
