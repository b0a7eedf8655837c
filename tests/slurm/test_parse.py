"""Parsers on recorded Slurm 22.05 output and on hand-written grammar cases (offline, fast)."""

from __future__ import annotations

import json
import re

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
        (" node3\n", ("node3",)),
    ],
    ids=["single", "range-and-item", "two-items", "zero-padded", "two-brackets", "dedup", "empty", "null", "padded"],
)
def test_parse_nodelist(text, expected):
    assert parse.parse_nodelist(text) == expected


@pytest.mark.parametrize("text", ["node[3-1]", "node[a-b]", "node[1-2", "node]1[", "node1]"],
                         ids=["descending", "letters", "unclosed", "reversed", "lone-close"])
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


def test_partition_filter_matches_whole_partition_names_not_substrings(fixture_text):
    # a job submitted to several partitions lists them comma-separated; "gpu" is not "gpu2"
    doc = json.loads(fixture_text("squeue_22.05.json"))
    for j, part in zip(doc["jobs"], ["gpu2", "gpu", "big,gpu", "gpu2,cpu", "agpu"]):
        j["partition"] = part
    got = parse.parse_squeue_json(json.dumps(doc), partition="gpu")
    assert sorted(j.partition for j in got) == ["big,gpu", "gpu"]
    nodes = json.loads(fixture_text("sinfo_22.05.json"))
    for n, part in zip(nodes["nodes"], ["gpu2", "gpu,big", "agpu"]):
        n["partitions"] = part.split(",")
    names = [n.partitions for n in parse.parse_sinfo_json(json.dumps(nodes), partition="gpu")]
    assert names == [("gpu", "big")]


@pytest.mark.parametrize("status, code_signal", [
    (0x80 | 9, (0, 9)),  # SIGKILL with the core-dump bit: the signal is the low 7 bits
    (0x80 | 11, (0, 11)),
    (3 << 8, (3, 0)),
    ((255 << 8), (255, 0)),
    ({"set": True, "number": 0x80 | 6}, (0, 6)),  # 23.02's {set, number}
])
def test_exit_status_reads_the_signal_without_the_core_dump_bit(status, code_signal):
    assert parse.exit_status(status) == code_signal


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


# ---- every field and every message, one constructed entry at a time ------------------------------


@pytest.mark.parametrize("text, entries", [
    ("gpu:4,shard:8", [("gpu", None, 4, None), ("shard", None, 8, None)]),
    ("gpu:a100:2(IDX:0-1)", [("gpu", "a100", 2, (0, 1))]),
    ("gpu:(null):4(IDX:0,2-3)", [("gpu", None, 4, (0, 2, 3))]),
    ("shard:(null):0(IDX:N/A)", [("shard", None, 0, ())]),
    ("gres:gpu:2", [("gpu", None, 2, None)]),  # tres_per_node, 22.05
    ("gres/gpu:a100:2", [("gpu", "a100", 2, None)]),  # 23.11 and later
    ("gres/gpu", [("gpu", None, 1, None)]),
    ("gpu", [("gpu", None, 1, None)]),  # a bare name means one
    ("gpu,shard:2", [("gpu", None, 1, None), ("shard", None, 2, None)]),
    ("gpu:nvidia:a100:2", [("gpu", "nvidia:a100", 2, None)]),
    (" gpu:1 ", [("gpu", None, 1, None)]),
    ("gpu:2(S:0-1)", [("gpu", None, 2, None)]),  # socket detail, no indices
    ("", []), ("(null)", []), ("N/A", []),
])
def test_parse_gres_entries(text, entries):
    assert [(e.name, e.type, e.count, e.indices) for e in parse.parse_gres(text)] == entries


@pytest.mark.parametrize("text, bad", [("gpu:x", "gpu:x"), ("gpu:", "gpu:"), ("gpu:1,:", ":")])
def test_parse_gres_names_the_bad_entry(text, bad):
    with pytest.raises(SlurmParseError, match=f"^bad gres entry {bad!r} in {text!r}$"):
        parse.parse_gres(text)


def test_gres_counts_and_indices_by_name():
    used = "gpu:a100:2(IDX:0,3),shard:a100:4(IDX:1)"
    assert parse.gres_count(used) == 2 and parse.gres_count(used, "shard") == 4
    assert parse.gres_indices(used) == (0, 3) and parse.gres_indices(used, "shard") == (1,)
    assert parse.gres_indices("gpu:4") is None and parse.gres_indices("gpu:0(IDX:N/A)") == ()
    assert parse.split_top_level("gpu:2(IDX:0,2),shard:1") == ["gpu:2(IDX:0,2)", "shard:1"]
    assert parse.split_top_level("a[1,2],b(c,(d,e)),f") == ["a[1,2]", "b(c,(d,e))", "f"]
    assert parse.split_top_level("a],b,c") == ["a]", "b", "c"]  # a stray closer does not go below 0


