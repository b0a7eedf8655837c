"""Throughput profiles: lookups checked against the shipped files read independently, errors, writers."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace
from importlib import resources

import numpy as np
import pytest

from tesserae_slurm.model import InputError, Job
from tesserae_slurm.profiles import (
    PairOption,
    ProfileKey,
    load_a100_csv,
    load_gavel_json,
    load_profile,
    parse_profile_csv,
    profile_csv_text,
    profile_from_json,
    profile_from_spec,
    profile_to_json,
    write_profile_csv,
)

LLMS = {"Bert-Large", "GPT2-Medium"}


@pytest.fixture(scope="module")
def a100():
    return load_profile("a100")


@pytest.fixture(scope="module")
def gavel():
    return load_profile("gavel")


@pytest.fixture(scope="module")
def rows():
    """The A100 CSV as the csv module reads it: the independent oracle for lookups."""
    text = resources.files("tesserae_slurm.data").joinpath("a100_packing_norm_speed.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


@pytest.fixture(scope="module")
def gavel_raw():
    return json.loads(resources.files("tesserae_slurm.data").joinpath("gavel_simulation_throughputs.json").read_text())


def key_of(p, model, batch, gpus):
    return p.key(model, batch, int(gpus))


# ---- A100 table -------------------------------------------------------------------------------------

def test_a100_shape(a100):
    assert a100.gpu_types == ("a100",)
    assert set(a100.models()) == {"resnet50", "vgg19", "DCGAN", "PointNet", "Bert-Large", "GPT2-Medium"}
    # 660 rows = 30 isolated + 630 pair rows, 36 same-model pairs measured in both orders -> 594 pairs
    assert len(a100.pairs) == 594
    assert a100.strategies("Bert-Large", 2) == ("10,14", "8,16", "6,18", "12,12", "14,10", "16,8", "18,6", "TP24", "DP24")
    assert a100.strategies("GPT2-Medium", 4) == ("6,6,6,6", "4,8,8,4", "2,8,8,6", "2,10,10,2", "TP24", "DP24")
    assert a100.strategies("resnet50", 2) == ()


def test_llm_isolated_rows(a100, rows):
    iso = [r for r in rows if r["model2"] == "Empty"]
    assert len(iso) == 30
    for r in iso:
        k = key_of(a100, r["model1"], r["batch_size1"], r["gpu_num1"])
        assert a100.isolated_speed(k, "a100", r["pipeline_strategy"]) == float(r["speed1"]), r["index"]
    # best strategy alone is DP24 at 1.0; TP24's 256/32 batch is the same key as 256/16
    assert a100.key("Bert-Large", "256/32", 2) == ProfileKey("Bert-Large", "256/16", 2)
    assert a100.isolated_speed(ProfileKey("Bert-Large", "256/16", 2), "a100") == 1.0
    assert a100.isolated_throughput(ProfileKey("Bert-Large", "256/16", 2), "a100") is None


def test_llm_pair_rows_every_strategy(a100, rows):
    """Each LLM row is an option of the pair, in both lookup orders (OOM rows included, infeasible)."""
    llm_rows = [r for r in rows if r["model1"] in LLMS and r["model2"] != "Empty"]
    assert len(llm_rows) == 360
    for r in llm_rows:
        a = key_of(a100, r["model1"], r["batch_size1"], r["gpu_num1"])
        b = key_of(a100, r["model2"], r["batch_size2"], r["gpu_num2"])
        opt = PairOption(r["pipeline_strategy"], None, float(r["speed1"]), float(r["speed2"]))
        assert opt in a100.pair_options(a, b, "a100"), r["index"]
        assert opt.swapped() in a100.pair_options(b, a, "a100"), r["index"]
        assert opt.feasible == (float(r["speed1"]) > 0), r["index"]


@pytest.mark.parametrize("row", [
    # DCGAN,LSUN,1,32,0.86,0,NA,resnet50,ImageNet,1,32,0.87 -- only this direction is in the file
    ("DCGAN", "32", 1, "resnet50", "32", 0.86, 0.87),
    ("PointNet", "128", 4, "vgg19", "64", None, None),
    ("DCGAN", "64", 2, "vgg19", "128", None, None),
], ids=["dcgan-resnet50-literal", "pointnet-vgg19", "dcgan-vgg19"])
def test_small_pairs_are_symmetric(a100, rows, row):
    ma, ba, n, mb, bb, sa, sb = row
    match = [r for r in rows if (r["model1"], r["batch_size1"], r["gpu_num1"], r["model2"], r["batch_size2"])
             == (ma, ba, str(n), mb, bb)]
    reverse = [r for r in rows if (r["model1"], r["batch_size1"], r["model2"], r["batch_size2"], r["gpu_num1"])
               == (mb, bb, ma, ba, str(n))]
    assert len(match) == 1 and not reverse  # one direction only in the file
    if sa is not None:
        assert (float(match[0]["speed1"]), float(match[0]["speed2"])) == (sa, sb)
    want = PairOption(None, None, float(match[0]["speed1"]), float(match[0]["speed2"]))
    a, b = ProfileKey(ma, ba, n), ProfileKey(mb, bb, n)
    assert a100.pair_options(a, b, "a100") == (want,)
    assert a100.pair_options(b, a, "a100") == (want.swapped(),)


def test_pairs_measured_in_both_orders_are_averaged(a100, rows):
    # resnet50 32 + resnet50 64: (0.5, 0.72) in one row, (0.64, 0.43) in the reverse row
    a, b = ProfileKey("resnet50", "32", 1), ProfileKey("resnet50", "64", 1)
    (opt,) = a100.pair_options(a, b, "a100")
    assert opt.a_speed == pytest.approx((0.5 + 0.43) / 2) and opt.b_speed == pytest.approx((0.72 + 0.64) / 2)
    # identical jobs: one row, made symmetric -> both get the mean of 0.55 and 0.51
    (same,) = a100.pair_options(a, a, "a100")
    assert same.a_speed == same.b_speed == pytest.approx(0.53)


def test_oom_pair_is_infeasible_and_never_best(a100):
    bert, vgg = ProfileKey("Bert-Large", "256/16", 2), ProfileKey("vgg19", "128", 2)
    opts = {o.a_strategy: o for o in a100.pair_options(bert, vgg, "a100")}
    assert opts["6,18"] == PairOption("6,18", None, 0.0, 0.0) and not opts["6,18"].feasible  # CSV row 59
    best = a100.best_pair(Job("b", 2, "Bert-Large"), Job("v", 2, "vgg19", "128"), "a100")
    assert best is not None and best.feasible
    assert best.total == max(o.total for o in opts.values() if o.feasible)


def test_no_llm_llm_pairs(a100):
    bert, gpt = ProfileKey("Bert-Large", "256/16", 2), ProfileKey("GPT2-Medium", "512/8", 2)
    assert a100.pair_options(bert, gpt, "a100") == ()
    assert a100.best_pair(Job("a", 2, "Bert-Large"), Job("b", 2, "GPT2-Medium"), "a100") is None


@pytest.mark.parametrize("model,batch,gpus,want", [
    ("ResNet50", "64", 1, ("resnet50", "64", 1)),
    ("RESNET-50", "064", 2, ("resnet50", "64", 2)),
    ("dcgan", "32", 4, ("DCGAN", "32", 4)),
    ("gpt2_medium", "128", 2, ("GPT2-Medium", "512/8", 2)),  # LLM batch ignored
    ("bert large", "", 4, ("Bert-Large", "256/16", 4)),
], ids=["camel", "hyphen-zero-pad", "lower", "llm-batch-ignored", "llm-no-batch"])
def test_name_normalization(a100, model, batch, gpus, want):
    assert a100.key(model, batch, gpus) == ProfileKey(*want)


# ---- Gavel table ------------------------------------------------------------------------------------

def test_gavel_normalizes_packed_by_solo(gavel, gavel_raw):
    assert gavel.gpu_types == ("k80", "p100", "v100")
    v = gavel_raw["v100"]
    a_txt, b_txt = "('ResNet-50 (batch size 128)', 1)", "('ResNet-18 (batch size 16)', 1)"
    mine, theirs = v[a_txt][b_txt]
    a = gavel.key("ResNet-50", "128", 1)
    b = gavel.key("ResNet-18 (batch size 16)", "", 1)
    (opt,) = gavel.pair_options(a, b, "v100")
    assert opt.a_speed == pytest.approx(mine / v[a_txt]["null"])
    assert opt.b_speed == pytest.approx(theirs / v[b_txt]["null"])
    assert gavel.isolated_speed(a, "v100") == 1.0
    assert gavel.isolated_throughput(a, "v100") == v[a_txt]["null"]
    # [0, 0] entries are kept as infeasible
    (zero,) = gavel.pair_options(a, gavel.key("A3C", "", 1), "v100")
    assert not zero.feasible and v[a_txt]["('A3C', 1)"] == [0.0, 0.0]


def test_gavel_names_and_gaps(gavel, gavel_raw):
    assert gavel.key("ResNet-50 (batch size 64)", "64", 1) == ProfileKey("ResNet-50 (batch size 64)", "64", 1)
    assert gavel.key("resnet-50", "64", 2) == ProfileKey("ResNet-50 (batch size 64)", "64", 2)
    assert gavel.key("A3C", "", 1) == ProfileKey("A3C", "", 1)
    with pytest.raises(InputError, match="contradicts"):
        gavel.key("ResNet-50 (batch size 64)", "32", 1)
    # K80 has no solo number for ResNet-50 batch 128 at scale factor 2: unknown there, known on V100
    assert gavel_raw["k80"]["('ResNet-50 (batch size 128)', 2)"]["null"] == 0.0
    k = ProfileKey("ResNet-50 (batch size 128)", "128", 2)
    assert gavel.isolated_throughput(k, "v100") > 0
    with pytest.raises(InputError, match=r"unknown profile key .* on k80"):
        gavel.isolated_speed(k, "k80")
    # packed pairs exist only at scale factor 1
    r18 = Job("x", 2, "ResNet-18 (batch size 32)")
    assert gavel.best_pair(r18, Job("y", 2, "ResNet-50 (batch size 32)"), "v100") is None


# ---- errors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,message", [
    (lambda p: p.key("foo", "64", 2), "unknown model 'foo' in profile a100; known models: Bert-Large"),
    (lambda p: p.isolated_speed(ProfileKey("foo", "64", 2), "a100"), "unknown model 'foo'"),
    (lambda p: p.isolated_speed(ProfileKey("resnet50", "64", 3), "a100"),
     "unknown profile key ('resnet50', '64', 3) on a100"),
    (lambda p: p.isolated_speed(ProfileKey("resnet50", "64", 1), "v100"), "unknown GPU type 'v100'"),
    (lambda p: p.key("resnet50", "256", 1), "unknown batch size '256' for resnet50"),
    (lambda p: p.isolated_speed(ProfileKey("Bert-Large", "", 2), "a100", "9,15"), "unknown strategy '9,15'"),
    (lambda p: p.pair_options(ProfileKey("vgg19", "32", 8), ProfileKey("vgg19", "32", 8), "a100"),
     "unknown profile key ('vgg19', '32', 8)"),
    (lambda p: p.job_class(Job("j7", 2, "GPT2-Medium", parallelism=("10,14", "5,19"))),
     "job j7: unknown strategy '5,19' for GPT2-Medium on 2 GPUs"),
    (lambda p: p.job_class(Job("j8", 1, "resnet50", "32", parallelism=("DP",))),
     "job j8: resnet50 has no parallelism strategies"),
    (lambda p: p.best_isolated(Job("j9", 1, "resnet50", "32"), "h100"), "unknown GPU type 'h100'"),
], ids=["model", "model-in-key", "gpu-count", "gpu-type", "batch", "strategy", "pair-key",
        "job-strategy", "job-strategy-on-cnn", "job-gpu-type"])
def test_lookup_errors(a100, call, message):
    with pytest.raises(InputError) as e:
        call(a100)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


HEADER = ("index,model1,dataset1,gpu_num1,batch_size1,speed1,co_pipeline_rank,pipeline_strategy,"
          "model2,dataset2,gpu_num2,batch_size2,speed2")
GOOD = "0,resnet50,ImageNet,1,32,0.55,0,NA,vgg19,ImageNet,1,32,0.5"


@pytest.mark.parametrize("text,message", [
    ("", "bad.csv: empty file"),
    ("index,model1\n0,resnet50\n", "bad.csv:1: header lacks dataset1"),
    (f"{HEADER}\n{GOOD}\n0,resnet50,ImageNet,1,32\n", "bad.csv:3: expected 13 columns, got 5"),
    (f"{HEADER}\n{GOOD}\n1,resnet50,ImageNet,1,32,fast,0,NA,vgg19,ImageNet,1,32,0.5\n",
     "bad.csv:3: speed1 must be a number, got 'fast'"),
    (f"{HEADER}\n1,resnet50,ImageNet,1,32,-0.5,0,NA,vgg19,ImageNet,1,32,0.5\n", "bad.csv:2: speed1 must be a finite"),
    (f"{HEADER}\n1,resnet50,ImageNet,two,32,0.5,0,NA,vgg19,ImageNet,1,32,0.5\n",
     "bad.csv:2: gpu_num1 must be a positive integer, got 'two'"),
    (f"{HEADER}\n1,resnet50,ImageNet,1,32,0.5,0,NA,vgg19,ImageNet,2,32,0.5\n", "bad.csv:2: gpu_num1 1 != gpu_num2 2"),
    (f'{HEADER}\n1,GPT2-Medium,W,2,512/8,0.5,"0,1","10,14",vgg19,ImageNet,2,32,0.5\n',
     "bad.csv: profile bad: pair side a ('GPT2-Medium', '512/8', 2) strategy '10,14' on a100 has no isolated"),
], ids=["empty", "header", "short-row", "bad-speed", "negative", "bad-gpus", "gpu-mismatch", "no-isolated-llm"])
def test_malformed_csv(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_a100_csv(path)
    assert message in str(e.value).replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize("text,message", [
    ('{"v100": {', "bad.json:1: invalid JSON"),
    ('{"v100": {}}', "bad.json: no worker type k80"),
    ('{"k80": {}, "p100": {}, "v100": {"ResNet": {"null": 1}}}', "bad job key 'ResNet'"),
    ('{"k80": {}, "p100": {}, "v100": {"(\'A3C\', 1)": {"null": "fast"}}}', "expected a finite number"),
    ('{"k80": {}, "p100": {}, "v100": {"(\'A3C\', 1)": {"null": 2, "(\'A3C\', 1)": [1]}}}', "expected [self, other]"),
], ids=["syntax", "worker", "job-key", "solo", "pair-shape"])
def test_malformed_gavel(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_gavel_json(path)
    assert message in str(e.value).replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize("obj,message", [
    ({"pairs": [{"a": {"model": "x", "num_gpus": 1}, "b": {"model": "y"}, "a_speed": 0.5}]},
     "profile.pairs[0]: missing 'b_speed'"),
    ({"isolated": [{"model": "x", "num_gpus": 1, "sped": 1}]}, "profile.isolated[0]: unknown keys ['sped']"),
    ({"isolated": [{"model": "x", "num_gpus": 0}]}, "profile.isolated[0].num_gpus: expected a positive integer"),
    ({"pairs": [{"a": {"model": "x", "num_gpus": 1}, "b": {"model": "y"}, "a_speed": -1, "b_speed": 1}]},
     "profile.pairs[0].a_speed: expected a finite number"),
    ({"pairs": [{"a": {"model": "L", "num_gpus": 2}, "b": {"model": "y"}, "a_speed": 1, "b_speed": 1,
                 "a_strategy": "TP"}]}, "strategy 'TP' on a100 has no isolated entry"),
    ({}, "needs \"isolated\" or \"pairs\""),
    ({"isolated": [], "pairs": [], "colour": 1}, "unknown keys ['colour']"),
], ids=["missing", "unknown-key", "gpus", "speed", "strategy-without-isolated", "empty", "top-key"])
def test_malformed_inline(obj, message):
    with pytest.raises(InputError) as e:
        profile_from_json(obj)
    assert message in str(e.value)


def test_unknown_profile_name():
    with pytest.raises(InputError, match="unknown profile 'h100': not a shipped name"):
        load_profile("h100")


# ---- writers round-trip -------------------------------------------------------------------------------

def test_a100_csv_round_trip(a100, tmp_path):
    text = profile_csv_text(a100)
    lines = text.splitlines()
    assert lines[0].split(",") == HEADER.split(",")  # the table's own 13 columns
    assert len(lines) == 1 + 30 + 594
    assert parse_profile_csv(text, "x.csv") == a100
    path = tmp_path / "mine.csv"
    write_profile_csv(a100, path)
    again = load_profile(str(path))
    assert again == a100
    k = ProfileKey("Bert-Large", "256/16", 2)
    assert again.pair_options(k, ProfileKey("resnet50", "64", 2), "a100") == \
        a100.pair_options(k, ProfileKey("resnet50", "64", 2), "a100")
    assert "256/32" in text  # TP24's written micro-batch survives


def test_gavel_round_trips_through_csv_and_json(gavel, tmp_path):
    text = profile_csv_text(gavel)
    assert text.splitlines()[0].endswith(",gpu_type,throughput1")
    assert parse_profile_csv(text, "g.csv") == gavel
    path = tmp_path / "g.json"
    path.write_text(json.dumps(profile_to_json(gavel)))
    assert load_profile(str(path)) == gavel


def test_inline_round_trip_and_spec(a100):
    assert profile_from_json(json.loads(json.dumps(profile_to_json(a100)))) == a100
    assert profile_from_spec(None) is load_profile("a100") is load_profile("A100")
    doc = {"gpu_type": "a100",
           "isolated": [{"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2, "strategy": "10,14",
                         "speed": 0.78},
                        {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2, "strategy": "DP24"}],
           "pairs": [{"a": {"model": "GPT2-Medium", "batch_size": "512/8", "num_gpus": 2},
                      "b": {"model": "resnet50", "batch_size": "64", "num_gpus": 2},
                      "a_strategy": "10,14", "a_speed": 0.54, "b_speed": 0.65}]}
    p = profile_from_spec(doc)
    gpt, rn = ProfileKey("GPT2-Medium", "512/8", 2), ProfileKey("resnet50", "64", 2)
    assert p.isolated_speed(rn, "a100") == 1.0  # implicit: only in pairs
    assert p.isolated_speed(gpt, "a100") == 1.0 and p.isolated_speed(gpt, "a100", "10,14") == 0.78
    assert p.pair_options(rn, gpt, "a100") == (PairOption(None, "10,14", 0.65, 0.54),)


def test_pair_orientation_does_not_matter():
    """(small, LLM) rows and (LLM, small) rows give equal profiles, also after a trip through CSV."""
    iso = [{"model": "L", "batch_size": "8/1", "num_gpus": 2, "strategy": "A", "speed": 0.9},
           {"model": "L", "batch_size": "8/1", "num_gpus": 2, "strategy": "B"}]
    small, llm = {"model": "s", "batch_size": "32", "num_gpus": 2}, {"model": "L", "batch_size": "8/1", "num_gpus": 2}
    one = profile_from_json({"isolated": iso, "pairs": [
        {"a": small, "b": llm, "b_strategy": "A", "a_speed": 0.7, "b_speed": 0.4}]})
    other = profile_from_json({"isolated": iso, "pairs": [
        {"a": llm, "b": small, "a_strategy": "A", "a_speed": 0.4, "b_speed": 0.7}]})
    assert one == other
    assert parse_profile_csv(profile_csv_text(one), "x.csv") == one


def test_two_strategy_pair_cannot_be_csv():
    p = profile_from_json({
        "isolated": [{"model": "L", "batch_size": "8/1", "num_gpus": 2, "strategy": s} for s in ("A", "B")],
        "pairs": [{"a": {"model": "L", "batch_size": "8/1", "num_gpus": 2}, "b": {"model": "L", "batch_size": "8/1"},
                   "a_strategy": "A", "b_strategy": "B", "a_speed": 0.5, "b_speed": 0.6}]})
    with pytest.raises(InputError, match="two strategies"):
        profile_csv_text(p)


# ---- job-level lookups: classes, fallbacks, matrices, noise -------------------------------------------

def test_fallback_for_unmeasured_gpu_counts(a100):
    assert a100.best_isolated(Job("l8", 8, "GPT2-Medium", "64"), "a100") == (1.0, None)
    assert a100.best_isolated(Job("l8", 8, "GPT2-Medium", "64", parallelism=("TP24",)), "a100") == (1.0, "TP24")
    assert a100.best_isolated(Job("r3", 3, "resnet50", "64"), "a100") == (1.0, None)
    assert a100.best_pair(Job("r3", 3, "resnet50", "64"), Job("v3", 3, "vgg19", "64"), "a100") is None
    with pytest.raises(InputError, match="unknown model"):
        a100.best_isolated(Job("x", 8, "llama", "64"), "a100")


def test_best_isolated_many_is_best_isolated_job_by_job():
    jobs = [Job("a", 2, "GPT2-Medium", "512/8", parallelism=("10,14", "TP24")), Job("b", 1, "resnet50", "32"),
            Job("c", 2, "GPT2-Medium", "512/8", parallelism=("10,14", "TP24")), Job("d", 8, "GPT2-Medium", "64"),
            Job("e", 1, "resnet50", "32")]
    fresh = load_profile("a100")
    want = [fresh.best_isolated(j, "a100") for j in jobs]
    assert fresh.best_isolated_many(jobs[1:2], ["a100"]) == want[1:2]  # spelled as the table spells it
    assert fresh.best_isolated_many(jobs, ["a100"] * 5) == want  # an unmeasured GPU count among them
    assert want[0] == (0.78, "10,14") and want[1] == (1.0, None)
    gavel = replace(load_profile("gavel"))
    mixed = [Job("r", 1, "ResNet-50", "64"), Job("s", 1, "ResNet-50", "64")]
    assert gavel.best_isolated_many(mixed, ["v100", "k80"]) == [gavel.best_isolated(mixed[0], "v100"),
                                                                 gavel.best_isolated(mixed[1], "k80")]


def test_strategy_restriction(a100, rows):
    gpt = Job("g", 2, "GPT2-Medium", "512/8", parallelism=("10, 14", "tp24"))
    assert a100.job_class(gpt).candidates == ("10,14", "TP24")
    assert a100.best_isolated(gpt, "a100") == (0.78, "10,14")
    best = a100.best_pair(gpt, Job("r", 2, "resnet50", "32"), "a100")
    want = max((float(r["speed1"]) + float(r["speed2"]), r["pipeline_strategy"]) for r in rows
               if (r["model1"], r["gpu_num1"], r["model2"], r["batch_size2"]) == ("GPT2-Medium", "2", "resnet50", "32")
               and r["pipeline_strategy"] in ("10,14", "TP24") and float(r["speed1"]) > 0)
    assert best.a_strategy == want[1] and best.total == pytest.approx(want[0])
    # every strategy listed = no restriction (same class as an unrestricted job)
    everything = Job("h", 2, "GPT2-Medium", parallelism=a100.strategies("GPT2-Medium", 2))
    assert a100.job_class(everything) == a100.job_class(Job("i", 2, "GPT2-Medium"))


def test_pair_matrix_agrees_with_best_pair(a100):
    jobs = [Job("a", 2, "GPT2-Medium"), Job("b", 2, "resnet50", "64"), Job("c", 2, "vgg19", "128"),
            Job("d", 2, "Bert-Large", parallelism=("6,18",)), Job("e", 1, "DCGAN", "32"), Job("f", 8, "Bert-Large")]
    classes = [a100.job_class(j) for j in jobs]
    m = a100.pair_matrix(classes, "a100")
    for i, a in enumerate(jobs):
        alone, strategy = a100.best_isolated(a, "a100")
        assert m.isolated[i] == alone and m.isolated_strategy[i] == strategy
        for j, b in enumerate(jobs):
            best = a100.best_pair(a, b, "a100")
            if best is None:
                assert math.isnan(m.total[i, j]) and m.option[i, j] == -1, (a.id, b.id)
            else:
                assert m.total[i, j] == best.total and m.options[m.option[i, j]] == best, (a.id, b.id)
    assert np.allclose(np.nan_to_num(m.total), np.nan_to_num(m.total).T)
    assert math.isnan(m.total[0, 3]) and math.isnan(m.total[1, 4])  # LLM-LLM; different GPU counts


def test_noise(a100):
    assert a100.with_noise(0.0, np.random.default_rng(1)) == a100
    noisy = a100.with_noise(0.5, np.random.default_rng(1))
    assert noisy == a100.with_noise(0.5, np.random.default_rng(1))  # seeded: reproducible
    assert noisy != a100
    for before, after in zip(a100.pairs, noisy.pairs):
        for x, y in ((before.option.a_speed, after.option.a_speed), (before.option.b_speed, after.option.b_speed)):
            assert 0.5 * x <= y <= 1.5 * x
    a, b = ProfileKey("DCGAN", "32", 1), ProfileKey("resnet50", "32", 1)
    assert noisy.pair_options(b, a, "a100") == tuple(o.swapped() for o in noisy.pair_options(a, b, "a100"))
    assert noisy.isolated_speed(ProfileKey("resnet50", "32", 1), "a100") == 1.0
    with pytest.raises(InputError):
        a100.with_noise(1.5, np.random.default_rng(0))


@pytest.mark.parametrize("name", ["a100", "gavel"])
def test_the_class_tables_unmeasured_test_agrees_with_resolving(name):
    """``ClassTable.unmeasured`` (one dict read) says what resolving the job's class would: its key
    was measured on no GPU type; for every spelling the table knows and GPU counts 1 to 16."""
    profile = load_profile(name)
    table = profile.classes
    for model, batch in table.counts:
        for n in range(1, 17):
            job = Job("j", n, model, batch)
            assert table.unmeasured(job) == (not profile.measured(profile.job_class(job).key)), (model, batch, n)
            if table.unmeasured(job):
                assert profile.best_isolated(job, profile.gpu_types[0]) == (1.0, None)
    assert not table.unmeasured(Job("p", 16, "GPT2-Medium", parallelism=("TP24",)))  # listed: resolve it
