"""Trace loaders on the real shipped/shared files, format detection, and malformed-row errors."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from tesserae_slurm.model import InputError
from tesserae_slurm.sim.traces import (
    A100_MODELS, GAVEL_JOB_TYPES, detect_format, load_philly_dir, load_shipped, load_trace, shipped_path,
    to_models,
)
from tesserae_slurm.sim.traces.models import LLM_MODELS, gavel_table_key
from tesserae_slurm.sim.traces.shockwave_format import jobs_in_name

SHARED = Path("/work/shared/data/traces")
PHILLY = SHARED / "philly_gavel_seed0"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared reference traces not on this machine")


def gavel_v100() -> dict[tuple[str, int], float]:
    """Independent read of Gavel's table: "('A3C', 1)" -> solo steps/s on v100."""
    raw = json.loads(resources.files("tesserae_slurm.data").joinpath("gavel_simulation_throughputs.json").read_text())
    out = {}
    for key, row in raw["v100"].items():
        name, sf = key[2:-1].rsplit("', ", 1)
        out[(name, int(sf))] = row["null"]
    return out


# --- shipped traces ------------------------------------------------------------------------------

def test_sample_reads_as_written_with_llm_batch_from_the_profile():
    t = load_shipped("sample")
    assert len(t) == 10 and [j.job_id for j in t] == [str(i) for i in range(1, 11)]
    first = t[0]
    assert (first.submit_time, first.num_gpus, first.duration, first.model, first.batch_size) == (
        12.0, 1, 9447.0, "resnet50", "64")
    # The Blox file writes the uniform batch draw (32) for LLMs too; the A100 table keys them global/micro.
    llm = {j.job_id: (j.model, j.batch_size) for j in t if j.model in LLM_MODELS}
    assert llm == {"6": ("GPT2-Medium", "512/8"), "9": ("Bert-Large", "256/16")}


@pytest.mark.parametrize("name,count", [("sample", 10), ("demo", 60), ("tesserae-900", 900), ("shockwave-120", 120)],
                         ids=["sample", "demo", "tesserae-900", "shockwave-120"])
def test_shipped_traces_load_in_both_namespaces(name, count):
    t = load_shipped(name)
    assert len(t) == count and t.name == name
    times = [j.submit_time for j in t]
    assert times == sorted(times)
    assert {j.model for j in to_models(t, "a100")} <= set(A100_MODELS)
    gavel = to_models(t, "gavel")
    assert {j.model for j in gavel} <= set(GAVEL_JOB_TYPES)
    table = gavel_v100()
    assert all(gavel_table_key(j.model, j.num_gpus) in table for j in gavel)


def test_shockwave_120_first_row_and_name_count():
    t = load_shipped("shockwave-120")
    assert jobs_in_name(shipped_path("shockwave-120")) == 120
    j = t[0]
    # LM (batch size 10) ... 134583  1  gns  1  -1.000000  1418  0
    assert (j.job_id, j.model, j.batch_size, j.num_gpus, j.total_steps, j.duration, j.submit_time) == (
        "0", "LM (batch size 10)", "10", 1, 134583, 1418.0, 0.0)
    assert j.source_type == "LM (batch size 10)"


# --- shared reference traces ---------------------------------------------------------------------

@needs_shared
@pytest.mark.parametrize("path", sorted((SHARED / "shockwave").glob("*.trace")) if SHARED.is_dir() else [],
                         ids=lambda p: p.name.split("_")[0] + "_" + p.name.split("_")[3])
def test_shockwave_job_count_matches_file_name(path):
    assert detect_format(path) == "shockwave"
    assert len(load_trace(path)) == jobs_in_name(path)


@needs_shared
def test_philly_has_15_vcs_and_15264_jobs():
    vcs = load_philly_dir(PHILLY)
    assert len(vcs) == 15
    assert sum(len(v) for v in vcs) == 15_264
    for v in vcs:  # each VC has one job per non-blank line of its file
        lines = [ln for ln in (PHILLY / f"{v.name.removeprefix('philly-')}.trace").read_text().splitlines() if ln]
        assert len(v) == len(lines)


@needs_shared
@pytest.mark.parametrize("vc,line,job_type,sf,table_sf", [
    ("0e4a51", 1, "Transformer (batch size 128)", 1, 1),
    ("0e4a51", 4, "ResNet-18 (batch size 32)", 1, 1),
    ("0e4a51", 37, "ResNet-18 (batch size 128)", 4, 4),  # 10288513 steps / 69.95 steps/s at sf 4
], ids=["transformer-sf1", "resnet18-sf1", "resnet18-sf4"])
def test_philly_duration_is_steps_over_v100_throughput(vc, line, job_type, sf, table_sf):
    fields = (PHILLY / f"{vc}.trace").read_text().splitlines()[line - 1].split("\t")
    steps = int(fields[4])
    job = load_trace(PHILLY / f"{vc}.trace")[line - 1]
    assert (job.model, job.num_gpus, job.total_steps) == (job_type, sf, steps)
    assert job.duration == pytest.approx(steps / gavel_v100()[(job_type, table_sf)], rel=1e-12)


