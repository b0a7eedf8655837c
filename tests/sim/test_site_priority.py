"""Site priorities in the simulator: the trace's priority, user and account columns replayed under
slurm-priority-t and per-user/account GPU limits (the engine's own, as in the daemon)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm import rank_decide
from tesserae_slurm.model import Cluster
from tesserae_slurm.model.gpu_limits import GpuLimits
from tesserae_slurm.presets import get_config
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim import runner
from tesserae_slurm.sim.invariants import InvariantError, check_limits
from tesserae_slurm.sim.runner import simulate
from tesserae_slurm.sim.traces import Trace, TraceJob
from tesserae_slurm.sim.traces.csv_format import dumps_csv, parse_csv

A100 = load_profile("a100")

# one 4-GPU node; everything arrives at 0 in id order, priorities say otherwise
CSV = """job_id,submit_time,num_gpus,duration,model,batch_size,priority,user,account
low,0,4,600,resnet50,64,10,alice,ml
mid,0,4,600,resnet50,64,50,bob,ml
top,0,4,600,resnet50,64,90,carol,bio
"""


def engine_calls(monkeypatch, wrap):
    """The engine as the simulator calls it (the round call, and the check of a kept decision),
    replaced by ``wrap(real_decide)``."""
    fake = wrap(rank_decide.decide)
    for module in (rank_decide, runner):
        monkeypatch.setattr(module, "decide", fake)


def recording(monkeypatch):
    """Every (request, decision) of a run: the simulator's own engine calls, wrapped to look."""
    seen = []

    def wrap(real):
        def spy(req, profile, clock=None):
            d = real(req, profile, clock)
            seen.append((req, d))
            return d
        return spy

    engine_calls(monkeypatch, wrap)
    return seen


def test_trace_columns_round_trip():
    trace = parse_csv(CSV, name="site")
    assert [(j.job_id, j.priority, j.user, j.account) for j in trace] == [
        ("low", 10.0, "alice", "ml"), ("mid", 50.0, "bob", "ml"), ("top", 90.0, "carol", "bio")]
    assert parse_csv(dumps_csv(trace), name="site") == trace


def test_slurm_priority_runs_jobs_in_the_traces_priority_order():
    trace = parse_csv(CSV, name="site")
    r = simulate(trace, Cluster.from_spec("1x4:a100"), get_config("slurm-priority"), A100, check_invariants=True)
    start = {j.job_id: j.start_time for j in r.jobs}
    assert start["top"] < start["mid"] < start["low"]  # one 4-GPU job at a time, no packing
    packed = simulate(trace, Cluster.from_spec("1x4:a100"), get_config("slurm-priority-t"), A100)
    assert min(packed.jobs, key=lambda j: (j.start_time, -j.rounds_packed)).job_id in ("top", "mid")
    assert max(packed.jobs, key=lambda j: j.start_time).job_id == "low"
    fifo = simulate(trace, Cluster.from_spec("1x4:a100"), get_config("fifo"), A100)
    assert min(fifo.jobs, key=lambda j: j.start_time).job_id == "low"


def test_account_limit_is_replayed(monkeypatch):
    # 2 nodes: without limits mid and top run together; the ml account may hold 4 GPUs
    trace = parse_csv(CSV, name="site")
    seen = recording(monkeypatch)
    lim = GpuLimits(accounts={"ml": 4})
    r = simulate(trace, Cluster.from_spec("2x4:a100"), get_config("slurm-priority"), A100, limits=lim,
                 check_invariants=True)
    first = seen[0][1]
    assert first.placement.jobs() == {"top", "mid"}
    assert [(p.job_id, p.reason.value) for p in first.pending] == [("low", "Limit")]
    for req, d in seen:
        check_limits(d, req.jobs, lim)
    start = {j.job_id: j.start_time for j in r.jobs}
    assert start["low"] >= 600  # only after mid (same account) is done


def test_check_catches_a_decision_over_a_limit(monkeypatch):
    """--check's limit invariant fails a run whose engine ignored the limits."""
    engine_calls(monkeypatch, lambda real: lambda req, profile, clock=None: real(
        dataclasses.replace(req, limits=None), profile, clock))
    with pytest.raises(InvariantError, match="account ml holds 8 GPUs, over its limit of 4"):
        simulate(parse_csv(CSV, name="site"), Cluster.from_spec("3x4:a100"), get_config("slurm-priority"), A100,
                 limits=GpuLimits(accounts={"ml": 4}), check_invariants=True)


