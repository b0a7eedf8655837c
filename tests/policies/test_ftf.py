"""Themis finish-time-fairness order: rho computed by hand (policies.md §9)."""

from __future__ import annotations

import pytest
from policies.policy_helpers import ConstantSpeeds, inp, view

from tesserae_slurm.model import Cluster
from tesserae_slurm.policies.ftf import ThemisPolicy, rho
from tesserae_slurm.policies.registry import make_policy


def test_rho_by_hand():
    # contention c = 2 (e.g. 4 active jobs on 2 GPUs)
    assert rho(view("A", 1, 0, total=1000, remaining=500), 1000, 360, 1.0, 2.0) == pytest.approx(1500 / 2000)
    assert rho(view("B", 1, 500, total=200, remaining=200), 1000, 360, 1.0, 2.0) == pytest.approx(700 / 400)
    assert rho(view("C", 1, 900, total=4000, remaining=4000), 1000, 360, 1.0, 2.0) == pytest.approx(4100 / 8000)
    # no duration: wall time over service (service floored at one round)
    assert rho(view("D", 1, 0, served=100), 1000, 360, 1.0, 2.0) == pytest.approx(1000 / (360 * 2))
    # contention below 1 does not make the ideal time shorter than running alone
    assert rho(view("E", 1, 0, total=100, remaining=100), 100, 360, 1.0, 0.25) == pytest.approx(2.0)


def test_rho_on_a_faster_gpu_type():
    # twice as fast as the reference: both the remaining and the ideal time halve
    v = view("A", 1, 0, total=1000, remaining=500)
    assert rho(v, 1000, 360, 2.0, 1.0) == pytest.approx((1000 + 250) / 500)


def test_order_is_largest_rho_first():
    views = [view("A", 1, 0, total=1000, remaining=500), view("B", 1, 500, total=200, remaining=200),
             view("C", 1, 900, total=4000, remaining=4000), view("D", 1, 0, served=100)]
    policy = ThemisPolicy()
    r, state = policy.rank(inp(views, now=1000, gpus=2), policy.initial_state())
    assert r.order == ("B", "D", "A", "C")  # 1.75, 1.39, 0.75, 0.51
    assert state.contention["A"].mean == pytest.approx(2.0)


def test_contention_is_averaged_over_the_job_life():
    policy = ThemisPolicy()
    state = policy.initial_state()
    a = view("A", 1, 0, total=1000, remaining=1000)
    _, state = policy.rank(inp([a, view("B"), view("C"), view("D")], now=0, gpus=1), state)  # c = 4
    _, state = policy.rank(inp([a, view("B")], now=360, gpus=1), state)  # c = 2
    assert state.contention["A"].mean == pytest.approx(3.0)
    assert "C" not in state.contention


def test_speed_comes_from_the_best_gpu_type_of_the_cluster():
    cluster = Cluster.from_spec("1x1:slow,1x1:fast")
    lookup = ConstantSpeeds({"slow": 0.5, "fast": 2.0})
    # A: elapsed 1000, 500 s of work left; at 2x: (1000 + 250) / (1000 / 2 x 1) = 2.5
    # B: elapsed 1000, no progress, 2000 s: (1000 + 1000) / 1000 = 2.0 -> A first
    views = [view("B", 1, 0, total=2000, remaining=2000), view("A", 1, 0, total=1000, remaining=500)]
    r, _ = ThemisPolicy().rank(inp(views, now=1000, cluster=cluster, lookup=lookup), ThemisPolicy().initial_state())
    assert r.order == ("A", "B")


def test_ties_keep_arrival_order_and_registry_name():
    views = [view("x", 1, 0, total=100, remaining=100), view("y", 1, 0, total=100, remaining=100)]
    p = make_policy("ftf")
    r, _ = p.rank(inp(views, now=50), p.initial_state())
    assert r.order == ("x", "y")