@needs_shared
def test_philly_unmeasured_scale_factors_use_largest_measured():
    table = gavel_v100()
    jobs = [j for v in load_philly_dir(PHILLY) for j in v]
    wide = [j for j in jobs if j.num_gpus > 8 and j.model.startswith("ResNet-18")]
    single_only = [j for j in jobs if j.num_gpus > 1 and j.model in ("A3C", "CycleGAN")]
    assert wide and single_only
    for j in wide:  # distributed family: sf 8 stands in for 16/32/64
        assert j.duration == pytest.approx(j.total_steps / table[(j.model, 8)], rel=1e-9)
    for j in single_only:  # measured on 1 GPU only
        assert j.duration == pytest.approx(j.total_steps / table[(j.model, 1)], rel=1e-9)


# --- Gavel layouts (tmp files) -------------------------------------------------------------------

CMD = "python3 main.py --batch_size 64"


@pytest.mark.parametrize("row,fmt", [
    # 10 columns: type, cmd, workdir, steps_arg, needs_data, steps, sf, prio, SLO, arrival
    (["ResNet-50 (batch size 64)", CMD, "image_classification", "--num_minibatches", "1", "43947", "2", "5",
      "-1", "120"], "gavel"),
    # 9 columns: the same without workdir
    (["ResNet-50 (batch size 64)", CMD, "--num_minibatches", "1", "43947", "2", "5", "-1", "120"], "gavel"),
    # 7 columns (Philly-derived): type, cmd, steps_arg, needs_data, steps, arrival, sf
    (["ResNet-50 (batch size 64)", CMD, "--num_minibatches", "1", "43947", "120.000000", "2"], "philly"),
], ids=["gavel-10", "gavel-9", "philly-7"])
def test_gavel_layouts(tmp_path, row, fmt):
    p = tmp_path / "x.trace"
    p.write_text("\t".join(row) + "\n")
    assert detect_format(p) == fmt
    (j,) = load_trace(p)
    assert (j.model, j.batch_size, j.num_gpus, j.submit_time, j.total_steps) == (
        "ResNet-50 (batch size 64)", "64", 2, 120.0, 43947)
    assert j.duration == pytest.approx(43947 / gavel_v100()[("ResNet-50 (batch size 64)", 2)])
    assert j.priority == (5.0 if fmt == "gavel" else 1.0)


@pytest.mark.parametrize("name,text,fmt", [
    ("a.csv", "job_id,submit_time,num_gpus,duration,model,batch_size\n", "csv"),
    ("a.txt", "job_id,submit_time,num_gpus,duration,model,batch_size\n", "csv"),
    ("a.trace", "\t".join(["x"] * 12) + "\n", "shockwave"),
    ("a.trace", "\t".join(["x"] * 7) + "\n", "philly"),
    ("a.trace", "\t".join(["x"] * 10) + "\n", "gavel"),
], ids=["csv-ext", "csv-commas", "shockwave-12", "philly-7", "gavel-10"])
def test_detect_format(tmp_path, name, text, fmt):
    p = tmp_path / name
    p.write_text(text)
    assert detect_format(p) == fmt


def test_detect_format_refuses_unknown_width(tmp_path):
    p = tmp_path / "a.trace"
    p.write_text("a\tb\tc\n")
    with pytest.raises(InputError, match=r"a\.trace:1: cannot tell the trace format"):
        detect_format(p)


# --- malformed input: file, line, what is wrong ---------------------------------------------------

HEAD = "job_id,submit_time,num_gpus,duration,model,batch_size\n"
OK = "1,0,1,3600,resnet50,32\n"
SW_OK = "\t".join(["A3C", "c", "d", "--max-steps", "0", "100", "1", "static", "1", "-1", "600", "5"]) + "\n"
G_OK = "\t".join(["A3C", "c", "d", "--max-steps", "0", "100", "1", "1", "-1", "5"]) + "\n"


