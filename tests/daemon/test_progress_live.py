"""tesserae-t-fair on the real local Slurm: Tiresias charges a packed job the work it did, not the GPU
time it held (``service: progress``, docs/daemon.md "Packing without victims").

Seven 1-GPU jobs that run alone and two ResNet-50 jobs that share the eighth GPU (0.52 of their speed
each, the A100 profile's pair). With a 20 s queue limit, the jobs alone leave Q0 after about 20 s of
running; the packed ones have done only about half that work by then, stay in Q0 and so rank first:
they keep running and one job alone waits (under ``tesserae-t``'s GPU time all nine would leave Q0
in the same round)."""

from __future__ import annotations

import time

import pytest

from tesserae_slurm.daemon.loop import Daemon

from .helpers import Env, wait_for

pytestmark = pytest.mark.slurm_live

LIMIT_S = 20.0


def _queue(d: Daemon, job: str) -> int:
    q = d.pstate.jobs.get(job)
    return -1 if q is None else q.queue


def test_a_packed_job_is_charged_its_progress_and_stays_in_q0(env: Env) -> None:
    env.write_config(scheduler={"policy": "tesserae-t-fair", "round_seconds": 2,
                                "policy_options": {"queue_limits": [LIMIT_S]}})
    alone = [env.submit_toy(1, 100000, model=None, name=f"alone{i}") for i in range(7)]
    packed = [env.submit_toy(1, 100000, model="resnet50", batch="128", name=f"rn{i}") for i in range(2)]
    d = env.daemon()
    store = env.store

    def all_running() -> bool:
        states = {r.job_id: r.state for r in store().jobs()}
        return all(states.get(j) == "RUNNING" for j in (*alone, *packed))

    wait_for(all_running, 120, "every job to run", tick=d.run_round, every=2)
    a, b = (store().job(j) for j in packed)
    assert a.packed_with == b.job_id and b.packed_with == a.job_id and a.gpus == b.gpus, (a.gpus, b.gpus)
    assert a.speed == pytest.approx(0.52) and b.speed == pytest.approx(0.52)

    for _ in range(60):
        time.sleep(1)
        result = d.run_round()
        demoted = [j for j in alone if _queue(d, j) >= 1]
        if demoted:
            break
    assert demoted and all(_queue(d, j) == 0 for j in alone if j not in demoted)
    rows = {r.job_id: r for r in store().jobs()}
    for j in packed:  # counted at the pair's speed up to this round: half the service of a job alone
        r = rows[j]
        assert _queue(d, j) == 0, (j, r.executed_time, r.work_done)
        assert r.work_done == pytest.approx(0.52 * r.executed_time, rel=1e-6)
        assert r.executed_time * r.num_gpus >= LIMIT_S - 2  # GPU time would have demoted it with the others
    for j in alone:
        assert rows[j].work_done == pytest.approx(rows[j].executed_time, rel=1e-6)
    # ranked ahead, the packed jobs keep running (now each alone) and a demoted job alone makes room
    assert result.plan is not None and set(packed) <= set(result.plan.targets), result.plan
    preempted = [a.job_id for a in result.plan.actions if a.kind == "preempt"]
    assert len(preempted) == 1 and preempted[0] in demoted, (preempted, demoted)
