"""The parsers on each Slurm release's output: recorded (22.05, 24.11, 26.05) and source-built (23.02-25.05).

Every fixture set holds the same jobs (tests/slurm/fixtures/record.sh); jobs.txt maps their roles
to ids. 22.05's first recording (`*_22.05.json`) is covered by test_parse.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tesserae_slurm.slurm import parse
from tesserae_slurm.slurm.parse import SlurmParseError
from tesserae_slurm.slurm.types import SlurmJobState

FIXTURES = Path(__file__).parent / "fixtures"
SETS = {
    "22.05": FIXTURES / "22.05",
    "23.02": FIXTURES / "constructed" / "23.02",
    "23.11": FIXTURES / "constructed" / "23.11",
    "24.05": FIXTURES / "constructed" / "24.05",
    "24.11": FIXTURES / "24.11",
    "25.05": FIXTURES / "constructed" / "25.05",
    "26.05": FIXTURES / "26.05",
}


def load(label: str):
    d = SETS[label]
    version = parse.parse_version((d / "version.txt").read_text())
    assert f"{version[0]}.{version[1]:02d}" == label
    roles, odd = {}, None
    for line in (d / "jobs.txt").read_text().splitlines():
        if line.startswith("odd="):
            odd = line[len("odd="):]
            continue
        for item in line.split():
            k, _, v = item.partition("=")
            roles[k] = int(v)
    jobs = {j.job_id: j for j in parse.parse_squeue_json((d / "squeue.json").read_text(), version=version)}
    if parse.nodes_source(version) == "sinfo":
        node_list = parse.parse_sinfo_json((d / "sinfo.json").read_text(), version=version)
    else:
        node_list = parse.parse_scontrol_nodes_json((d / "scontrol_node.json").read_text(), version=version)
    nodes = {n.name: n for n in node_list}
    return version, {r: jobs[i] for r, i in roles.items()}, nodes, odd


@pytest.fixture(params=sorted(SETS), scope="module")
def release(request):
    return load(request.param)


def test_nodes_come_from_scontrol_from_23_02_on():
    assert parse.nodes_source((22, 5)) == "sinfo"
    for label in sorted(SETS)[1:]:
        assert parse.nodes_source(parse.parse_version(label)) == "scontrol"
    assert parse.nodes_source((27, 11)) == "scontrol"  # unknown newer: newest known layout


def test_held_jobs(release):
    _, j, _, odd = release
    held, rq, adm = j["held"], j["rq"], j["adm"]
    assert held.state is SlurmJobState.PENDING and held.held and not held.requeued_held
    assert held.reason == "JobHeldUser" and held.priority == 0
    assert rq.state is SlurmJobState.PENDING and rq.held and rq.requeued_held
    assert rq.reason == "job requeued in held state" and rq.restart_count == 1
    assert adm.held and adm.reason == "JobHeldAdmin" and not adm.requeued_held
    later = j["later"]
    assert later.state is SlurmJobState.PENDING and not later.held and later.reason == "BeginTime"
    assert later.start_time is None and later.priority > 0


def test_free_text_fields_survive_any_character(release):
    _, j, _, odd = release
    assert odd and "\t" in odd and '"' in odd and "é" in odd
    assert j["held"].comment == odd
    assert j["held"].admin_comment == "admin: " + odd
    assert j["held"].name == "held; rm -rf / #"
    assert j["run2"].comment == "tesserae:run2"


def test_running_jobs_gpu_indices_per_node(release):
    _, j, _, _ = release
    run2, multi, shard = j["run2"], j["multi"], j["shard"]
    assert run2.state is SlurmJobState.RUNNING and run2.nodes == ("node2",)
    assert run2.gpu_map() == {"node2": (0, 1)} and run2.gpus_per_node == 2
    assert run2.required_nodes == ("node2",) and run2.batch_host == "node2"
    assert multi.nodes == ("node1", "node2") and multi.gpu_map() == {"node1": (0,), "node2": (2,)}
    assert multi.gpus_per_node == 1
    assert shard.gpus == () and shard.gpus_per_node == 0 and "shard" in shard.tres_per_node
    for job in (run2, multi, shard):
        assert job.start_time and job.start_time >= job.submit_time and job.end_time is None
        assert job.exit_code is None and job.user == "root" and job.partition == "tesserae" and job.requeue


def test_finished_jobs_exit_code_signal_and_times(release):
    _, j, _, _ = release
    expect = {"ok": ("COMPLETED", 0, 0), "bad": ("FAILED", 3, 0), "sig": ("FAILED", 0, 9),
              "cancelled_running": ("CANCELLED", 0, 15), "cancelled_held": ("CANCELLED", 0, 0)}
    for role, (state, code, sig) in expect.items():
        job = j[role]
        assert (job.state.value, job.exit_code, job.exit_signal) == (state, code, sig), role
        assert job.end_time and job.end_time >= job.submit_time, role
    assert j["ok"].start_time and j["ok"].start_time <= j["ok"].end_time


def test_nodes(release):
    version, _, nodes, _ = release
    assert sorted(nodes) == ["node1", "node2"]
    for n in nodes.values():
        assert n.state == "mixed" and n.state_flags == () and n.available
        assert n.partitions == ("tesserae",) and n.cpus == 16 and n.gpus == 4 and n.shards == 8
    assert nodes["node1"].gpus_used == 1
    if version == (22, 5):  # 22.05's sinfo prints `gpu:1` in gres_used: no indices
        assert nodes["node1"].gpu_indices_used is None and nodes["node2"].gpus_used == 3
        return
    assert nodes["node1"].gpu_indices_used == (0,) and nodes["node1"].shards_used == 2
    assert nodes["node2"].gpu_indices_used == (0, 1, 2) and nodes["node2"].gpus_used == 3


def _doc(label: str, name: str = "squeue.json"):
    return json.loads((SETS[label] / name).read_text())


@pytest.mark.parametrize("label", sorted(SETS)[1:])
def test_missing_field_is_one_line_naming_version_and_field(label):
    doc = _doc(label)
    job = doc["jobs"][0]
    del job["job_state"]
    version = parse.parse_version(label)
    with pytest.raises(SlurmParseError) as err:
        parse.parse_squeue_json(json.dumps(doc), version=version)
    assert str(err.value) == f"Slurm {label}: squeue --json job {job['job_id']} has no 'job_state'"
    nodes = _doc(label, "scontrol_node.json")
    del nodes["nodes"][1]["gres_used"]
    with pytest.raises(SlurmParseError, match=rf"^Slurm {label}: scontrol show node --json node node2 has no 'gres_used'$"):
        parse.parse_scontrol_nodes_json(json.dumps(nodes), version=version)


@pytest.mark.parametrize(
    "raw, state",
    [(["PENDING", "REQUEUED"], "REQUEUED"), (["RUNNING", "COMPLETING"], "COMPLETING"),
     (["COMPLETED", "COMPLETING"], "COMPLETING"), (["PENDING", "LAUNCH_FAILED"], "PENDING"),
     ("RUNNING", "RUNNING"), (["RUNNING", "CONFIGURING"], "CONFIGURING")],
)
def test_job_state_flag_lists(raw, state):
    assert parse.job_state(raw).value == state


@pytest.mark.parametrize("raw", [["SOMETHING_NEW"], [], None, 5, ["RUNNING", "PENDING"], {"state": "RUNNING"}])
def test_unreadable_job_state_raises(raw):
    with pytest.raises(SlurmParseError, match="cannot read job_state"):
        parse.job_state(raw, "Slurm 24.11: squeue --json job 3")


def test_unknown_newer_version_read_with_newest_layout():
    doc = _doc("26.05")
    jobs = parse.parse_squeue_json(json.dumps(doc), version=(27, 5))
    assert len(jobs) == 12
    doc["jobs"][0]["job_state"] = ["BRAND_NEW"]
    with pytest.raises(SlurmParseError, match=r"^Slurm 27\.05: squeue --json job 1: cannot read job_state \['BRAND_NEW'\]$"):
        parse.parse_squeue_json(json.dumps(doc), version=(27, 5))


@pytest.mark.parametrize("label", ["24.11", "26.05"])
def test_sinfo_json_of_newer_releases_is_refused_with_a_hint(label):
    text = (SETS[label] / "sinfo.json").read_text()
    with pytest.raises(SlurmParseError, match=rf"^Slurm {label}: sinfo --json has no 'nodes' list \(it has a 'sinfo' list"):
        parse.parse_sinfo_json(text, version=parse.parse_version(label))


def test_missing_field_22_05():
    doc = _doc("22.05")
    del doc["jobs"][0]["gres_detail"]
    with pytest.raises(SlurmParseError, match=rf"^Slurm 22\.05: squeue --json job {doc['jobs'][0]['job_id']} has no 'gres_detail'$"):
        parse.parse_squeue_json(json.dumps(doc), version=(22, 5))
    nodes = _doc("22.05", "sinfo.json")
    del nodes["nodes"][0]["partitions"]
    with pytest.raises(SlurmParseError, match=r"^Slurm 22\.05: sinfo --json node node1 has no 'partitions'$"):
        parse.parse_sinfo_json(json.dumps(nodes), version=(22, 5))


@pytest.mark.parametrize("label", ["22.05", "24.11", "26.05"])
def test_recorded_text_outputs_agree_with_json(label):
    """scontrol show node -o and squeue -t all (recorded beside the JSON) name the same states."""
    jobs = {j.job_id: j for j in parse.parse_squeue_json((SETS[label] / "squeue.json").read_text())}
    lines = (SETS[label] / "squeue_o.txt").read_text().splitlines()[1:]
    seen = {int(line.split()[0]): line.split()[1] for line in lines}
    assert seen == {i: j.state.value for i, j in jobs.items()}


def test_exit_status_shapes():
    assert parse.exit_status(768) == (3, 0)
    assert parse.exit_status({"set": True, "infinite": False, "number": 9}) == (0, 9)
    assert parse.exit_status({"status": ["ERROR"], "return_code": {"set": True, "number": 3},
                              "signal": {"id": {"set": False, "number": 0}, "name": ""}}) == (3, 0)
    for bad in ("3", None, {"foo": 1}):
        with pytest.raises(SlurmParseError, match="cannot read exit_code"):
            parse.exit_status(bad)


def _raw_jobs(label: str) -> dict[int, dict]:
    return {j["job_id"]: j for j in json.loads((SETS[label] / "squeue.json").read_text())["jobs"]}


@pytest.mark.parametrize("label", sorted(SETS))
def test_priority_user_account_and_nice_on_every_release(label):
    """What the site-priority order and the GPU limits read: Slurm's priority (0 while held), the
    user, the account (empty: the recording clusters run without accounting) and nice."""
    version = parse.parse_version((SETS[label] / "version.txt").read_text())
    jobs = {j.job_id: j for j in parse.parse_squeue_json((SETS[label] / "squeue.json").read_text(), version=version)}
    raw = _raw_jobs(label)
    assert set(jobs) == set(raw)
    for jid, r in raw.items():
        p = r["priority"]
        want = p if isinstance(p, int) else p["number"]  # 22.05: a plain int; 23.02+: {set, infinite, number}
        assert jobs[jid].priority == want
        assert jobs[jid].user == r["user_name"] == "root"
        assert jobs[jid].account == r["account"] == ""
        assert jobs[jid].nice == 0
    _, roles, _, _ = load(label)
    assert roles["held"].priority == 0 and roles["run2"].priority > 0


@pytest.mark.parametrize("raw, want", [
    (7, 7), (0, 0), (None, 0),
    ({"set": True, "infinite": False, "number": 42}, 42),
    ({"set": False, "infinite": False, "number": 0}, 0),  # NO_VAL: unset
    ({"set": False, "infinite": True, "number": 0}, parse.INFINITE),  # INFINITE (data_parser UINT32_NO_VAL)
    ("Infinity", parse.INFINITE),  # the complex-values form
])
def test_priority_shapes(raw, want):
    assert parse.job_priority(raw) == want


@pytest.mark.parametrize("label", ["23.02", "24.11", "26.05"])
def test_infinite_priority_in_squeue_json(label):
    doc = _doc(label)
    doc["jobs"][0]["priority"] = {"set": False, "infinite": True, "number": 0}
    version = parse.parse_version(label)
    assert parse.parse_squeue_json(json.dumps(doc), version=version)[0].priority == parse.INFINITE


@pytest.mark.parametrize("raw", [{"set": True}, "high", [1]])
def test_unreadable_priority_raises(raw):
    with pytest.raises(SlurmParseError, match="cannot read priority"):
        parse.job_priority(raw, "Slurm 24.11: squeue --json job 3")


def test_nice_shapes():
    # 22.05 prints nice as a uint32 and null for 0 (recorded: `scontrol update job=1 nice=-20` shows
    # 4294967276); 23.02+ print a signed int
    assert [parse._nice(v) for v in (None, 0, 50, 4294967276, -20)] == [0, 0, 50, -20, -20]
