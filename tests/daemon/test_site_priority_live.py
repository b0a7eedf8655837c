"""Site priorities on the real local Slurm: slurm-priority-t follows Slurm's order (nice, which Slurm
shows on the held jobs the daemon keeps waiting) and a user over the GPU limit waits with the reason."""

from __future__ import annotations

import getpass

import pytest

from .helpers import Env, wait_for

pytestmark = [pytest.mark.slurm_live, pytest.mark.every_release]


def _state(env: Env, job: str) -> str:
    row = env.store().job(job)
    return row.state if row is not None else ""  # not seen by a round yet


def _config(env: Env, **limits: object) -> None:
    env.write_config(scheduler={"policy": "slurm-priority-t", "round_seconds": 2, "policy_options": {}},
                     **({"limits": limits} if limits else {}))


def test_a_user_over_the_gpu_limit_waits_with_the_reason(env: Env) -> None:
    me = getpass.getuser()
    _config(env, users={me: 4})
    a = env.submit_toy(4, 100000, model=None, name="lim-a")
    b = env.submit_toy(4, 100000, model=None, name="lim-b")  # 8 GPUs free: only the limit keeps it back
    d = env.daemon()
    wait_for(lambda: _state(env, a) == "RUNNING", 90, "the first job to run", tick=d.run_round)
    for _ in range(3):
        d.run_round()
    row = env.store().job(b)
    assert row.state == "PENDING" and row.reason == f"Limit: needs 4 GPUs; user {me} holds 4 of 4 GPUs", row.reason
    assert env.squeue()[b]["state"] == "PENDING"
    ex = env.tesserae("explain", b)
    assert ex.returncode == 0 and f"user {me} holds 4 of 4 GPUs" in ex.stdout, ex.stdout


def test_slurm_priority_order_is_followed(env: Env) -> None:
    """Both wait behind a job holding every GPU; the later one, with the lower nice (so the higher
    priority in Slurm's terms), starts first when the GPUs free up (Tiresias would start the earlier)."""
    _config(env)
    first = env.submit_toy(8, 40, model=None, name="fill", step_time=0.05)
    d = env.daemon()
    wait_for(lambda: _state(env, first) == "RUNNING", 90, "the filler to run", tick=d.run_round)
    low = env.submit_toy(8, 100000, model=None, name="nice100", extra=("--nice=100",))
    high = env.submit_toy(8, 100000, model=None, name="nice0")
    wait_for(lambda: "RUNNING" in (_state(env, low), _state(env, high)), 150, "a waiting job to start",
             tick=d.run_round)
    assert _state(env, high) == "RUNNING" and _state(env, low) == "PENDING"
    assert env.squeue()[low]["state"] == "PENDING"
