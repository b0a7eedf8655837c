"""The model zoo: full sizes match the published architectures, tiny ones train; memory accounting."""

from __future__ import annotations

import pytest
import torch

from tesserae_slurm.model import InputError
from tesserae_slurm.profiler.measure import Protocol, accounted_peak_bytes, measure_windows, median_rate
from tesserae_slurm.profiler.runs import plan_runs
from tesserae_slurm.profiler.runner import default_gpu_label, jobs_from_args
from tesserae_slurm.profiler.zoo import JobSpec, build_step


@pytest.mark.parametrize("spec, params", [
    (JobSpec("resnet50", "32", "full"), 25_557_032),  # torchvision resnet50
    (JobSpec("vgg19", "32", "full"), 143_667_240),  # torchvision vgg19
    (JobSpec("dcgan", "32", "full"), 3_576_704 + 2_765_568),  # PyTorch DCGAN example: G + D
    (JobSpec("gpt", "8/8", "full", gpt_layers=24), 354_823_168),  # GPT-2 Medium (tied embeddings)
], ids=["resnet50", "vgg19", "dcgan", "gpt2-medium"])
def test_full_models_have_the_published_parameter_counts(spec, params):
    _, modules, _ = build_step(spec, torch.device("meta"))  # no memory, no compute
    assert sum(p.numel() for p in modules.parameters()) == params


@pytest.mark.parametrize("model, batch", [("resnet50", "2"), ("vgg19", "2"), ("dcgan", "2"), ("pointnet", "2"),
                                          ("gpt", "4/2")])
def test_tiny_models_train(model, batch):
    spec = JobSpec(model, batch, "tiny", gpt_layers=2)
    step, modules, _ = build_step(spec, torch.device("cpu"))
    before = [p.detach().clone() for p in modules.parameters()]
    step()
    step()
    changed = sum(not torch.equal(a, b.detach()) for a, b in zip(before, modules.parameters()))
    assert changed > len(before) // 2  # the optimizer moved most tensors


def test_accounted_peak_counts_weights_grads_state_and_activations():
    lin = torch.nn.Linear(10, 20)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 10)

    def step():
        opt.zero_grad()
        lin(x).pow(2).sum().backward()
        opt.step()

    step()
    weights = (10 * 20 + 20) * 4
    # weights + grads + momentum, plus what autograd saved: x (4x10) for the weight gradient and
    # the linear output (4x20) for pow's backward
    assert accounted_peak_bytes(step, lin, opt) == 3 * weights + (4 * 10 + 4 * 20) * 4


def test_windows_and_median_with_a_fake_clock():
    t = [0.0]

    def clock():
        return t[0]

    def step():
        t[0] += 0.3

    rates = measure_windows(step, Protocol(0, 3, 1.0), lambda: None, clock)
    # each window: steps until >= 1.0 s elapsed -> 4 steps in 1.2 s
    assert rates == pytest.approx([4 / 1.2] * 3)
    assert median_rate([3.0, 1.0, 2.0]) == 2.0


def test_plan_pairs_everything_once_but_two_llms():
    jobs = jobs_from_args(["resnet50", "gpt"], ["32", "64"], "tiny", 2, ["8/4", "8/8"])
    runs = plan_runs(jobs)
    alone = [r for r in runs if len(r.jobs) == 1]
    pairs = [r for r in runs if len(r.jobs) == 2]
    assert len(alone) == 4 and runs[:4] == alone
    assert len(pairs) == 4 * 5 // 2 - 3  # unordered pairs with self, minus GPT+GPT (3 of them)
    assert len({r.run_id for r in runs}) == len(runs)


def test_gpu_label_and_spec_checks():
    assert default_gpu_label("NVIDIA A100-SXM4-40GB") == "a100"
    assert default_gpu_label("NVIDIA H100 80GB HBM3") == "h100"
    assert default_gpu_label("Some Accelerator") == "gpu"
    assert JobSpec("gpt", "512/8", gpt_layers=24).profile_batch == "512/8"
    assert JobSpec("gpt", "16", gpt_layers=24).profile_batch == "16/16"
    assert JobSpec("resnet50", "32", gpt_layers=9) == JobSpec("resnet50", "32")
    with pytest.raises(InputError, match="unknown model size"):
        jobs_from_args(["resnet50"], ["32"], "huge", 2, [])
