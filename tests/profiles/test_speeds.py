"""Speeds relative to the reference GPU type, checked against the shipped tables read directly."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tesserae_slurm.model import Cluster, InputError, Job
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.restart import RestartCost
from tesserae_slurm.profiles.speeds import SpeedModel

RAW = json.loads(resources.files("tesserae_slurm.data").joinpath("gavel_simulation_throughputs.json").read_text())


def raw(worker: str, job_type: str, sf: int) -> float:
    return RAW[worker][f"('{job_type}', {sf})"]["null"]


def test_reference_type_defaults():
    assert SpeedModel(load_profile("a100"), Cluster.from_spec("1x4:a100")).reference == "a100"
    assert SpeedModel(load_profile("gavel"), Cluster.from_spec("1x4:k80")).reference == "v100"


@pytest.mark.parametrize("gpu", ["k80", "p100", "v100"])
def test_gavel_speed_is_the_throughput_ratio_to_v100(gpu):
    m = SpeedModel(load_profile("gavel"), Cluster.from_spec(f"1x4:{gpu}"))
    t = "ResNet-50 (batch size 64)"
    job = Job("a", 1, t, "64")
    assert m.solo(job, gpu, None) == pytest.approx(raw(gpu, t, 1) / raw("v100", t, 1))
    assert m.lookup().isolated(job, gpu) == pytest.approx(raw(gpu, t, 1) / raw("v100", t, 1))


def test_unmeasured_type_takes_the_median_ratio_of_jobs_with_its_gpu_count():
    m = SpeedModel(load_profile("gavel"), Cluster.from_spec("1x4:k80"))
    assert raw("k80", "ResNet-50 (batch size 128)", 2) == 0  # Gavel never ran it on K80
    ratios = sorted(raw("k80", k[2:k.rindex("'")], 2) / raw("v100", k[2:k.rindex("'")], 2)
                    for k in RAW["k80"] if k.endswith(", 2)") and RAW["k80"][k]["null"] > 0
                    and RAW["v100"][k]["null"] > 0)
    half = len(ratios) // 2
    median = ratios[half] if len(ratios) % 2 else (ratios[half - 1] + ratios[half]) / 2
    assert m.solo(Job("b", 2, "ResNet-50 (batch size 128)", "128"), "k80", None) == pytest.approx(median)


def test_llm_strategy_and_packed_speeds_on_a100():
    p = load_profile("a100")
    m = SpeedModel(p, Cluster.from_spec("1x4"))
    llm, small = Job("x", 2, "GPT2-Medium", "512/8"), Job("y", 2, "resnet50", "64")
    k = p.key("GPT2-Medium", "", 2)
    assert m.solo(llm, "a100", None) == 1.0
    assert m.solo(llm, "a100", "8,16") == p.isolated_speed(k, "a100", "8,16") < 1.0
    opt = next(o for o in p.pair_options(k, p.key("resnet50", "64", 2), "a100") if o.a_strategy == "8,16")
    assert m.packed(llm, small, "a100", "8,16", None) == (opt.a_speed, opt.b_speed)
    assert m.packed(llm, small, "a100", "no-such", None) == (0.0, 0.0)  # never measured: cannot run
    assert m.lookup().packed(llm, small, "a100") == (p.best_pair(llm, small, "a100").a_speed,
                                                     p.best_pair(llm, small, "a100").b_speed)
    assert m.lookup().packed(llm, Job("z", 2, "resnet50", "64", no_pack=True), "a100") is None


def test_unmeasured_gpu_count_falls_back_to_alone_at_reference_speed():
    m = SpeedModel(load_profile("a100"), Cluster.from_spec("2x4"))
    assert m.solo(Job("x", 8, "Bert-Large", "256/16"), "a100", None) == 1.0


def test_cluster_type_missing_from_profile_is_an_input_error():
    with pytest.raises(InputError, match="GPU type 'v100' is not in profile a100"):
        SpeedModel(load_profile("a100"), Cluster.from_spec("1x4:v100"))


def test_unknown_model_is_an_input_error():
    m = SpeedModel(load_profile("a100"), Cluster.from_spec("1x4"))
    with pytest.raises(InputError, match="unknown model"):
        m.check_job(Job("a", 1, "AlexNet", "64"))


def test_restart_costs():
    r = RestartCost()
    assert r.of("resnet50") == 30 and r.of("GPT2-Medium") == 90 and r.of("LM (batch size 20)") == 90
    assert RestartCost.uniform(5).of("GPT2-Medium") == 5
    assert RestartCost.uniform(5).with_overrides({"vgg19": 12}).of("vgg19") == 12
    with pytest.raises(InputError):
        RestartCost(-1)
