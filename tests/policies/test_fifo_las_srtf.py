"""FIFO, LAS and SRTF orders on the worked examples of policies.md §1-3."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policies.policy_helpers import inp, view

from tesserae_slurm.model import InputError
from tesserae_slurm.policies.fifo import FifoPolicy
from tesserae_slurm.policies.las import LasPolicy
from tesserae_slurm.policies.registry import make_policy
from tesserae_slurm.policies.srtf import SrtfPolicy, remaining_time


def order(policy, views, **kw):
    ranking, _ = policy.rank(inp(views, **kw), policy.initial_state())
    return list(ranking.order)


def test_fifo_arrival_order():
    views = [view("A", 4, 0), view("B", 1, 10), view("C", 1, 20)]
    assert order(FifoPolicy(), views) == ["A", "B", "C"]
    assert order(FifoPolicy(preemptive=True), views) == ["A", "B", "C"]


def test_fifo_keeps_backfilled_running_jobs_unless_preemptive():
    # C was backfilled while A (4 GPUs) waited; when GPUs free up A must not evict C by default.
    views = [view("A", 4, 0), view("B", 1, 10), view("C", 1, 20, running=True)]
    assert order(FifoPolicy(), views) == ["C", "A", "B"]
    assert order(FifoPolicy(preemptive=True), views) == ["A", "B", "C"]


def test_fifo_ties_keep_input_order():
    views = [view("x2", 1, 5), view("x1", 1, 5), view("x0", 1, 1)]
    assert order(FifoPolicy(), views) == ["x0", "x2", "x1"]


def test_las_wall_time_service_as_blox():
    views = [view("A", 1, 0, served=720), view("B", 4, 1, served=360), view("C", 1, 2)]
    assert order(LasPolicy(), views) == ["C", "B", "A"]


def test_las_gpu_time_service():
    views = [view("A", 1, 0, served=720), view("B", 4, 1, served=360), view("C", 1, 2)]
    assert order(LasPolicy(service="gpu-time"), views) == ["C", "A", "B"]


def test_las_rejects_unknown_service():
    with pytest.raises(InputError):
        LasPolicy(service="gpu")


def test_srtf_remaining_time():
    views = [view("B", 1, 0, total=500, remaining=500), view("A", 1, 1, served=600, total=1000, remaining=400)]
    assert order(SrtfPolicy(), views) == ["A", "B"]


def test_srtf_gpu_weighted_is_tiresias_shortest_gpu():
    views = [view("A", 2, 0, total=1000, remaining=400), view("B", 1, 1, total=500, remaining=500)]
    assert order(SrtfPolicy(), views) == ["A", "B"]  # 400 < 500
    assert order(SrtfPolicy(gpu_weighted=True), views) == ["B", "A"]  # 800 > 500


def test_srtf_without_remaining_uses_total_minus_run_and_unknown_last():
    a = view("A", 1, 0, served=100, total=1000)  # 900 left
    b = view("B", 1, 1)  # unknown: last
    c = view("C", 1, 2, total=950)  # 950 left
    assert remaining_time(a) == 900 and math.isinf(remaining_time(b))
    assert order(SrtfPolicy(), [b, a, c]) == ["A", "C", "B"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(-5.0, 5.0)), min_size=1, max_size=8))
def test_srtf_orders_by_remaining_work_clamped_at_zero_then_arrival(remaining):
    """The oracle: sort by max(0, remaining) (unknown last), ties in arrival order. Remainders under a
    second and overruns (negative: a job past its estimate) are where a wrong clamp would show."""
    views = [view(f"j{i}", 1, float(i), remaining=r) for i, r in enumerate(remaining)]
    key = [math.inf if r is None else max(0.0, r) for r in remaining]
    assert order(SrtfPolicy(), views) == [f"j{i}" for i in sorted(range(len(views)), key=lambda i: (key[i], i))]


def test_registry_builds_each_heuristic_with_options():
    assert isinstance(make_policy("fifo", preemptive=True), FifoPolicy)
    assert make_policy("las", service="gpu-time").service == "gpu-time"
    assert make_policy("srtf").name == "srtf"
    with pytest.raises(InputError, match="bad options"):
        make_policy("fifo", bogus=1)
