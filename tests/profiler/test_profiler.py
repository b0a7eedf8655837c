"""`tesserae profile` on CPU with tiny models: a real table, packed <= alone, a forced OOM, resume.

One profile (resnet50 batch 8 and a 2-layer GPT, tiny) is measured once per module through the CLI;
the memory cap sits between the two pairs' peak sums, so the resnet50 self-pair must be recorded
infeasible and the resnet50 + GPT pair measured.
"""

from __future__ import annotations

import json

import pytest
import torch

from tesserae_slurm.cli.main import main
from tesserae_slurm.model import InputError
from tesserae_slurm.profiles import ProfileKey, load_profile
from tesserae_slurm.profiler.measure import Protocol, accounted_peak_bytes
from tesserae_slurm.profiler.runner import ProfilerConfig, pair_sharing, run_profile
from tesserae_slurm.profiler.runs import CPU, MPS, TIMESLICE, run_id
from tesserae_slurm.profiler.worker import WorkerPool
from tesserae_slurm.profiler.zoo import JobSpec, build_step

RESNET, GPT = JobSpec("resnet50", "8"), JobSpec("gpt", "2/2", gpt_layers=2)
PROTOCOL = ["--warmup", "1", "--windows", "3", "--window-seconds", "0.1"]
# A packed job can be no faster than alone. The tolerance covers timing noise of 0.1 s windows on a
# shared CI machine; on one core two packed jobs measure about 0.3-0.6 each, far below it.
TOLERANCE = 0.25


def peak(spec: JobSpec) -> int:
    step, modules, opts = build_step(spec, torch.device("cpu"))
    step()
    return accounted_peak_bytes(step, modules, opts)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile") / "cpu.csv"
    pr, pg = peak(RESNET), peak(GPT)
    assert pr > pg  # the cap below relies on it
    cap_mib = (pr + pg + 2 * pr) / 2 / 2 ** 20  # resnet50+GPT fits, resnet50+resnet50 does not
    argv = ["profile", "--models", "resnet50,gpt", "--batches", "8", "--gpt-batches", "2/2", "--gpt-layers", "2",
            "--out", str(out), "--memory-cap-mib", f"{cap_mib:.6f}", "--gpu-counts", "2", *PROTOCOL]
    assert main(argv) == 0
    return out, argv


def test_profile_table_is_the_project_format(run):
    out, _ = run
    p = load_profile(out)
    assert p.gpu_types == ("cpu",)
    r, g = ProfileKey("resnet50", "8", 1), ProfileKey("GPT-2L", "2/2", 1)
    assert p.strategies("GPT-2L", 1) == ("DP2",)
    assert p.isolated_speed(r, "cpu") == 1.0 and p.isolated_speed(g, "cpu", "DP2") == 1.0
    assert p.isolated_throughput(r, "cpu") > 0 and p.isolated_throughput(g, "cpu") > 0
    header = out.read_text().splitlines()[0]
    assert header.endswith("gpu_type,throughput1")
    # the LLM is written first, with its strategy
    assert any(line.split(",")[1] == "GPT-2L" and "DP2" in line and "resnet50" in line
               for line in out.read_text().splitlines()[1:])


def test_packed_is_not_faster_than_alone(run):
    p = load_profile(run[0])
    opts = p.pair_options(ProfileKey("GPT-2L", "2/2", 1), ProfileKey("resnet50", "8", 1), "cpu")
    assert len(opts) == 1 and opts[0].feasible
    for speed in (opts[0].a_speed, opts[0].b_speed):
        assert 0.0 < speed <= 1.0 + TOLERANCE


def test_pair_over_the_memory_cap_is_infeasible(run):
    out, _ = run
    p = load_profile(out)
    r = ProfileKey("resnet50", "8", 1)
    (opt,) = p.pair_options(r, r, "cpu")
    assert (opt.a_speed, opt.b_speed) == (0.0, 0.0) and not opt.feasible
    records = [json.loads(x) for x in out.with_name("cpu.csv.runs.jsonl").read_text().splitlines()[1:]]
    by_id = {x["run_id"]: x for x in records}
    assert set(by_id) == {"alone resnet50/8", "alone GPT-2L/2/2", "pair resnet50/8 + resnet50/8",
                          "pair resnet50/8 + GPT-2L/2/2"}  # two LLMs are never paired
    oom = by_id["pair resnet50/8 + resnet50/8"]
    assert oom["status"] == "oom" and "> cap" in oom["message"]
    ok = by_id["pair resnet50/8 + GPT-2L/2/2"]
    assert ok["status"] == "ok" and len(ok["windows"][0]) == 3 and len(ok["alone"]) == 2


def test_linear_model_extends_the_table_to_two_gpus(run):
    out, _ = run
    p = load_profile(out)
    r1, r2 = ProfileKey("resnet50", "8", 1), ProfileKey("resnet50", "8", 2)
    g1, g2 = ProfileKey("GPT-2L", "2/2", 1), ProfileKey("GPT-2L", "2/2", 2)
    assert p.pair_options(g2, r2, "cpu") == p.pair_options(g1, r1, "cpu")
    assert not p.pair_options(r2, r2, "cpu")[0].feasible
    prov = json.loads(out.with_name("cpu.csv.provenance.json").read_text())
    assert {x["source"] for x in prov} == {"estimated:linear"}
    assert {x["a"]["num_gpus"] for x in prov} == {2}


