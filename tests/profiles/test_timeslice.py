"""Time-sliced pair speeds (two users' jobs on one GPU): formats, the fallback model, the class tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tesserae_slurm.estimators.entries import profile_from_table, table_from_profile
from tesserae_slurm.model import InputError, Job
from tesserae_slurm.profiles import (
    load_profile,
    parse_profile_csv,
    profile_csv_text,
    profile_from_json,
    profile_to_json,
)
from tesserae_slurm.profiles.keys import MPS, TIMESLICE, TIMESLICE_SHARE

SMALL = {
    "name": "small",
    "isolated": [
        {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2, "strategy": "DP24", "speed": 1.0},
        {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2, "strategy": "10,14", "speed": 0.8},
    ],
    "pairs": [
        {"a": {"model": "resnet50", "batch_size": "64", "num_gpus": 1},
         "b": {"model": "resnet50", "batch_size": "64", "num_gpus": 1}, "a_speed": 0.6, "b_speed": 0.6},
        {"a": {"model": "resnet50", "batch_size": "64", "num_gpus": 1},
         "b": {"model": "resnet50", "batch_size": "64", "num_gpus": 1}, "a_speed": 0.5, "b_speed": 0.52,
         "sharing": "timeslice"},
        {"a": {"model": "resnet50", "batch_size": "64", "num_gpus": 1},
         "b": {"model": "vgg19", "batch_size": "32", "num_gpus": 1}, "a_speed": 0.7, "b_speed": 0.5},
        {"a": {"model": "vgg19", "batch_size": "32", "num_gpus": 1},
         "b": {"model": "DCGAN", "batch_size": "32", "num_gpus": 1}, "a_speed": 0.0, "b_speed": 0.0},
        {"a": {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2},
         "b": {"model": "resnet50", "batch_size": "64", "num_gpus": 2}, "a_strategy": "10,14",
         "a_speed": 0.7, "b_speed": 0.6},
        {"a": {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2},
         "b": {"model": "resnet50", "batch_size": "64", "num_gpus": 2}, "a_strategy": "DP24",
         "a_speed": 0.55, "b_speed": 0.5},
    ],
}


@pytest.fixture(scope="module")
def small():
    return profile_from_json(SMALL)


def _key(p, model, batch, gpus=1):
    return p.key(model, batch, gpus)


def test_measured_timeslice_is_kept_apart_from_mps(small):
    r = _key(small, "resnet50", "64")
    (mps,) = small.pair_options(r, r, "a100")
    (ts,) = small.pair_options(r, r, "a100", TIMESLICE)
    assert (mps.a_speed, mps.b_speed) == (0.6, 0.6)
    # identical jobs: the mean of both orientations, as for MPS pairs
    assert ts.a_speed == ts.b_speed == pytest.approx(0.51)
    assert small.timeslice_measured(r, r, "a100")


def test_fallback_is_the_share_of_each_speed_alone_under_the_pair_strategy(small):
    r, v = _key(small, "resnet50", "64"), _key(small, "vgg19", "32")
    (ts,) = small.pair_options(r, v, "a100", TIMESLICE)
    assert (ts.a_speed, ts.b_speed) == (pytest.approx(TIMESLICE_SHARE), pytest.approx(TIMESLICE_SHARE))
    assert not small.timeslice_measured(r, v, "a100")
    g, r2 = _key(small, "GPT2-Medium", "", 2), _key(small, "resnet50", "64", 2)
    by_strategy = {o.a_strategy: o for o in small.pair_options(g, r2, "a100", TIMESLICE)}
    assert by_strategy["10,14"].a_speed == pytest.approx(0.8 * TIMESLICE_SHARE)  # its speed alone under 10,14
    assert by_strategy["DP24"].a_speed == pytest.approx(1.0 * TIMESLICE_SHARE)
    assert by_strategy["10,14"].b_speed == pytest.approx(TIMESLICE_SHARE)
    # mirrored like every lookup
    back = {o.b_strategy: o for o in small.pair_options(r2, g, "a100", TIMESLICE)}
    assert back["10,14"].b_speed == by_strategy["10,14"].a_speed


def test_fallback_keeps_out_of_memory_pairs_infeasible(small):
    v, d = _key(small, "vgg19", "32"), _key(small, "DCGAN", "32")
    (ts,) = small.pair_options(v, d, "a100", TIMESLICE)
    assert not ts.feasible
    assert small.best_pair(Job("a", 1, "vgg19", "32"), Job("b", 1, "DCGAN", "32"), "a100", TIMESLICE) is None


def test_timeslice_class_table_numbers_classes_alike_and_matches_best_pair(small):
    mps, ts = small.classes, small.timeslice_classes
    assert ts.classes == mps.classes and ts.spelled == mps.spelled and ts.sharing == TIMESLICE
    assert small.class_table(MPS) is mps and small.class_table(TIMESLICE) is ts
    for i, a in enumerate(ts.classes):
        for j, b in enumerate(ts.classes):
            ja = Job("a", a.key.num_gpus, a.key.model, a.key.batch_size, parallelism=a.candidates)
            jb = Job("b", b.key.num_gpus, b.key.model, b.key.batch_size, parallelism=b.candidates)
            best = small.best_pair(ja, jb, "a100", TIMESLICE)
            if best is None:
                assert math.isnan(ts.total[0, i, j])
            else:
                assert ts.total[0, i, j] == pytest.approx(best.total)
    extra = Job("x", 2, "GPT2-Medium", "512/8", parallelism=("10,14", "DP24"))
    bigger = ts.with_extra(small, [small.job_class(extra)])
    assert bigger.sharing == TIMESLICE  # an extended table stays time-sliced


def test_a100_fallback_pairs_never_sum_to_one():
    """The shipped table measured no time-sliced pair: every time-sliced pair is the fallback, and
    with every job at 1.0 alone under its best strategy none sums to 1.0 or more."""
    a100 = load_profile("a100")
    ts = a100.timeslice_classes
    unrestricted = [i for i, c in enumerate(ts.classes) if not c.candidates]
    sums = ts.total[0][np.ix_(unrestricted, unrestricted)]
    assert np.nanmax(sums) <= 2 * TIMESLICE_SHARE + 1e-9
    assert np.nanmax(a100.classes.total[0][np.ix_(unrestricted, unrestricted)]) > 1.0


def test_csv_and_json_round_trip_with_timeslice(small):
    text = profile_csv_text(small.__class__(small.name, small.isolated,
                                            tuple(p for p in small.pairs if p.option.b_strategy is None
                                                  or p.option.a_strategy is None)))
    assert text.splitlines()[0].endswith(",sharing")
    again = parse_profile_csv(text, "x.csv")
    assert sorted((p.sharing, p.option.a_speed) for p in again.pairs) == sorted(
        (p.sharing, p.option.a_speed) for p in small.pairs)
    assert profile_from_json(profile_to_json(small)) == small
    # a table without time-sliced pairs keeps its own columns
    assert "sharing" not in profile_csv_text(load_profile("a100")).splitlines()[0]


@pytest.mark.parametrize("bad, message", [
    ({**SMALL, "pairs": [{**SMALL["pairs"][0], "sharing": "mig"}]}, "sharing: expected mps or timeslice"),
])
def test_bad_sharing_is_one_line(bad, message):
    with pytest.raises(InputError, match=message):
        profile_from_json(bad)


def test_bad_sharing_in_csv():
    text = ("index,model1,dataset1,gpu_num1,batch_size1,speed1,co_pipeline_rank,pipeline_strategy,model2,dataset2,"
            "gpu_num2,batch_size2,speed2,sharing\n"
            "0,resnet50,ImageNet,1,64,0.5,0,NA,resnet50,ImageNet,1,64,0.5,shared\n")
    with pytest.raises(InputError, match=r"x.csv:2: sharing must be mps or timeslice, got 'shared'"):
        parse_profile_csv(text, "x.csv")


def test_estimator_tables_carry_timeslice_pairs_over(small):
    table = table_from_profile(small)
    assert len(table.pairs()) == sum(p.sharing == MPS for p in small.pairs)
    back = profile_from_table(table, "back", template=small)
    assert set(back.pairs) == set(small.pairs) and set(back.isolated) == set(small.isolated)
