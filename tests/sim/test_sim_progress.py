"""Exact in-round progress against hand-worked cases and a fine time-stepping oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.sim.progress import Member, run_alone, run_pair

R = 360.0


def test_alone_finishes_inside_the_round():
    o = run_alone(Member(remaining=100, overhead=30, solo=0.5, packed=0.5), R)
    assert o.finish == pytest.approx(230) and o.work == 100 and o.packed_s == 0


def test_alone_runs_the_whole_round():
    o = run_alone(Member(remaining=1000, overhead=30, solo=0.5, packed=0.5), R)
    assert o.finish is None and o.work == pytest.approx(165)


def test_alone_overhead_takes_the_whole_round():
    o = run_alone(Member(remaining=10, overhead=R, solo=1, packed=1), R)
    assert o.finish is None and o.work == 0


def test_pair_survivor_speeds_up_after_its_partner_finishes():
    # A: 61 s of work at 0.61 -> done at 100 s. B: 0.61 x 100 = 61 done by then, then 100 s alone
    # at 1.0 -> finishes at 200 s.
    a, b = Member(61, 0, 1.0, 0.61), Member(161, 0, 1.0, 0.61)
    oa, ob = run_pair(a, b, R)
    assert oa.finish == pytest.approx(100) and ob.finish == pytest.approx(200)
    assert ob.work == 161 and ob.packed_s == pytest.approx(100)


def test_pair_with_a_restarting_partner():
    # B restarts for 30 s (A is already slowed: the partner counts as present), both packed at 0.5.
    a, b = Member(1000, 0, 1.0, 0.5), Member(1000, 30, 1.0, 0.5)
    oa, ob = run_pair(a, b, R)
    assert oa.work == pytest.approx(180) and ob.work == pytest.approx(165)
    assert oa.finish is None and ob.finish is None


def test_pair_survivor_still_restarting_when_the_partner_finishes():
    a, b = Member(10, 0, 1.0, 0.5), Member(100, 60, 1.0, 0.5)  # A done at 20 s, B starts at 60 s alone
    oa, ob = run_pair(a, b, R)
    assert oa.finish == pytest.approx(20) and ob.finish == pytest.approx(160) and ob.packed_s == 0


def test_infeasible_pair_makes_no_progress():
    oa, ob = run_pair(Member(10, 0, 1, 0), Member(10, 0, 1, 0), R)
    assert oa.work == ob.work == 0 and oa.finish is ob.finish is None


def _stepped(members, round_s, dt=0.05):
    """Oracle: advance in small steps with the rules of the module docstring."""
    left = [m.remaining for m in members]
    finish = [None] * len(members)
    t = 0.0
    while t < round_s - 1e-12:
        step = min(dt, round_s - t)
        alive = [finish[i] is None for i in range(len(members))]
        for i, m in enumerate(members):
            if not alive[i] or t < m.overhead - 1e-12:
                continue
            partner = len(members) == 2 and alive[1 - i]
            speed = m.packed if partner else m.solo
            if speed <= 0:
                continue
            need = left[i] / speed
            if need <= step:
                finish[i], left[i] = t + need, 0.0
            else:
                left[i] -= speed * step
        t += step
    return [m.remaining - left[i] for i, m in enumerate(members)], finish


members = st.builds(
    Member,
    remaining=st.floats(1, 600), overhead=st.sampled_from([0.0, 30.0, 90.0]),
    solo=st.floats(0.3, 1.5), packed=st.floats(0.1, 1.0))


@settings(max_examples=60, deadline=None)
@given(members, members)
def test_pair_matches_a_time_stepping_oracle(a, b):
    oa, ob = run_pair(a, b, R)
    (wa, wb), (fa, fb) = _stepped([a, b], R)
    for out, work, fin, m in ((oa, wa, fa, a), (ob, wb, fb, b)):
        assert out.work == pytest.approx(work, abs=0.2)
        assert 0 <= out.work <= m.remaining
        if out.finish is not None and fin is not None:
            assert out.finish == pytest.approx(fin, abs=0.2)
        else:  # a finish within one time step of the round's end may land either side
            assert (out.finish or fin or R) >= R - 0.2
        assert (out.finish is not None) == (out.work == m.remaining)
