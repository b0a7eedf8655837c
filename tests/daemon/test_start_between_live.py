"""Starts between rounds on the real dev cluster (round/start_between.py): a job submitted between rounds
starts long before the next round, where the round puts it, and is recorded as a start between rounds;
a job the policy ranks ahead is not passed over by one started between rounds.

Jobs run tests/daemon/jobs/tick.py (``submit_tick``), so these run on every Slurm release.
"""

from __future__ import annotations

import json
import time

import pytest

from .helpers import Env, progressed, submit_tick, wait_for
from .test_service import Background

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]
ROUND_S = 300  # the rounds the starts must not wait for


def _node(env: Env, job: str) -> str:
    row = env.store().job(job)
    return row.gpus.split(":")[0] if row is not None and row.gpus else ""


def test_a_job_submitted_between_rounds_starts_before_the_next_round_where_the_round_puts_it(env: Env) -> None:
    """`tesserae daemon` with 300 s rounds: job A (1 GPU) starts at the first round; job B (2 GPUs),
    submitted after it, starts within a fraction of the round, on A's node (the engine's best fit), by a
    start between rounds. A round then keeps B where it is: no action on it."""
    env.write_config(scheduler={"policy": "fifo", "round_seconds": ROUND_S, "policy_options": {}},
                     slurm={"poll_seconds": 0.5})
    a = submit_tick(env, 1, 100_000, name="a", step_time=0.05)
    daemon = Background(env)
    try:
        wait_for(lambda: progressed(env, a, 1), 120, "job A to start at the first round")
        b = submit_tick(env, 2, 100_000, name="b", step_time=0.05)
        wait_for(lambda: progressed(env, b, 1), ROUND_S / 5, "job B to start between rounds",
                 explain=lambda: daemon.text()[-2000:])
    finally:
        assert daemon.stop() == 0, daemon.text()[-3000:]
    store = env.store()
    (start,) = [x for x in store.actions(job_id=b) if x.kind == "start"]
    pass_row = store.round(start.round_id)
    assert pass_row is not None and pass_row.kind == "start" and pass_row.status == "applied"
    assert json.loads(pass_row.decision_json)["started"] == [b]
    assert len([r for r in store.rounds(limit=50) if r.kind == "round"]) == 1  # no round came in between
    assert _node(env, b) == _node(env, a) != ""
    # the round's own decision keeps B where the pass put it
    d = env.daemon()
    result = d.run_round()
    assert result.status == "applied" and result.plan is not None and b in result.plan.kept, result.plan
    ex = env.tesserae("explain", b)
    assert ex.returncode == 0 and "started between rounds" in ex.stdout, ex.stdout + ex.stderr


def test_a_job_ranked_ahead_is_not_passed_over_by_a_start_between_rounds(env: Env) -> None:
    """Tiresias by wall time, demoting after 30 s. R (2 GPUs) runs past 30 s, then R2 (4 GPUs) starts on
    the other node. H (4 GPUs) and S (2 GPUs) arrive: the order is R2, H, S, R, so the decision gives
    R's node to H (preempting R) and nothing to S. R's node has two free GPUs that S fits; a start
    between rounds must leave them to H, which the next round starts there."""
    env.write_config(scheduler={"policy": "tiresias", "round_seconds": ROUND_S,
                                "policy_options": {"queue_limits": [30], "service": "time"}},
                     preemption={"grace_seconds": 10, "stop_records_dir": str(env.tmp / "stops")})
    d = env.daemon()
    r = submit_tick(env, 2, 100_000, name="r", step_time=0.05, on_signal="checkpoint")
    assert d.run_round().status == "applied"
    wait_for(lambda: progressed(env, r, 1), 60, "R to run")
    started = min(e["time"] for e in env.events(r) if e["event"] == "start")
    # R's service counts from its start: past the 30 s limit the next ranking puts it in the lower queue
    wait_for(lambda: time.time() > started + 32, 60, "R to have run 32 s")
    r2 = submit_tick(env, 4, 100_000, name="r2", step_time=0.05)
    assert d.start_between() is not None  # R2 fits the free node: started between rounds
    wait_for(lambda: progressed(env, r2, 1), 60, "R2 to run")
    h = submit_tick(env, 4, 100_000, name="h", step_time=0.05)
    s = submit_tick(env, 2, 100_000, name="s", step_time=0.05)
    node_r = _node(env, r)
    assert d.start_between() is None  # H waits for R's GPUs; S gets none
    assert {env.squeue()[j]["state"] for j in (h, s)} == {"PENDING"}
    result = d.run_round()
    assert result.plan is not None and [a.job_id for a in result.plan.starts] == [h], result.plan
    assert _node(env, h) == node_r and [a.job_id for a in result.plan.stops] == [r]
    assert d.start_between() is None  # no GPU is free now
    assert not env.events(s), "S ran"
