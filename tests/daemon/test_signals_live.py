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

from .helpers import KNOWN_26_05, Env, wait_for

pytestmark = pytest.mark.slurm_live

JOBS = 8


def _running(env: Env) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=env.os_env(), capture_output=True, text=True,
                         timeout=30, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()[1:] == ["RUNNING"]}


@KNOWN_26_05  # jobs did not end within 180 s
def test_usr1_the_moment_a_job_runs_is_handled(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERAE_REQUEUE_WAIT", "3")  # jobs inherit it through sbatch's --export=ALL
    monkeypatch.setenv("TICK_ON_SIGNAL", "exit")  # the plain payload (root lanes) then exits after its checkpoint, as toy_train.py does
    ids = [env.submit_toy(1, 100_000, model=None, name=f"sig{i}", step_time=0.02) for i in range(JOBS)]
    d = env.daemon()
    first = d.run_round()
    assert first.status == "applied", first.error
    signalled: dict[str, float] = {}
    deadline = time.time() + 60
    while len(signalled) < JOBS:  # no sleep: signal each job as soon as Slurm says it runs
        assert time.time() < deadline, f"jobs never ran: {sorted(set(ids) - set(signalled))}"
        for job in _running(env) & set(ids) - set(signalled):
            subprocess.run(["scancel", "--signal=USR1", "--batch", job], env=env.os_env(), check=True, timeout=30)
            signalled[job] = time.time()
    # the daemon's requeue-hold would end each job; here the launcher's bounded wait does (TESSERAE_REQUEUE_WAIT)
    wait_for(lambda: all(env.squeue()[j]["state"] not in ("RUNNING", "COMPLETING", "PENDING") for j in ids), 180,
             "every signalled job to end")
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
        assert [e["event"] for e in events] == ["start", "checkpoint"], (job, events, out[-2000:])
        assert events[1]["step"] < 1000  # checkpointed at once, not after running on
        record = json.loads(next(line for line in out.splitlines() if "tesserae-launch: record " in line)
                            .split("record ", 1)[1])
        assert record["job"] == job
        early += record["signals_before_launcher"] == ["USR1"]
    print(f"signalled at RUNNING: {JOBS}; before the launcher listened: {early}; "
          f"before the batch shell's first line: {len(before_script)}")
    assert early >= JOBS // 2, "the signals did not come early: the test did not test the start-up window"
    assert len(before_script) <= JOBS // 4, before_script