@pytest.mark.parametrize("text, message", [
    ("node[3-1]", "^descending node range '3-1' in 'node\\[3-1\\]'$"),
    ("node[a-b]", "^bad node range 'a-b' in 'node\\[a-b\\]'$"),
    ("node[1-b]", "^bad node range '1-b' in 'node\\[1-b\\]'$"),
    ("node[x]", "^bad node range 'x' in 'node\\[x\\]'$"),
    ("node]1[", "^bad node list 'node\\]1\\['$"),
])
def test_bad_node_lists_name_the_part(text, message):
    with pytest.raises(SlurmParseError, match=message):
        parse.parse_nodelist(text)


def test_node_list_edge_cases():
    assert parse.parse_nodelist("None") == () and parse.parse_nodelist(None) == ()
    assert parse.parse_nodelist("n[1-1]") == ("n1",)
    assert parse.parse_nodelist("n[09-10]") == ("n09", "n10") and parse.parse_nodelist("n[9-10]") == ("n9", "n10")
    assert parse.parse_index_ranges("2-2") == (2,) and parse.parse_index_ranges(" n/a ") == ()
    with pytest.raises(SlurmParseError, match="^bad index range '3-1' in '0,3-1'$"):
        parse.parse_index_ranges("0,3-1")


def test_small_outputs():
    assert parse.parse_sbatch_parsable("Submitted\n42;cluster;extra\n") == 42
    assert parse.parse_sbatch_parsable("42") == 42
    for bad in ("", "oops"):
        with pytest.raises(SlurmParseError, match=f"^sbatch --parsable printed {bad!r}, expected a job id$"):
            parse.parse_sbatch_parsable(bad)
    with pytest.raises(SlurmParseError, match="^no version in 'slurm'$"):
        parse.parse_version(" slurm ")
    assert parse.parse_ping("slurmctld(primary) at h is UP\n") is True
    assert parse.parse_ping("Slurmctld(primary) at h is DOWN\n") is False
    with pytest.raises(SlurmParseError, match="^unexpected scontrol ping output 'x{80}'$"):
        parse.parse_ping("x" * 90)
    assert parse.version_label(None) == "Slurm (version unknown)" and parse.version_label((23, 2)) == "Slurm 23.02"


def test_reported_errors_say_what_slurm_said():
    def reported(errors):
        with pytest.raises(SlurmReportedError) as e:
            parse.load_json(json.dumps({"errors": errors}), "squeue")
        return str(e.value)
    full = {"description": "d", "error": "e", "source": "s", "error_number": 1}
    assert reported([full]) == "squeue reported: d; e; s"
    assert reported([{"error": "e"}, {"error": "second"}]) == "squeue reported: e"
    assert reported(["plain text"]) == "squeue reported: plain text"
    assert reported([{"error_number": 7}]) == "squeue reported: {'error_number': 7}"
    with pytest.raises(SlurmParseError, match="^squeue: expected a JSON object, got list$"):
        parse.load_json("[]", "squeue")


def _job(**fields):
    """A 23.11-style squeue --json job entry with every field the parser requires."""
    j = {"job_id": 7, "job_state": ["COMPLETED"], "name": "n", "user_name": "u", "partition": "p",
         "nodes": "node[1-2]", "gres_detail": ["gpu:a100:2(IDX:0-1)", "gpu:a100:2(IDX:2-3)"], "comment": "c",
         "admin_comment": "a", "restart_cnt": 2, "priority": {"set": True, "infinite": False, "number": 9},
         "submit_time": {"set": True, "number": 100}, "eligible_time": {"set": True, "number": 110},
         "start_time": {"set": True, "number": 120}, "end_time": {"set": True, "number": 130},
         "tres_per_node": "gres/gpu:2", "required_nodes": "node1", "batch_host": "node1", "requeue": True,
         "exit_code": {"status": ["SIGNALED"], "return_code": {"set": True, "number": 0},
                       "signal": {"id": {"set": True, "number": 9}, "name": "KILL"}},
         "state_reason": "None", "account": "ml", "nice": -5}
    j.update(fields)
    return j


