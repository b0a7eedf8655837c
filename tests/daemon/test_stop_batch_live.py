"""A stop of several jobs on a real Slurm: one signal and one requeue-hold for all of them, even when one
of them has ended since the round looked, and the waits read those jobs alone (`squeue --jobs` as text),
never the whole queue. The ended job is refused by scancel, left ended by `requeuehold Incomplete`, and
recorded as ended; the others are requeue-held and pending again."""

from __future__ import annotations

import subprocess
import time
from collections import Counter

import pytest

from tesserae_slurm.daemon.round.actions import StopItem
from tesserae_slurm.daemon.round.stop_start import ApplyResult
from tesserae_slurm.daemon.state.gpuset import parse_gpus

from .helpers import Env, progressed, submit_tick, wait_for

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]

# what list_jobs_brief reads (parse.parse_squeue_brief); the rest of a SlurmJob keeps its defaults there
BRIEF = ("job_id", "user", "state", "nodes", "restart_count", "start_time", "end_time", "exit_code", "exit_signal")


def test_a_batched_stop_stops_the_others_when_one_has_ended_and_asks_slurm_once_per_verb(env: Env) -> None:
    env.write_config(preemption={"grace_seconds": 6})
    d = env.daemon()
    jobs = [submit_tick(env, 1, 3000, name=f"batch{i}", step_time=0.05) for i in range(3)]
    first = d.run_round()
    assert first.status == "applied" and first.plan is not None and len(first.plan.starts) == 3, first
    wait_for(lambda: all(progressed(env, j, 5) for j in jobs), 60, "the three jobs to run")
    partition = d.cfg.slurm.partition
    seen = {str(j.job_id): j for j in d.backend.list_jobs(partition)}  # the round's view: all three running
    assert all(seen[j].state.value == "RUNNING" for j in jobs)

    ended = jobs[1]
    subprocess.run(["scancel", ended], env=env.os_env(), check=True, timeout=30)
    wait_for(lambda: env.squeue()[ended]["state"] == "CANCELLED", 30, f"job {ended} to be cancelled")

    # the short listing says what squeue --json says of every field it carries, the ended job's included
    brief = {str(j.job_id): j for j in d.backend.list_jobs_brief([int(j) for j in jobs])}
    full = {str(j.job_id): j for j in d.backend.list_jobs(partition)}
    for j in jobs:
        assert {f: getattr(brief[j], f) for f in BRIEF} == {f: getattr(full[j], f) for f in BRIEF}, j
    assert brief[ended].state.value == "CANCELLED" and brief[ended].end_time is not None

    d.backend.drain()
    reads_before = Counter(d.backend.calls)
    round_id = d.journal.begin_round(time.time(), "fifo", False)
    items = [StopItem("preempt", j, parse_gpus(env.store().job(j).gpus)) for j in jobs]
    result = ApplyResult()
    d.applier.stop_jobs(round_id, items, seen, result)

    others = {jobs[0], jobs[2]}
    assert result.stopped == others and result.ended == {ended: "CANCELLED"}, result
    assert not result.failed and not result.carried, result
    writes = [(r.method, r.job_ids, r.ok) for r in d.backend.drain()]
    assert writes == [("signal", tuple(jobs), True), ("requeue_hold", tuple(jobs), True)], writes
    reads = Counter(d.backend.calls) - reads_before
    assert reads["list_jobs"] == 0 and reads["list_jobs_brief"] >= 1, reads  # never the whole queue

    slurm = env.squeue()
    for j in others:
        assert slurm[j]["state"] == "PENDING" and int(slurm[j]["restarts"]) == 1, (j, slurm[j])
    assert slurm[ended]["state"] == "CANCELLED" and int(slurm[ended]["restarts"]) == 0, slurm[ended]
    store = env.store()
    for j in others:
        row = store.job(j)
        assert (row.state, row.preemptions) == ("PENDING", 1), (j, row.state, row.reason)
    row = store.job(ended)
    assert row.state == "CANCELLED" and "not requeued" in row.reason, row.reason
    assert row.finished_at == float(brief[ended].end_time or 0) and row.exit_code == brief[ended].exit_code
