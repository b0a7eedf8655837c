"""Parsers on recorded Slurm 22.05 output and on hand-written grammar cases (offline, fast)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.slurm import parse
from tesserae_slurm.slurm.parse import SlurmParseError, SlurmReportedError
from tesserae_slurm.slurm.types import NodeGpus, SlurmJobState

# ---- node lists --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("node3", ("node3",)),
        ("node[1-3,5]", ("node1", "node2", "node3", "node5")),
        ("node[1-2],gpu7", ("node1", "node2", "gpu7")),
        ("n[08-11]", ("n08", "n09", "n10", "n11")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
        ("node[1-2],node2", ("node1", "node2")),
        ("", ()),
        ("(null)", ()),
    ],
    ids=["single", "range-and-item", "two-items", "zero-padded", "two-brackets", "dedup", "empty", "null"],
)
def test_parse_nodelist(text, expected):
    assert parse.parse_nodelist(text) == expected


@pytest.mark.parametrize("text", ["node[3-1]", "node[a-b]", "node[1-2", "node]1["], ids=["descending", "letters", "unclosed", "reversed"])
def test_parse_nodelist_rejects_malformed(text):
    with pytest.raises(SlurmParseError):
        parse.parse_nodelist(text)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=40), min_size=1, max_size=12))
def test_nodelist_roundtrip_against_compressed_form(numbers):
    # Oracle: build the compressed hostlist by hand from runs of consecutive numbers.
    ordered = sorted(numbers)
    runs, start, prev = [], ordered[0], ordered[0]
    for n in ordered[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f"{start}-{prev}" if start != prev else f"{start}")
        if n is not None:
            start = prev = n
    text = f"node[{','.join(runs)}]"
    assert parse.parse_nodelist(text) == tuple(f"node{n}" for n in ordered)


# ---- gres strings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, name, count, indices",
    [
        ("gpu:2(IDX:0-1)", "gpu", 2, (0, 1)),
        ("gpu:1(IDX:1)", "gpu", 1, (1,)),
        ("gpu:a100:3(IDX:0,2-3)", "gpu", 3, (0, 2, 3)),
        ("gpu:(null):4(IDX:0-3)", "gpu", 4, (0, 1, 2, 3)),
        ("gpu:4,shard:(null):0(IDX:N/A)", "gpu", 4, None),
        ("gpu:1,shard:(null):1(IDX:0)", "shard", 1, (0,)),
        ("gres:gpu:2", "gpu", 2, None),
        ("gpu:4,shard:8", "shard", 8, None),
        ("gpu:a100:4(S:0-1)", "gpu", 4, None),
        ("N/A", "gpu", 0, None),
    ],
    ids=[
        "job-detail", "single-index", "typed-split-range", "null-type", "node-used-no-idx",
        "shard-used", "tres-per-node", "node-config", "socket-binding", "na",
    ],
)
def test_gres_count_and_indices(text, name, count, indices):
    assert parse.gres_count(text, name) == count
    assert parse.gres_indices(text, name) == indices


def test_gres_rejects_garbage():
    with pytest.raises(SlurmParseError):
        parse.parse_gres("gpu:two")


@pytest.mark.parametrize(
    "text, expected",
    [("0-1", (0, 1)), ("0,2-3", (0, 2, 3)), ("N/A", ()), ("", ()), ("7", (7,))],
    ids=["range", "mixed", "na", "empty", "single"],
)
def test_parse_index_ranges(text, expected):
    assert parse.parse_index_ranges(text) == expected


# ---- small command outputs ----------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [("42\n", 42), ("42;tesserae-dev\n", 42)], ids=["plain", "with-cluster"])
def test_parse_sbatch_parsable(text, expected):
    assert parse.parse_sbatch_parsable(text) == expected


def test_parse_squeue_poll():
    assert parse.parse_squeue_poll("4711 PD\n  12 R\n\n13 CG\n") == (("4711", "PD"), ("12", "R"), ("13", "CG"))
    assert parse.parse_squeue_poll("") == ()
    with pytest.raises(SlurmParseError, match="expected 'JOBID STATE'"):
        parse.parse_squeue_poll("squeue: error: Invalid partition name specified\n")


def test_parse_sbatch_parsable_rejects_error_text():
    with pytest.raises(SlurmParseError, match="expected a job id"):
        parse.parse_sbatch_parsable("sbatch: error: Batch job submission failed\n")


@pytest.mark.parametrize(
    "text, expected",
    [("slurm-wlm 22.05.8\n", (22, 5)), ("slurm 23.11.1", (23, 11)), ("25.11.0", (25, 11))],
    ids=["debian", "upstream", "pyslurm"],
)
def test_parse_version(text, expected):
    assert parse.parse_version(text) == expected


def test_parse_ping_recorded(fixture_text):
    assert parse.parse_ping(fixture_text("ping_up.txt")) is True
    assert parse.parse_ping(fixture_text("ping_down.txt")) is False


# ---- squeue --json (recorded) -------------------------------------------------------------------


@pytest.fixture
def jobs(fixture_text):
    return {j.job_id: j for j in parse.parse_squeue_json(fixture_text("squeue_22.05.json"))}


def test_squeue_fixture_has_every_recorded_job(jobs):
    assert sorted(jobs) == list(range(1, 10))
    assert all(j.partition == "tesserae" and j.user == "root" for j in jobs.values())


@pytest.mark.parametrize(
    "job_id, state, reason, held",
    [
        (1, SlurmJobState.PENDING, "JobHeldUser", True),
        (2, SlurmJobState.CANCELLED, "", False),
        (3, SlurmJobState.PENDING, "job requeued in held state", True),
        (4, SlurmJobState.RUNNING, "", False),
        (5, SlurmJobState.FAILED, "NonZeroExitCode", False),
        (7, SlurmJobState.COMPLETED, "", False),
    ],
    ids=["held", "cancelled-running", "requeue-held", "running", "failed", "completed"],
)
def test_squeue_states_and_reasons(jobs, job_id, state, reason, held):
    job = jobs[job_id]
    assert (job.state, job.reason, job.held) == (state, reason, held)


def test_squeue_requeued_job(jobs):
    job = jobs[3]
    assert job.requeued_held and job.restart_count == 1
    assert job.required_nodes == ("node1",) and job.nodes == () and job.start_time is None


def test_squeue_gpu_indices_per_node(jobs):
    # gres_detail ['gpu:1(IDX:0)', 'gpu:1(IDX:0)'] aligned with nodes node[1-2]
    assert jobs[4].nodes == ("node1", "node2")
    assert jobs[4].gpus == (NodeGpus("node1", (0,)), NodeGpus("node2", (0,)))
    assert jobs[9].gpu_map() == {"node2": (1,)}
    assert jobs[9].gpu_indices("node1") == ()
    # a shard-only job holds no whole GPU
    assert jobs[6].gpus == () and jobs[6].gpus_per_node == 0 and jobs[6].tres_per_node == "gres:shard:1"


def test_squeue_comments_and_requests(jobs):
    assert jobs[1].comment == "tesserae:held" and jobs[1].gpus_per_node == 2
    assert jobs[2].admin_comment == '{"round": 3}' and jobs[2].comment == "tesserae:run"


@pytest.mark.parametrize(
    "job_id, exit_code, exit_signal",
    [(5, 3, 0), (7, 0, 0), (2, 0, 15), (4, None, None)],
    ids=["exit-3", "exit-0", "sigterm", "running-has-none"],
)
def test_squeue_exit_status_decoded(jobs, job_id, exit_code, exit_signal):
    # raw wait status: 768 = 3 << 8, 15 = killed by SIGTERM
    assert (jobs[job_id].exit_code, jobs[job_id].exit_signal) == (exit_code, exit_signal)


def test_squeue_times(jobs):
    assert jobs[4].end_time is None and jobs[4].start_time is not None
    assert jobs[5].end_time is not None and jobs[5].end_time >= jobs[5].start_time
    assert jobs[1].start_time is None and jobs[1].submit_time is not None


def test_squeue_metacharacter_name_verbatim(jobs):
    assert jobs[9].name == "nasty $(touch /tmp/pwned); `id` \"q\" 's'"


def test_squeue_partition_filter(fixture_text):
    text = fixture_text("squeue_22.05.json")
    assert len(parse.parse_squeue_json(text, partition="tesserae")) == 9
    assert parse.parse_squeue_json(text, partition="other") == ()


def test_unknown_job_state_is_an_error_naming_version_and_job(fixture_text):
    doc = json.loads(fixture_text("squeue_22.05.json"))
    doc["jobs"] = doc["jobs"][:1]
    doc["jobs"][0]["job_state"] = "NEW_FANCY_STATE"
    job_id = doc["jobs"][0]["job_id"]
    with pytest.raises(SlurmParseError, match=rf"^Slurm 22\.05: squeue --json job {job_id}: cannot read job_state 'NEW_FANCY_STATE'$"):
        parse.parse_squeue_json(json.dumps(doc), version=(22, 5))


# ---- sinfo --json (recorded) --------------------------------------------------------------------


def test_sinfo_nodes(fixture_text):
    nodes = {n.name: n for n in parse.parse_sinfo_json(fixture_text("sinfo_22.05.json"))}
    assert sorted(nodes) == ["node1", "node2"]
    n1, n2 = nodes["node1"], nodes["node2"]
    assert (n1.state, n1.gpus, n1.gpus_used, n1.shards, n1.shards_used) == ("mixed", 2, 1, 4, 1)
    assert (n2.gpus_used, n2.shards_used) == (2, 0)
    assert n1.partitions == ("tesserae",) and n1.cpus == 16 and n1.available
    # 22.05 reports used GPUs without indices for untyped GPUs (`gpu:1`): none invented
    assert n1.gpu_indices_used is None


# ---- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, fn",
    [("squeue_ctld_down_22.05.json", parse.parse_squeue_json), ("sinfo_ctld_down_22.05.json", parse.parse_sinfo_json)],
    ids=["squeue", "sinfo"],
)
def test_json_errors_when_controller_down(fixture_text, name, fn):
    with pytest.raises(SlurmReportedError, match="reported"):
        fn(fixture_text(name))


@pytest.mark.parametrize(
    "text, match",
    [("not json", "not JSON"), ("[]", "JSON object"), ('{"meta": {}}', "no 'jobs' list"), ('{"jobs": [{"name": "x"}]}', "job_id")],
    ids=["garbage", "list", "no-jobs", "no-id"],
)
def test_squeue_malformed(text, match):
    with pytest.raises(SlurmParseError, match=match):
        parse.parse_squeue_json(text)