def test_every_job_field_is_read():
    [j] = parse.parse_squeue_json(json.dumps({"jobs": [_job()]}), version=(23, 11))
    assert (j.job_id, j.name, j.user, j.partition, j.comment, j.admin_comment) == (7, "n", "u", "p", "c", "a")
    assert j.state is SlurmJobState.COMPLETED and j.state_flags == () and j.reason == "" and j.state_reason == ""
    assert j.nodes == ("node1", "node2") and j.gpus == (NodeGpus("node1", (0, 1)), NodeGpus("node2", (2, 3)))
    assert (j.restart_count, j.priority, j.account, j.nice) == (2, 9, "ml", -5)
    assert (j.submit_time, j.eligible_time, j.start_time, j.end_time) == (100, 110, 120, 130)
    assert (j.tres_per_node, j.gpus_per_node, j.required_nodes) == ("gres/gpu:2", 2, ("node1",))
    assert (j.batch_host, j.requeue, j.exit_code, j.exit_signal) == ("node1", True, 0, 9)
    [p] = parse.parse_squeue_json(json.dumps({"jobs": [_job(
        job_state=["PENDING", "REQUEUED"], state_reason="Priority", nodes="", gres_detail=[], tres_per_node=None,
        requeue=False, eligible_time={"set": False, "number": 0}, restart_cnt=None, nice=None,
        priority={"set": False, "infinite": False, "number": 0})]}))
    assert p.state is SlurmJobState.REQUEUED and p.state_flags == ("PENDING",) and p.state_reason == "Priority"
    assert p.reason == "Priority" and p.start_time == 120 and p.end_time is None and p.exit_code is None  # not PENDING
    assert (p.gpus_per_node, p.requeue, p.eligible_time) == (0, False, None)
    assert (p.restart_count, p.nice, p.priority) == (0, 0, 0)


@pytest.mark.parametrize("entry, message", [
    ("x" * 90, r"^Slurm 23\.11: squeue --json job entry is not an object: x{80}$"),
    ({"job_id": "seven"}, r"^Slurm 23\.11: squeue --json job without a valid job_id: \{'job_id': 'seven'\}$"),
    ({"job_id": 7}, r"^Slurm 23\.11: squeue --json job 7 has no 'job_state'$"),
])
def test_bad_job_entries_are_one_line_naming_version_and_job(entry, message):
    with pytest.raises(SlurmParseError, match=message):
        parse.parse_squeue_json(json.dumps({"jobs": [entry]}), version=(23, 11))


def test_exit_status_of_a_signalled_job_on_every_layout():
    assert parse.exit_status({"status": ["SIGNALED"], "signal": {"id": {"set": True, "number": 15}}}) == (0, 15)
    assert parse.exit_status({"return_code": {"set": True, "number": 2}}) == (2, 0)
    assert parse.exit_status({"return_code": 3, "signal": {"id": 0, "name": ""}}) == (3, 0)
    assert parse.exit_status({"set": True, "number": 3 << 8}) == (3, 0)
    assert parse.exit_status({"set": False, "number": 5}) == (0, 0)  # unset: nothing known
    with pytest.raises(SlurmParseError, match="^job 7: cannot read exit_code 'x'$"):
        parse.exit_status("x", "job 7")


def test_priority_shapes():
    assert parse.job_priority(None) == 0 and parse.job_priority("Infinite") == parse.INFINITE
    assert parse.job_priority(2**31) == 2**31 and parse.job_priority({"set": True, "number": 5}) == 5
    with pytest.raises(SlurmParseError, match="^job 7: cannot read priority 'high'$"):
        parse.job_priority("high", "job 7")


def _node(**fields):
    n = {"name": "node1", "state": ["MIXED", "DRAIN"], "partitions": ["gpu", "big"], "cpus": 16, "alloc_cpus": 4,
         "gres": "gpu:a100:4,shard:a100:8", "gres_used": "gpu:a100:2(IDX:1,3),shard:a100:3(IDX:0)",
         "reason": "maintenance"}
    n.update(fields)
    return n


def test_every_node_field_is_read():
    [n] = parse.parse_scontrol_nodes_json(json.dumps({"nodes": [_node()]}), version=(23, 11))
    assert (n.name, n.state, n.state_flags, n.partitions) == ("node1", "mixed", ("DRAIN",), ("gpu", "big"))
    assert (n.cpus, n.alloc_cpus, n.gpus, n.gpus_used, n.gpu_indices_used) == (16, 4, 4, 2, (1, 3))
    assert (n.shards, n.shards_used, n.reason) == (8, 3, "maintenance")
    assert (n.gres, n.gres_used) == ("gpu:a100:4,shard:a100:8", "gpu:a100:2(IDX:1,3),shard:a100:3(IDX:0)")
    [old] = parse.parse_sinfo_json(json.dumps({"nodes": [_node(
        state="idle", state_flags=["drain"], partitions="gpu, big", cpus=None, alloc_cpus=None, reason=None)]}))
    assert (old.state, old.state_flags, old.partitions, old.cpus, old.alloc_cpus, old.reason) == (
        "idle", ("DRAIN",), ("gpu", "big"), 0, 0, "")