def test_resume_measures_nothing_twice(run, tmp_path):
    out, argv = run
    results = out.with_name("cpu.csv.runs.jsonl")
    cap = float(argv[argv.index("--memory-cap-mib") + 1])
    config = ProfilerConfig((RESNET, GPT), protocol=Protocol(1, 3, 0.1), memory_cap_mib=cap)

    def no_workers(*_args, **_kw):
        raise AssertionError("a finished profile must not start workers")

    build, measured = run_profile(config, results, resume=True, pool_factory=no_workers)
    assert measured == 0 and len(build.profile.pairs) == 2
    # a profile cut short: the last record lost, half a line written -> only that run is redone
    partial = tmp_path / "partial.jsonl"
    lines = results.read_text().splitlines()
    partial.write_text("\n".join(lines[:-1]) + '\n{"run_id": "pair res')
    started = []

    def counting(*args, **kw):
        pool = WorkerPool(*args, **kw)
        started.append(pool)
        return pool

    build, measured = run_profile(config, partial, resume=True, pool_factory=counting)
    assert measured == 1 and started[0].started == 2
    assert len(build.profile.pairs) == 2
    kept = []
    for line in partial.read_text().splitlines()[1:]:
        try:
            kept.append(json.loads(line)["run_id"])
        except json.JSONDecodeError:
            assert line == '{"run_id": "pair res'  # the torn line stays, on its own line
    assert sorted(kept) == sorted(json.loads(x)["run_id"] for x in lines[1:])


def test_results_file_is_never_overwritten_or_mixed(run):
    out, _ = run
    results = out.with_name("cpu.csv.runs.jsonl")
    config = ProfilerConfig((RESNET, GPT), protocol=Protocol(1, 3, 0.1))
    with pytest.raises(InputError, match="pass --resume"):
        run_profile(config, results, resume=False)
    with pytest.raises(InputError, match="different settings"):
        run_profile(config, results, resume=True)  # no memory cap this time


@pytest.mark.parametrize("argv, message", [
    (["--models", "alexnet"], "unknown zoo model 'alexnet'"),
    (["--models", "gpt", "--gpt-batches", "3/2"], "multiple of micro"),
    (["--batches", "x"], "positive integer"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--device", "cuda"], "no CUDA device"),
    (["--windows", "0"], "windows >= 1"),
])
def test_bad_profile_arguments_are_one_line_errors(argv, message, tmp_path, capsys):
    assert main(["profile", "--out", str(tmp_path / "x.csv"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("tesserae profile: error:")
    assert not (tmp_path / "x.csv").exists()


def test_each_pair_records_how_it_shared_the_device(run):
    """On CPU the pairs time-share cores (``cpu``); the table writes them as its ordinary pairs."""
    out, _ = run
    records = [json.loads(x) for x in out.with_name("cpu.csv.runs.jsonl").read_text().splitlines()[1:]]
    assert {r["run_id"]: r["sharing"] for r in records if r["run_id"].startswith("pair")} == {
        "pair resnet50/8 + resnet50/8": "cpu", "pair resnet50/8 + GPT-2L/2/2": "cpu"}
    assert all(r["sharing"] == "" for r in records if r["run_id"].startswith("alone"))
    assert {p.sharing for p in load_profile(str(out)).pairs} == {"mps"}


def test_time_sliced_pairs_join_the_table_beside_the_mps_ones(run, tmp_path):
    """A results file holding a pair measured time-sliced (``--mps off --resume`` on a GPU) gives the
    table both records of it; resuming measures nothing."""
    out, argv = run
    results = tmp_path / "both.jsonl"
    lines = out.with_name("cpu.csv.runs.jsonl").read_text().splitlines()
    pair = next(json.loads(x) for x in lines[1:] if json.loads(x)["run_id"] == "pair resnet50/8 + GPT-2L/2/2")
    sliced = {**pair, "run_id": run_id(tuple(JobSpec(**j) for j in pair["jobs"]), TIMESLICE), "sharing": TIMESLICE,
              "throughput": [t / 2 for t in pair["throughput"]]}
    results.write_text("\n".join([*lines, json.dumps(sliced)]) + "\n")
    cap = float(argv[argv.index("--memory-cap-mib") + 1])
    config = ProfilerConfig((RESNET, GPT), protocol=Protocol(1, 3, 0.1), memory_cap_mib=cap)

    def no_workers(*_args, **_kw):
        raise AssertionError("nothing left to measure")

    build, measured = run_profile(config, results, resume=True, pool_factory=no_workers)
    assert measured == 0
    by = {(p.sharing, p.a.model, p.b.model): p.option for p in build.profile.pairs}
    mps, ts = by[("mps", "GPT-2L", "resnet50")], by[("timeslice", "GPT-2L", "resnet50")]
    assert ts.a_speed == pytest.approx(mps.a_speed / 2, abs=1e-3)
    assert ts.b_speed == pytest.approx(mps.b_speed / 2, abs=1e-3)


@pytest.mark.parametrize("device, mps, available, want", [
    ("cpu", "auto", (True, ""), CPU), ("cuda", "off", (True, ""), TIMESLICE), ("cuda", "auto", (True, ""), MPS),
    ("cuda", "auto", (False, "no binary"), TIMESLICE), ("cuda", "on", (True, ""), MPS),
])
def test_pair_sharing_follows_the_device_and_the_mps_option(device, mps, available, want):
    config = ProfilerConfig((RESNET,), device=device, mps=mps)
    assert pair_sharing(config, lambda: available) == want


def test_mps_on_without_mps_is_a_one_line_error():
    with pytest.raises(InputError, match="--mps on: nvidia-cuda-mps-control not found"):
        pair_sharing(ProfilerConfig((RESNET,), device="cuda", mps="on"),
                     lambda: (False, "nvidia-cuda-mps-control not found"))
