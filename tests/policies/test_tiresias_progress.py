"""Tiresias with service charged by progress (``service="progress"``, beyond the paper): a job slowed by
its packing partner is charged the work it did, not the GPU time it held."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.policy_helpers import inp, view
from tesserae_slurm.presets import get_config
from tesserae_slurm.policies.registry import make_policy
from tesserae_slurm.policies.tiresias import TiresiasPolicy, progress_service


def test_progress_service_is_work_done_times_gpus():
    # A: 2 GPUs held 3600 s at speed 0.25 -> 900 s of its 5000 s of work done -> 1800 GPU-s of progress
    # B: no work known (the daemon) -> charged its GPU time
    views = [view("A", 2, served=3600, total=5000, remaining=4100), view("B", 4, served=100)]
    attained = np.array([v.attained_service for v in views])
    assert progress_service(views, attained).tolist() == [1800.0, 400.0]


def test_progress_service_prefers_the_work_the_daemon_counted():
    # the daemon knows no total or remaining work; it counts work_done from each round's speed. C: 1 GPU
    # held 3600 s, 1000 s of them alone and 2600 s at 0.5 -> 2300 s of work. D: both known, the
    # counted figure wins (it is what the shell measured)
    views = [view("C", 1, served=3600)._replace(work_done=2300.0),
             view("D", 2, served=100, total=5000, remaining=4950)._replace(work_done=80.0)]
    attained = np.array([v.attained_service for v in views])
    assert progress_service(views, attained).tolist() == [2300.0, 160.0]


def test_a_slowed_job_stays_in_q0_under_progress_and_is_demoted_under_gpu_time():
    """Hand-worked: 1 GPU held 3600 s packed at speed 0.5 did 1800 s of work. GPU time 3600 >= 3250
    demotes it to Q1 behind the newcomer; progress 1800 < 3250 keeps it ahead in Q0."""
    views = [view("A", 1, 0, served=3600, running=True, total=7200, remaining=5400), view("B", 1, 10)]
    gpu_time, progress = TiresiasPolicy(), TiresiasPolicy(service="progress")
    r_gpu, s_gpu = gpu_time.rank(inp(views, now=3600), gpu_time.initial_state())
    r_prog, s_prog = progress.rank(inp(views, now=3600), progress.initial_state())
    assert s_gpu.jobs["A"].queue == 1 and r_gpu.order == ("B", "A")
    assert s_prog.jobs["A"].queue == 0 and r_prog.order == ("A", "B")


def test_full_speed_progress_demotes_like_gpu_time():
    # alone at speed 1.0 the work done equals the time held: both services agree
    views = [view("A", 4, 0, served=1000, running=True, total=9000, remaining=8000)]
    for service in ("gpu-time", "progress"):
        p = TiresiasPolicy(queue_limits=(3250,), service=service)
        _, s = p.rank(inp(views, now=1000), p.initial_state())
        assert s.jobs["A"].queue == 1  # 4000 GPU-s either way


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.floats(0, 20000), st.floats(0.05, 1.0)),
                min_size=1, max_size=8))
def test_progress_never_demotes_below_gpu_time(jobs):
    """Progress <= GPU time held (speeds <= 1), so no job sits in a lower queue under progress than
    under GPU time; with every speed 1.0 the queues are the same."""
    views = [view(f"j{i}", g, float(i), served=s, running=True, total=s * 2 + 1, remaining=s * 2 + 1 - s * v)
             for i, (g, s, v) in enumerate(jobs)]
    q = {}
    for service in ("gpu-time", "progress"):
        p = TiresiasPolicy(service=service)
        _, state = p.rank(inp(views, now=0), p.initial_state())
        q[service] = {j: state.jobs[j].queue for j in state.jobs}
    assert all(q["progress"][j] <= q["gpu-time"][j] for j in q["gpu-time"])


def test_progress_skips_no_quiet_round_while_a_job_can_be_demoted():
    p = TiresiasPolicy(service="progress")
    views = [view("A", 1, 0, served=360, running=True, total=7200, remaining=7020)]
    ranking, state = p.rank(inp(views, now=360), p.initial_state())
    assert p.stable_rounds(inp(views, now=360), state, ranking, 50) == 0
    assert TiresiasPolicy().stable_rounds(inp(views, now=360), state, ranking, 50) > 0


def test_registry_and_named_configuration():
    assert make_policy("tiresias", service="progress").service == "progress"
    cfg = get_config("tesserae-t-fair")
    assert (cfg.policy, cfg.engine.packing, cfg.engine.migration) == ("tiresias", "on", "tesserae")
    assert dict(cfg.policy_options) == {"service": "progress", "promote_knob": 8.0, "promote_max_run_s": 7200.0}
    assert cfg.engine.placement == "sticky-fit"
    with pytest.raises(Exception, match="service"):
        TiresiasPolicy(service="work")
    with pytest.raises(Exception, match="promote_max_run_s"):
        TiresiasPolicy(promote_max_run_s=0)


def _waited(policy: TiresiasPolicy, ran: float, waited: float):
    """A (1 GPU) ran ``ran`` s and was demoted to Q1; then it waits ``waited`` s while B runs."""
    state = policy.initial_state()
    _, state = policy.rank(inp([view("A", 1, 0)], now=0), state)
    _, state = policy.rank(inp([view("A", 1, 0, served=ran, running=True)], now=ran), state)
    assert state.jobs["A"].queue == 1
    views = [view("A", 1, 0, served=ran), view("B", 1, ran, running=True, served=360)]
    _, state = policy.rank(inp(views, now=ran + waited), state)
    return state


def test_promotion_cap_on_total_run_time():
    """Hand-worked, limits (1000,): A ran 1080 s (> 1000 GPU-s: Q1), then waited 2 x 1080 s. With P = 2 it
    is promoted back to Q0 unless the cap says it ran too long in all (1080 s > 1000 s)."""
    uncapped = TiresiasPolicy(queue_limits=(1000,), promote_knob=2)
    capped = TiresiasPolicy(queue_limits=(1000,), promote_knob=2, promote_max_run_s=1000)
    roomy = TiresiasPolicy(queue_limits=(1000,), promote_knob=2, promote_max_run_s=1080)
    assert _waited(uncapped, 1080, 2160).jobs["A"].queue == 0
    assert _waited(roomy, 1080, 2160).jobs["A"].queue == 0  # at the cap: still promoted
    s = _waited(capped, 1080, 2160)
    assert s.jobs["A"].queue == 1 and s.promotions == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(1, 20)), min_size=1, max_size=6),
       st.sampled_from([400.0, 1500.0, 5000.0]), st.integers(1, 30))
def test_no_job_over_the_cap_is_ever_promoted(jobs, cap, rounds):
    """Round loop on one 4-GPU node: every job promoted has run at most ``cap`` wall seconds in all."""
    policy = TiresiasPolicy(queue_limits=(700,), promote_knob=1, promote_max_run_s=cap)
    served = {f"j{i}": 0.0 for i in range(len(jobs))}
    gpus = {f"j{i}": g for i, (g, _) in enumerate(jobs)}
    left = {f"j{i}": 360.0 * n for i, (_, n) in enumerate(jobs)}
    running: set[str] = set()
    state = policy.initial_state()
    for r in range(rounds):
        active = [j for j in served if left[j] > 0]
        if not active:
            break
        views = [view(j, gpus[j], 0.0, served=served[j], running=j in running) for j in active]
        before = dict(state.jobs)
        _, state = policy.rank(inp(views, now=360.0 * r), state)
        for j in active:
            if j in before and before[j].queue > 0 and state.jobs[j].queue == 0:
                assert served[j] <= cap
        free, running = 4, set()
        for j in state.jobs:
            if gpus[j] <= free:
                running.add(j)
                free -= gpus[j]
        for j in running:
            served[j] += 360.0
            left[j] -= 360.0