@pytest.mark.parametrize("name,text,message", [
    ("t.csv", "", r"t\.csv: empty file"),
    ("t.csv", HEAD.replace(",batch_size", "") + OK, r"t\.csv:1: missing required column\(s\) batch_size"),
    ("t.csv", HEAD.replace("model", "modle"), r"t\.csv:1: unknown column\(s\) 'modle'"),
    ("t.csv", HEAD + OK + "2,abc,1,3600,resnet50,32\n", r"t\.csv:3: submit_time: expected a number, got 'abc'"),
    ("t.csv", HEAD + "1,0,0,3600,resnet50,32\n", r"t\.csv:2: num_gpus: expected a positive integer, got '0'"),
    ("t.csv", HEAD + "1,0,1.5,3600,resnet50,32\n", r"t\.csv:2: num_gpus: expected a positive integer"),
    ("t.csv", HEAD + "1,-5,1,3600,resnet50,32\n", r"t\.csv:2: submit_time: negative time '-5'"),
    ("t.csv", HEAD + "1,0,1,0,resnet50,32\n", r"t\.csv:2: duration: must be > 0"),
    ("t.csv", HEAD + "1,0,1,nan,resnet50,32\n", r"t\.csv:2: duration: expected a finite number"),
    ("t.csv", HEAD + OK + "\n2,0,1,60,AlexNet,32\n", r"t\.csv:4: model: unknown model 'AlexNet'"),
    ("t.csv", HEAD + "1,0,1,60,ResNet-50,48\n", r"t\.csv:2: model: Gavel model ResNet-50 has no batch size '48'"),
    ("t.csv", HEAD + "1,0,1,60,resnet50\n", r"t\.csv:2: expected 6 fields \(as in the header\), got 5"),
    ("t.csv", HEAD + OK + OK, r"t\.csv:3: job_id: duplicate '1' \(first on line 2\)"),
    ("t.csv", HEAD.strip() + ",no_pack\n1,0,1,60,resnet50,32,maybe\n", r"t\.csv:2: no_pack: expected true/false"),
    ("t.csv", HEAD.strip() + ",priority\n1,0,1,60,resnet50,32,0\n", r"t\.csv:2: priority: must be > 0"),
    ("t.trace", SW_OK + SW_OK.replace("static", "dynamic"), r"t\.trace:2: mode: expected one of"),
    ("t.trace", SW_OK + SW_OK.replace("\t5\n", "\t-1\n"), r"t\.trace:2: arrival: negative time '-1'"),
    ("t.trace", G_OK + "\n" + G_OK.replace("A3C", "VGG-16"), r"t\.trace:3: job_type: unknown Gavel job type 'VGG-16'"),
    ("t.trace", G_OK + G_OK.replace("\t100\t", "\tmany\t"), r"t\.trace:2: total_steps: expected a number"),
    ("t.trace", G_OK + "\t".join(["A3C"] * 9) + "\n", r"t\.trace:2: expected 10 tab-separated columns"),
    ("t.trace", G_OK.replace("\t100\t1\t", "\t100\t0\t"), r"t\.trace:1: scale_factor: expected a positive integer"),
], ids=["csv-empty", "csv-missing-col", "csv-unknown-col", "csv-non-number", "csv-zero-gpus", "csv-frac-gpus",
        "csv-negative-time", "csv-zero-duration", "csv-nan", "csv-unknown-model", "csv-gavel-batch",
        "csv-short-row", "csv-duplicate-id", "csv-bad-flag", "csv-zero-priority", "sw-bad-mode", "sw-negative",
        "gavel-unknown-type", "gavel-non-number", "gavel-ragged", "gavel-zero-sf"])
def test_malformed_rows_name_file_and_line(tmp_path, name, text, message):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError, match=message):
        load_trace(p)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "nope.csv")
    (tmp_path / "a.csv").write_text(HEAD + OK)
    with pytest.raises(InputError, match="unknown trace format 'xml'"):
        load_trace(tmp_path / "a.csv", "xml")
    with pytest.raises(InputError, match="unknown model namespace 'h100'"):
        load_trace(tmp_path / "a.csv", models="h100")


def test_csv_optional_columns_any_order(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("model,batch_size,no_pack,user,duration,num_gpus,submit_time,job_id,priority\n"
                 "bert-large,,yes,alice,7200,4,30.5,a,2\n"
                 "ResNet-50,64,0,,60,1,10,b,\n")
    a, b = load_trace(p)  # sorted by submit time: b (10 s) first
    assert (a.job_id, b.job_id) == ("b", "a")
    assert (b.model, b.batch_size, b.user, b.no_pack, b.priority, b.submit_time) == (
        "Bert-Large", "256/16", "alice", True, 2.0, 30.5)
    assert (a.model, a.batch_size, a.no_pack, a.priority) == ("ResNet-50 (batch size 64)", "64", False, 1.0)


def test_csv_equal_submit_times_keep_file_order(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(HEAD + "z,5,1,60,vgg19,32\na,5,1,60,vgg19,32\nm,1,1,60,vgg19,32\n")
    assert [j.job_id for j in load_trace(p)] == ["m", "z", "a"]


def test_csv_time_limit_column_is_optional_and_round_trips(tmp_path):
    from tesserae_slurm.sim.traces.csv_format import dumps_csv, parse_csv

    p = tmp_path / "t.csv"
    p.write_text(HEAD.rstrip("\n") + ",time_limit\n" + "a,0,1,60,vgg19,32,3600\nb,1,1,60,vgg19,32,\n")
    a, b = load_trace(p)
    assert (a.time_limit, b.time_limit) == (3600.0, None)
    assert "time_limit" in dumps_csv([a, b]).splitlines()[0]
    assert tuple(parse_csv(dumps_csv([a, b]))) == (a, b)
    assert "time_limit" not in dumps_csv([b]).splitlines()[0]
    p.write_text(HEAD.rstrip("\n") + ",time_limit\n" + "a,0,1,60,vgg19,32,-5\n")
    with pytest.raises(InputError, match="time_limit: must be > 0"):
        load_trace(p)
