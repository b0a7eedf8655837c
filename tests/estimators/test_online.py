"""Online feedback: EWMA of reported steps/s, normalization against alone runs, worked examples."""

from __future__ import annotations

import json
import math

import pytest

from tesserae_slurm.estimators.entries import Endpoint, SpeedTable, Value, make_entry, oriented
from tesserae_slurm.estimators.online import ONLINE, OnlineState, ThroughputReport
from tesserae_slurm.model import InputError
from tesserae_slurm.profiles import ProfileKey

R = Endpoint(ProfileKey("resnet50", "64", 1))
V = Endpoint(ProfileKey("vgg19", "32", 1))
G = Endpoint(ProfileKey("GPT", "8/4", 2), "10,14")
P = Endpoint(ProfileKey("PointNet", "32", 2))


def base_table() -> SpeedTable:
    rv = make_entry("a100", R, V)
    gp = make_entry("a100", G, P)
    return SpeedTable({
        make_entry("a100", R): Value(1.0), make_entry("a100", V): Value(1.0),
        make_entry("a100", G): Value(0.8), make_entry("a100", P): Value(1.0),
        rv: Value(0.6, 0.7) if rv.job == R else Value(0.7, 0.6),
        gp: Value(0.3, 0.9) if gp.job == G else Value(0.9, 0.3),
    }, {})


def speeds(table, a, b):
    e = make_entry("a100", a, b)
    return oriented(e, table.values[e], a)


def test_packed_reports_become_normalized_speeds_against_the_profiled_throughput():
    state = OnlineState(alpha=0.5).fold([ThroughputReport("A100", R, V, 5.0), ThroughputReport("a100", V, R, 2.0)])
    out = state.apply(base_table(), {("a100", R): 10.0, ("a100", V): 4.0})
    assert speeds(out, R, V) == (0.5, 0.5)  # 5/10, 2/4
    assert out.source(make_entry("a100", R, V)) == ONLINE
    assert out.source(make_entry("a100", G, P)) == "measured"  # untouched


def test_ewma_and_online_alone_reference():
    state = OnlineState(alpha=0.5).fold([ThroughputReport("a100", R, V, 5.0)])
    state = state.fold([ThroughputReport("a100", R, V, 7.0)])  # EWMA: 0.5 x 7 + 0.5 x 5 = 6
    assert state.measured_speed("a100", R, V) == 6.0
    out = state.apply(base_table(), {("a100", R): 10.0})
    assert speeds(out, R, V) == (pytest.approx(0.6), 0.7)  # the partner side keeps its table value
    state = state.fold([ThroughputReport("a100", R, None, 12.0)])  # measured alone beats the profile
    assert speeds(state.apply(base_table(), {("a100", R): 10.0}), R, V)[0] == pytest.approx(0.5)


def test_llm_speed_is_relative_to_its_best_strategy():
    # alone under 10,14 the LLM runs 5 steps/s, which the table says is 0.8 of its best strategy;
    # packed it runs 4 steps/s -> 4/5 x 0.8 = 0.64 of its best alone
    state = OnlineState().fold([ThroughputReport("a100", G, None, 5.0), ThroughputReport("a100", G, P, 4.0)])
    out = state.apply(base_table())
    assert speeds(out, G, P) == (pytest.approx(0.64), 0.9)


def test_a_side_without_reference_changes_nothing():
    state = OnlineState().fold([ThroughputReport("a100", R, V, 5.0)])
    assert state.apply(base_table()) == base_table()
    # a pair the table does not have and only one side known: not written
    n = Endpoint(ProfileKey("DCGAN", "32", 1))
    state = OnlineState().fold([ThroughputReport("a100", R, n, 5.0)])
    assert make_entry("a100", R, n) not in state.apply(base_table(), {("a100", R): 10.0})


def test_self_pair_is_symmetric():
    state = OnlineState().fold([ThroughputReport("a100", R, R, 4.0)])
    out = state.apply(base_table(), {("a100", R): 10.0})
    v = out.values[make_entry("a100", R, R)]
    assert (v.a, v.b) == (0.4, 0.4) and v.feasible


def test_rows_round_trip_through_json():
    state = OnlineState(alpha=0.2).fold([ThroughputReport("a100", R, V, 5.0), ThroughputReport("a100", G, None, 3.0),
                                         ThroughputReport("a100", P, G, 1.5)])
    back = OnlineState.from_rows(json.loads(json.dumps(state.rows())), alpha=0.2)
    assert back == state
    with pytest.raises(InputError, match="online feedback row 0"):
        OnlineState.from_rows([{"gpu_type": "a100"}])


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_reports_and_alpha_are_input_errors(bad):
    with pytest.raises(InputError):
        ThroughputReport("a100", R, None, bad)
    with pytest.raises(InputError):
        OnlineState(alpha=bad if bad != -1.0 else 1.5)


def test_llm_strategy_never_seen_alone_borrows_the_reference_of_another():
    # The LLM ran alone only under DP8 (iso 1.0, 10 steps/s); packed under 10,14 (iso 0.8) it runs
    # 4 steps/s. Alone under 10,14 it would run 0.8 x 10 = 8 steps/s -> 4/8 x 0.8 = 0.4 of its best.
    dp = Endpoint(G.key, "DP8")
    t = base_table()
    table = SpeedTable({**t.values, make_entry("a100", dp): Value(1.0)}, {})
    state = OnlineState().fold([ThroughputReport("a100", dp, None, 10.0), ThroughputReport("a100", G, P, 4.0)])
    assert speeds(state.apply(table), G, P) == (pytest.approx(0.4), 0.9)
    assert state.apply(base_table()) == base_table()  # without any reference of the shape: unchanged