@pytest.mark.parametrize("entry, message", [
    (["node1"], r"^Slurm 23\.11: scontrol show node --json node entry is not an object: \['node1'\]$"),
    ({"state": "idle"}, r"^Slurm 23\.11: scontrol show node --json node without a name: \{'state': 'idle'\}$"),
    (_node(state=["IDLE", "MIXED"]), r"node node1: cannot read state \['IDLE', 'MIXED'\]$"),
    (_node(state=""), r"node node1: cannot read state ''$"),
    ({"name": "node1"}, r"node node1 has no 'state'$"),
])
def test_bad_node_entries_are_one_line_naming_version_and_node(entry, message):
    with pytest.raises(SlurmParseError, match=message):
        parse.parse_scontrol_nodes_json(json.dumps({"nodes": [entry]}), version=(23, 11))


def test_a_nodes_document_without_nodes_says_where_they_are():
    with pytest.raises(SlurmParseError, match=r"^Slurm 23\.02: sinfo --json has no 'nodes' list \(it has a 'sinfo' "
                                              r"list: Slurm 23\.02\+ lists nodes with scontrol show node --json\)$"):
        parse.parse_sinfo_json(json.dumps({"sinfo": []}), version=(23, 2))
    with pytest.raises(SlurmParseError, match=r"^Slurm \(version unknown\): sinfo --json has no 'nodes' list$"):
        parse.parse_sinfo_json("{}")
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: squeue --json has no 'jobs' list$"):
        parse.parse_squeue_json("{}", version=(24, 11))


@pytest.mark.parametrize("raw, nice", [(4294967276, -20), (2**31, -(2**31)), (2**31 - 1, 2**31 - 1), (None, 0),
                                       (-3, -3)])
def test_nice_printed_as_uint32_reads_signed(raw, nice):
    [j] = parse.parse_squeue_json(json.dumps({"jobs": [_job(nice=raw)]}))
    assert j.nice == nice


def test_nested_brackets_and_stray_closers_in_lists():
    assert parse.split_top_level("a((b),c),d") == ["a((b),c)", "d"]
    for bad in ("no]de1", "n[1]x]"):
        with pytest.raises(SlurmParseError, match=rf"^bad node list {re.escape(repr(bad))}$"):
            parse.parse_nodelist(bad)


def test_messages_name_the_version_the_command_and_the_job():
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: squeue --json: output is not JSON \("):
        parse.parse_squeue_json("{", version=(24, 11))
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: scontrol show node --json: output is not JSON \("):
        parse.parse_scontrol_nodes_json("{", version=(24, 11))
    long_id = {"job_id": None, "comment": "c" * 100}
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: squeue --json job without a valid job_id: "
                                              + re.escape(str(long_id)[:80]) + "$"):
        parse.parse_squeue_json(json.dumps({"jobs": [long_id]}), version=(24, 11))
    nameless = {"state": "idle", "reason": "r" * 100}
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: scontrol show node --json node without a name: "
                                              + re.escape(str(nameless)[:80]) + "$"):
        parse.parse_scontrol_nodes_json(json.dumps({"nodes": [nameless]}), version=(24, 11))
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: squeue --json job 7: cannot read exit_code 'x'$"):
        parse.parse_squeue_json(json.dumps({"jobs": [_job(exit_code="x")]}), version=(24, 11))
    with pytest.raises(SlurmParseError, match=r"^Slurm 24\.11: squeue --json job 7: cannot read priority 'high'$"):
        parse.parse_squeue_json(json.dumps({"jobs": [_job(priority="high")]}), version=(24, 11))
    for call, where in ((parse.exit_status, "exit_code"), (parse.job_priority, "priority")):
        with pytest.raises(SlurmParseError, match=rf"^job: cannot read {where} 'x'$"):
            call("x")
    with pytest.raises(SlurmParseError, match=r"^job: cannot read job_state 'x'$"):
        parse.job_state("x")


def test_scontrol_nodes_are_filtered_by_partition_too():
    doc = json.dumps({"nodes": [_node(name="a", partitions=["gpu"]), _node(name="b", partitions=["cpu"])]})
    assert [n.name for n in parse.parse_scontrol_nodes_json(doc, partition="gpu")] == ["a"]


def test_numbers_as_strings_unset_numbers_and_zero_times():
    [j] = parse.parse_squeue_json(json.dumps({"jobs": [_job(
        restart_cnt="3", submit_time=0, eligible_time={"set": False, "number": 5},
        priority={"set": False, "infinite": False, "number": 5})]}))
    assert (j.restart_count, j.submit_time, j.eligible_time, j.priority) == (3, None, None, 0)
    [n] = parse.parse_scontrol_nodes_json(json.dumps({"nodes": [_node(cpus="16", alloc_cpus="x")]}))
    assert (n.cpus, n.alloc_cpus) == (16, 0)
