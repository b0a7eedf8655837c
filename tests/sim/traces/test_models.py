"""Model-name mapping between the A100 profile and Gavel's job types, and the CSV writer round trip."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import InputError
from tesserae_slurm.sim.traces import (
    A100_MODELS, GAVEL_JOB_TYPES, Trace, TraceJob, dumps_csv, load_csv, load_shipped, map_model, parse_csv,
    resolve_model, shipped_path, write_csv,
)
from tesserae_slurm.sim.traces.models import (
    A100_BATCHES, GAVEL_FAMILIES, LLM_BATCH, LLM_MODELS, SMALL_MODELS, gavel_table_key, namespace_of,
    split_gavel_type,
)

SHARED = Path("/work/shared/data/traces")


def gavel_table() -> dict:
    return json.loads(resources.files("tesserae_slurm.data").joinpath("gavel_simulation_throughputs.json").read_text())


def test_gavel_job_types_are_exactly_gavels_table():
    v100 = gavel_table()["v100"]
    at = {sf: {k[2:].rsplit("', ", 1)[0] for k in v100 if k.endswith(f", {sf})")} for sf in (1, 2, 4, 8)}
    assert set(GAVEL_JOB_TYPES) == at[1] and len(GAVEL_JOB_TYPES) == 26
    distributed = {t for t in GAVEL_JOB_TYPES if split_gavel_type(t)[0].distributed}
    assert distributed == at[2] == at[4] == at[8] and len(distributed) == 19


def _job_types_in_shared_traces() -> set[str]:
    types = {ln.split("\t")[0] for ln in shipped_path("shockwave-120").read_text().splitlines() if ln}
    if SHARED.is_dir():
        for p in list((SHARED / "shockwave").glob("*.trace")) + list((SHARED / "philly_gavel_seed0").glob("*.trace")):
            types |= {ln.split("\t")[0] for ln in p.read_text().splitlines() if ln}
    return types


@pytest.mark.parametrize("num_gpus", [1, 2, 4, 8, 16, 64], ids=lambda g: f"{g}gpu")
def test_every_trace_job_type_maps_onto_the_a100_table(num_gpus):
    for job_type in sorted(_job_types_in_shared_traces()):
        _, batch = split_gavel_type(job_type)
        model, a_batch = map_model(job_type, "" if batch is None else str(batch), num_gpus, "a100")
        assert model in A100_MODELS
        if model in LLM_MODELS:
            assert num_gpus >= 2, "the A100 table has no 1-GPU LLM rows"
            assert a_batch == LLM_BATCH[model]
        else:
            assert int(a_batch) in A100_BATCHES


@pytest.mark.parametrize("model,batch,gpus,expected", [
    ("ResNet-50 (batch size 16)", "16", 1, ("resnet50", "32")),  # nearest A100 batch
    ("ResNet-50 (batch size 64)", "64", 4, ("resnet50", "64")),  # same model, same batch
    ("ResNet-18 (batch size 256)", "256", 2, ("resnet50", "128")),
    ("Transformer (batch size 256)", "256", 1, ("vgg19", "128")),  # no 1-GPU LLM rows
    ("Transformer (batch size 16)", "16", 4, ("Bert-Large", "256/16")),
    ("LM (batch size 5)", "5", 8, ("GPT2-Medium", "512/8")),
    ("LM (batch size 20)", "20", 1, ("vgg19", "64")),  # rank: 5,10 -> 32; 20 -> 64; 40,80 -> 128
    ("LM (batch size 40)", "40", 1, ("vgg19", "128")),
    ("Recommendation (batch size 1024)", "1024", 1, ("PointNet", "32")),
    ("Recommendation (batch size 2048)", "2048", 1, ("PointNet", "64")),
    ("Recommendation (batch size 8192)", "8192", 2, ("PointNet", "128")),
    ("A3C", "", 1, ("PointNet", "32")),
    ("CycleGAN", "", 1, ("DCGAN", "32")),
    ("vgg19", "64", 2, ("vgg19", "64")),  # already A100: identity
], ids=["resnet50-16", "resnet50-64", "resnet18-256", "transformer-1gpu", "transformer-4gpu", "lm-8gpu", "lm-20",
        "lm-40", "rec-1024", "rec-2048", "rec-8192", "a3c", "cyclegan", "identity"])
def test_to_a100_worked_examples(model, batch, gpus, expected):
    assert map_model(model, batch, gpus, "a100") == expected


@pytest.mark.parametrize("model,batch,gpus,expected", [
    ("resnet50", "128", 8, ("ResNet-50 (batch size 128)", "128")),
    ("vgg19", "32", 1, ("ResNet-50 (batch size 32)", "32")),
    ("DCGAN", "64", 1, ("CycleGAN", "")),  # Gavel measured CycleGAN on 1 GPU only
    ("DCGAN", "64", 2, ("ResNet-18 (batch size 64)", "64")),
    ("PointNet", "128", 4, ("ResNet-18 (batch size 128)", "128")),
    ("Bert-Large", "256/16", 4, ("Transformer (batch size 256)", "256")),
    ("GPT2-Medium", "512/8", 8, ("LM (batch size 80)", "80")),  # largest LM batch is nearest to 512
    ("A3C", "", 1, ("A3C", "")),  # already Gavel: identity
], ids=["resnet50", "vgg19", "dcgan-1", "dcgan-2", "pointnet", "bert", "gpt2", "identity"])
def test_to_gavel_worked_examples(model, batch, gpus, expected):
    assert map_model(model, batch, gpus, "gavel") == expected


@pytest.mark.parametrize("model", A100_MODELS)
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_a100_models_map_to_measured_gavel_rows(model, gpus):
    batch = LLM_BATCH.get(model, "64")
    job_type, _ = map_model(model, batch, gpus, "gavel")
    v100 = gavel_table()["v100"]
    assert f"('{job_type}', {gpus})" in v100


@pytest.mark.parametrize("job_type,gpus,sf", [
    ("A3C", 16, 1), ("Recommendation (batch size 512)", 2, 1), ("ResNet-18 (batch size 16)", 16, 8),
    ("LM (batch size 5)", 3, 2), ("Transformer (batch size 64)", 4, 4),
], ids=["a3c-16", "rec-2", "resnet-16", "lm-3", "transformer-4"])
def test_gavel_table_key_uses_largest_measured_scale_factor(job_type, gpus, sf):
    assert gavel_table_key(job_type, gpus) == (job_type, sf)


@pytest.mark.parametrize("model,batch,expected", [
    ("RESNET50", "064", ("resnet50", "64")),
    ("bert-large", "32", ("Bert-Large", "256/16")),  # Blox writes a plain batch for LLMs
    ("GPT2-Medium", "512/16", ("GPT2-Medium", "512/16")),
    ("ResNet-18", "16", ("ResNet-18 (batch size 16)", "16")),  # Gavel family + batch column
    ("resnet-50 (batch size 32)", "", ("ResNet-50 (batch size 32)", "32")),
    ("cyclegan", "", ("CycleGAN", "")),
], ids=["case", "llm-plain", "llm-global-micro", "family-batch", "type-no-batch", "no-batch-type"])
def test_resolve_model(model, batch, expected):
    assert resolve_model(model, batch) == expected


@pytest.mark.parametrize("model,batch,message", [
    ("AlexNet", "32", "unknown model"),
    ("resnet50", "", "positive integer"),
    ("resnet50", "-3", "positive integer"),
    ("ResNet-50 (batch size 32)", "64", "contradicts"),
    ("Bert-Large", "256/x", "global/micro"),
], ids=["unknown", "empty-batch", "negative-batch", "contradiction", "bad-llm-batch"])
def test_resolve_model_rejects(model, batch, message):
    with pytest.raises(ValueError, match=message):
        resolve_model(model, batch)


@pytest.mark.parametrize("model,ns", [("PointNet", "a100"), ("GPT2-Medium", "a100"), ("A3C", "gavel"),
                                      ("LM (batch size 5)", "gavel")], ids=["pointnet", "gpt2", "a3c", "lm"])
def test_namespace_of(model, ns):
    assert namespace_of(model) == ns


def test_namespace_of_rejects_non_canonical():
    with pytest.raises(ValueError, match="unknown model"):
        namespace_of("resnet-50")


def test_family_table_covers_every_family_once():
    assert len({f.name for f in GAVEL_FAMILIES}) == len(GAVEL_FAMILIES) == 7
    assert {f.a100_small for f in GAVEL_FAMILIES} <= set(SMALL_MODELS)


# --- writer round trip ---------------------------------------------------------------------------

_ID = st.text(st.sampled_from("abcXYZ019-_.:,\" /"), min_size=1, max_size=10).filter(lambda s: s == s.strip())
_MODEL = st.one_of(
    st.tuples(st.sampled_from(SMALL_MODELS), st.integers(1, 4096).map(str)),
    st.tuples(st.sampled_from(LLM_MODELS), st.sampled_from(["256/16", "512/8", "256/64"])),
    st.sampled_from(GAVEL_JOB_TYPES).map(lambda t: (t, "" if split_gavel_type(t)[1] is None
                                                    else str(split_gavel_type(t)[1]))),
)
_TIME = st.floats(0, 1e10, allow_nan=False, allow_infinity=False)


@st.composite
def trace_jobs(draw) -> TraceJob:
    model, batch = draw(_MODEL)
    return TraceJob(
        job_id=draw(_ID), submit_time=draw(_TIME), num_gpus=draw(st.integers(1, 64)),
        duration=draw(st.floats(1e-6, 1e9, allow_nan=False)), model=model, batch_size=batch,
        user=draw(st.one_of(st.just(""), _ID)), priority=draw(st.floats(1e-6, 1e6)),
        no_pack=draw(st.booleans()), total_steps=draw(st.one_of(st.none(), st.integers(1, 10**12))),
        source_type=draw(st.one_of(st.none(), _ID)),
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(trace_jobs(), max_size=12, unique_by=lambda j: j.job_id))
def test_csv_writer_round_trips_exactly(jobs):
    trace = Trace.of("t", jobs)
    again = parse_csv(dumps_csv(trace), "mem.csv", "t")
    assert again == trace


def test_csv_write_then_load_file(tmp_path):
    trace = load_shipped("shockwave-120")  # Gavel job types, total_steps, source_type, float durations
    write_csv(trace, tmp_path / "sub" / "sw.csv")
    assert load_csv(tmp_path / "sub" / "sw.csv", "shockwave-120") == trace


@pytest.mark.parametrize("name", ["demo", "tesserae-900"])
def test_shipped_generated_csvs_are_the_writers_own_output(name):
    """Byte-for-byte: reading and re-writing a shipped generated trace changes nothing."""
    path = shipped_path(name)
    assert dumps_csv(load_csv(path)) == path.read_text()


def test_write_to_unwritable_path_is_input_error(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="cannot write"):
        write_csv(load_shipped("sample"), tmp_path / "f" / "x.csv")