@st.composite
def site_traces(draw):
    n = draw(st.integers(2, 14))
    jobs = []
    for i in range(n):
        jobs.append(TraceJob(f"j{i}", float(draw(st.integers(0, 4)) * 300), draw(st.sampled_from([1, 2, 4])),
                             float(draw(st.integers(1, 8)) * 200), draw(st.sampled_from(["resnet50", "DCGAN"])),
                             "64", user=draw(st.sampled_from(["alice", "bob", "carol"])),
                             priority=float(draw(st.integers(1, 100))), account=draw(st.sampled_from(["ml", "bio"]))))
    users = draw(st.dictionaries(st.sampled_from(["alice", "bob"]), st.integers(4, 8), max_size=2))
    accounts = draw(st.dictionaries(st.sampled_from(["ml", "bio"]), st.integers(4, 12), max_size=2))
    return Trace.of("prop", jobs), GpuLimits(users, accounts, draw(st.none() | st.integers(4, 6)))


@settings(max_examples=25, deadline=None)
@given(site_traces(), st.sampled_from(["slurm-priority-t", "tesserae-t", "fifo", "las"]))
def test_property_no_user_or_account_ever_holds_more_than_allowed(case, config):
    """Every round of a simulated run under any policy: within every limit, and a job waits for a
    limit only when it would go over it (sim/invariants.check_limits)."""
    trace, lim = case
    with pytest.MonkeyPatch.context() as mp:
        seen = recording(mp)
        r = simulate(trace, Cluster.from_spec("2x4:a100"), get_config(config), A100, limits=lim,
                     check_invariants=True, reuse_decisions=False)
    assert len(r.jobs) == len(trace)  # limits of >= 4 GPUs never keep a job of <= 4 GPUs out for good
    assert seen
    for req, d in seen:
        check_limits(d, req.jobs, lim)


KEEP_FIRST_CSV = """job_id,submit_time,num_gpus,duration,model,batch_size,user,account
j0,0,2,400,resnet50,64,alice,ml
j1,0,1,200,resnet50,64,alice,ml
j4,0,4,400,resnet50,64,alice,ml
j6,0,2,200,resnet50,64,alice,ml
j7,0,1,800,resnet50,64,alice,bio
j8,0,2,800,resnet50,64,alice,ml
j10,0,4,400,resnet50,64,alice,ml
j11,0,2,400,resnet50,64,alice,ml
j3,300,2,200,resnet50,64,alice,ml
j9,300,4,200,resnet50,64,alice,ml
j2,600,4,400,resnet50,64,alice,bio
j5,600,1,200,resnet50,64,alice,ml
"""


def test_a_running_job_the_keep_first_walk_leaves_out_waits_for_a_limit_only_when_over_it():
    """Found by the property above under LAS: bio (cap 4) holds j7 running on 1 GPU when j2 (4 GPUs, bio,
    ranked ahead) arrives. Walked with j7, j2 displaces it and j7 is over; walked without it, j2 finds no
    room and j11 takes j7's GPU. Skipping a job the walk left out anyway flipped the keep-first walk back
    and forth, and j7 ended 'waiting for Limit' with bio holding nothing."""
    with pytest.MonkeyPatch.context() as mp:
        seen = recording(mp)
        simulate(parse_csv(KEEP_FIRST_CSV, name="keep-first"), Cluster.from_spec("2x4:a100"), get_config("las"),
                 A100, limits=GpuLimits({}, {"bio": 4}, None), check_invariants=True, reuse_decisions=False)
    for req, d in seen:
        check_limits(d, req.jobs, GpuLimits({}, {"bio": 4}, None))


@pytest.mark.parametrize("name", ["slurm-priority", "slurm-priority-t"])
def test_named_configurations(name):
    c = get_config(name)
    assert c.policy == "slurm-priority" and c.engine.migration == "tesserae"
    assert c.engine.packing == ("on" if name.endswith("-t") else "off")


def test_simulate_command_takes_limits_from_a_yaml_file(tmp_path, capsys):
    from tesserae_slurm.cli.main import main
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration,model,batch_size,user,priority\n"
                     "a,0,4,600,resnet50,64,alice,1\nb,0,4,600,resnet50,64,alice,2\nc,0,4,600,resnet50,64,bob,1\n")
    limits = tmp_path / "limits.yaml"
    limits.write_text("limits:\n  users: {alice: 4}\n")
    args = ["simulate", "--trace", str(trace), "--cluster", "3x4:a100", "--policy", "slurm-priority", "--check",
            "--json", "-"]
    assert main([*args, "--limits", str(limits)]) == 0
    out = json.loads(capsys.readouterr().out)
    start = {j["id"]: j["start"] for j in out["per_job"]}
    assert start == {"b": 0.0, "c": 0.0, "a": 720.0}  # alice's second job after her first, at a round
    assert out["settings"]["limits"]["users"] == {"alice": 4}
    assert main(args) == 0  # without: all three at once
    assert {j["start"] for j in json.loads(capsys.readouterr().out)["per_job"]} == {0.0}
    limits.write_text("limits:\n  users: {alice: -1}\n")
    assert main([*args, "--limits", str(limits)]) == 2
    assert "limits.users.alice: a GPU limit must be an integer >= 0" in capsys.readouterr().err
