"""The emulated GPU job without Slurm: its speeds against the profile's (the simulator's truth), how it
learns who shares its GPUs, and its work kept across a checkpoint and a resume."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tesserae_slurm.devcluster.emulated_job import (
    MPS,
    TIMESLICE,
    Occupant,
    Registry,
    SpeedTable,
    advance,
    my_gpus,
    speed_now,
    wall_to_finish,
)
from tesserae_slurm.devcluster.emulation import job_key, speed_table
from tesserae_slurm.devcluster.replay import work_ledger
from tesserae_slurm.model import Cluster, Job
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.profiles.keys import TIMESLICE_SHARE
from tesserae_slurm.profiles.speeds import SpeedModel
from tesserae_slurm.sim.traces import generate_tesserae

A100 = load_profile("a100")
TRUTH = SpeedModel(A100, Cluster.from_spec("1x1:a100"))
JOBS = [Job(t.job_id, t.num_gpus, t.model, t.batch_size) for t in generate_tesserae(120, 80, 0)]


@pytest.fixture(scope="module")
def table():
    return SpeedTable(json.loads(json.dumps(speed_table(A100, JOBS, "a100"))))  # as the job reads it


def _occ(job: Job, server: str = "", strategy: str = "") -> Occupant:
    return Occupant(job.id, os.getpid(), job_key(A100, job), strategy, server)


def test_alone_is_the_profiles_speed_alone(table):
    for j in JOBS:
        assert speed_now(table, _occ(j), []) == (pytest.approx(TRUTH.solo(j, "a100", None)), "", "")
        for s in A100.strategies(j.model, j.num_gpus, "a100") if A100.is_strategied(j.model) else ():
            assert table.solo(job_key(A100, j), s) == pytest.approx(TRUTH.solo(j, "a100", s))


def test_pairs_are_the_simulators_truth_under_mps_and_time_sliced(table):
    """One MPS server: the profile's best pair (what the engine packs and the simulator runs);
    two servers (two users): the time-sliced speeds, here the fallback share of each speed alone."""
    checked = 0
    for a in JOBS[:40]:
        for b in JOBS[:40]:
            best = A100.best_pair(a, b, "a100")
            if best is None:
                continue
            ea, eb = _occ(a, "srv", best.a_strategy or ""), _occ(b, "srv", best.b_strategy or "")
            speed, partner, how = speed_now(table, ea, [eb])
            truth = TRUTH.packed(a, b, "a100", best.a_strategy, best.b_strategy)
            assert (speed, partner, how) == (pytest.approx(truth[0]), b.id, MPS)
            other = _occ(b, "another user's server", best.b_strategy or "")
            speed, _, how = speed_now(table, ea, [other])
            two = TRUTH.packed(a, Job(b.id, b.num_gpus, b.model, b.batch_size, user="two"), "a100",
                               best.a_strategy, best.b_strategy)
            assert how == TIMESLICE and speed == pytest.approx(two[0])
            assert speed == pytest.approx(TIMESLICE_SHARE * TRUTH.solo(a, "a100", best.a_strategy))
            checked += 1
    assert checked > 100


def test_no_mps_client_time_slices_and_without_a_table_everything_runs_at_one(table):
    a, b = JOBS[0], JOBS[1]
    assert speed_now(table, _occ(a, ""), [_occ(b, "")])[2] == TIMESLICE  # neither is an MPS client
    assert speed_now(None, _occ(a), [_occ(b)]) == (1.0, b.id, "")
    g = Job("g", 2, "GPT2-Medium", "512/8")
    assert table.packed(job_key(A100, g), "", job_key(A100, g), "", MPS) == pytest.approx(
        TIMESLICE_SHARE * table.solo(job_key(A100, g)))  # two LLMs: never measured, the fallback


def test_registry_sees_who_shares_my_gpus_and_wakes_them(tmp_path):
    a = Registry(tmp_path, "node1", [0, 1])
    b = Registry(tmp_path, "node1", [1])
    c = Registry(tmp_path, "node2", [1])  # another node's GPU 1
    ea, eb, ec = (Occupant(j, os.getpid(), "k", "", "") for j in ("10", "11", "12"))
    a.join(ea)
    c.join(ec)
    assert a.others(ea) == []
    b.join(eb)
    assert [o.job for o in a.others(ea)] == ["11"] and [o.job for o in b.others(eb)] == ["10"]
    t0 = time.monotonic()
    a.sleep(5.0)  # b's join woke a: returns at once
    assert time.monotonic() - t0 < 2.0
    b.leave(eb)
    assert a.others(ea) == []
    dead = Occupant("13", 2 ** 22 + 12345, "k", "", "")  # no such process
    (tmp_path / "node1" / "gpu0" / "13.json").write_text(json.dumps(dead.to_json()))
    assert a.others(ea) == []
    a.leave(ea)
    assert [f.name for f in (tmp_path / "node1").glob("gpu*/*.json")] == ["13.json"]  # its own entries gone
    assert not (tmp_path / "node1" / "wake" / "10").exists()
    assert my_gpus({"TESSERAE_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}) == [2, 3]
    assert my_gpus({"SLURM_JOB_GPUS": "1"}) == [1] and my_gpus({}) == []


def test_progress_arithmetic():
    assert advance(10.0, 100.0, 0.5, 40.0, 2.0) == 50.0
    assert advance(90.0, 100.0, 1.0, 40.0, 2.0) == 100.0  # never past the work
    assert wall_to_finish(60.0, 100.0, 0.5, 40.0) == 2.0 and wall_to_finish(0, 1, 0.0, 1) == float("inf")


def _start(tmp_path: Path, job: str, work: float, *, key: str, speeds: Path, server: str = "",
           restart: float = 0.0, scale: float = 100.0, report_every: float = 0.0) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SLURM_JOB_ID": job, "SLURMD_NODENAME": "n1", "TESSERAE_GPUS": "0",
           "CUDA_MPS_PIPE_DIRECTORY": server}
    env.pop("TESSERAE_REPORT_FILE", None)
    if report_every:
        env.update(TESSERAE_REPORT_FILE=str(tmp_path / f"report-{job}.jsonl"), TESSERAE_REPORT_EVERY=str(report_every))
    return subprocess.Popen([sys.executable, "-m", "tesserae_slurm.devcluster.emulated_job", "--out", str(tmp_path),
                             "--work", str(work), "--speeds", str(speeds), "--key", key, "--scale", str(scale),
                             "--restart-s", str(restart), "--registry", str(tmp_path / "reg"), "--tick", "0.2"],
                            env=env)


def _events(tmp_path: Path, job: str) -> list[dict]:
    path = tmp_path / f"events-{job}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _wait_for(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_checkpoint_and_resume_keep_the_work(tmp_path, table):
    """Stopped by the checkpoint signal, the job saves its work; the next run starts from it, loses
    its restart cost, and ends with exactly the work it was given."""
    speeds = tmp_path / "speeds.json"
    speeds.write_text(json.dumps(speed_table(A100, JOBS, "a100")))
    key = job_key(A100, Job("r", 1, "resnet50", "64"))
    p = _start(tmp_path, "7", 400.0, key=key, speeds=speeds, restart=100.0)
    _wait_for(lambda: any(e["event"] == "speed" for e in _events(tmp_path, "7")))
    time.sleep(0.5)
    p.send_signal(signal.SIGUSR1)
    assert p.wait(timeout=30) == 0
    events = _events(tmp_path, "7")
    saved = events[-1]
    assert saved["event"] == "checkpoint" and 0 < saved["work"] < 400
    assert json.loads((tmp_path / "ckpt-7.json").read_text())["work"] == saved["work"]
    t0 = time.time()
    p = _start(tmp_path, "7", 400.0, key=key, speeds=speeds, restart=100.0)
    assert p.wait(timeout=60) == 0
    events = _events(tmp_path, "7")
    starts = [e for e in events if e["event"] == "start"]
    assert [s["resumed"] for s in starts] == [False, True] and starts[1]["work"] == saved["work"]
    assert events[-1]["event"] == "done" and events[-1]["work"] == 400.0
    # at least the rest of the work at speed 1.0 plus the restart cost, in wall seconds (scale 100)
    assert events[-1]["time"] - t0 >= (400.0 - saved["work"] + 100.0) / 100.0 - 0.05
    assert work_ledger(events, 400.0) == (400.0, ())


def test_two_jobs_on_one_gpu_slow_each_other_as_the_profile_says(tmp_path):
    speeds = tmp_path / "speeds.json"
    speeds.write_text(json.dumps(speed_table(A100, JOBS, "a100")))
    a, b = Job("a", 1, "resnet50", "64"), Job("b", 1, "vgg19", "32")
    pa = _start(tmp_path, "1", 300.0, key=job_key(A100, a), speeds=speeds, server="srv")
    _wait_for(lambda: _events(tmp_path, "1"))
    pb = _start(tmp_path, "2", 100.0, key=job_key(A100, b), speeds=speeds, server="srv")
    assert pb.wait(timeout=60) == 0 and pa.wait(timeout=60) == 0
    ea = [e for e in _events(tmp_path, "1") if e["event"] == "speed"]
    mps = TRUTH.packed(a, b, "a100", None, None)
    assert [(e["speed"], e["partner"], e["sharing"]) for e in ea] == [
        (1.0, "", ""), (pytest.approx(mps[0]), "2", MPS), (1.0, "", "")]
    eb = [e for e in _events(tmp_path, "2") if e["event"] == "speed"]
    assert eb[0]["speed"] == pytest.approx(mps[1]) and eb[0]["sharing"] == MPS
    for job, work in (("1", 300.0), ("2", 100.0)):
        assert work_ledger(_events(tmp_path, job), work) == (work, ())


def test_a_report_never_blends_the_speeds_before_and_after_a_partner_arrives_or_leaves(tmp_path):
    """The daemon attributes a report to the partner of the rounds it covers, but a partner computes
    only once its process is up, seconds after its round: a window that began alone and ended packed
    would credit the pair with a speed between the two (seen on the physical experiment's runs)."""
    speeds = tmp_path / "speeds.json"
    speeds.write_text(json.dumps(speed_table(A100, JOBS, "a100")))
    a, b = Job("a", 1, "resnet50", "64"), Job("b", 1, "vgg19", "32")
    pa = _start(tmp_path, "1", 600.0, key=job_key(A100, a), speeds=speeds, server="srv", report_every=1.0)
    _wait_for(lambda: _events(tmp_path, "1"))
    time.sleep(2.5)  # a's warm-up window and an alone window
    pb = _start(tmp_path, "2", 300.0, key=job_key(A100, b), speeds=speeds, server="srv")
    assert pb.wait(timeout=60) == 0 and pa.wait(timeout=60) == 0
    alone, packed = 100.0, 100.0 * TRUTH.packed(a, b, "a100", None, None)[0]  # steps/s at scale 100
    rates = [x["steps"] / (x["t1"] - x["t0"]) for x in map(json.loads, (tmp_path / "report-1.jsonl").read_text().split())]
    assert len(rates) >= 4
    # a step of rounding in a window of ~1 s, and the loop's waits under load: 25 % either way
    assert all(abs(r - alone) < 0.25 * alone or abs(r - packed) < 0.25 * packed for r in rates), (rates, packed)
    assert any(abs(r - packed) < 0.25 * packed for r in rates) and any(abs(r - alone) < 0.25 * alone for r in rates)


def test_work_ledger_finds_lost_and_invented_work():
    ok = [{"event": "start", "work": 0}, {"event": "speed", "work": 0}, {"event": "checkpoint", "work": 40},
          {"event": "start", "work": 40}, {"event": "done", "work": 100}]
    assert work_ledger(ok, 100) == (100, ())
    lost = [*ok[:3], {"event": "start", "work": 0}, {"event": "done", "work": 100}]
    assert "a run started at work 0, the last checkpoint held 40" in work_ledger(lost, 100)[1]
    short = [*ok[:4], {"event": "done", "work": 90}]
    assert work_ledger(short, 100)[1] == ("finished with work 90, the trace's is 100",)
    assert work_ledger(ok[:3], 100)[1] == ("no run finished the work",)
    back = [*ok[:3], {"event": "start", "work": 40}, {"event": "speed", "work": 30}, {"event": "done", "work": 100}]
    assert "work went back from 40 to 30" in work_ledger(back, 100)[1]


def test_the_runs_copy_runs_as_a_script_and_its_checkpoint_takes_its_time(tmp_path):
    """The payload the runs submit is a copy beside the jobs, run as a script (not from the package):
    on the signal it checkpoints for --checkpoint-s seconds and exits (the launcher records the stop),
    and the emulated GPUs' directories are open to every user's jobs."""
    from tesserae_slurm.devcluster.runs import write_job_files

    files = write_job_files(tmp_path, tmp_path, ("--checkpoint-s", "1.5"))
    assert files.payload.parent == tmp_path and files.payload.read_text().startswith('"""An emulated GPU job')
    argv = files.argv("plain", ["--work", "1000", "--tick", "0.2", "--registry", str(tmp_path / "reg")])
    assert argv[:5] == [str(files.script), "plain", str(files.payload), "--out", str(tmp_path)]
    assert argv[-2:] == ["--checkpoint-s", "1.5"]
    env = {**os.environ, "SLURM_JOB_ID": "9", "SLURMD_NODENAME": "n1", "TESSERAE_GPUS": "0"}
    env.pop("TESSERAE_REPORT_FILE", None)
    p = subprocess.Popen([sys.executable, *argv[2:]], env=env, cwd=tmp_path)
    _wait_for(lambda: any(e["event"] == "speed" for e in _events(tmp_path, "9")))
    assert stat.S_IMODE((tmp_path / "reg" / "n1" / "gpu0").stat().st_mode) == 0o1777
    sent = time.time()
    p.send_signal(signal.SIGUSR1)
    assert p.wait(timeout=30) == 0
    last = _events(tmp_path, "9")[-1]
    assert last["event"] == "checkpoint" and 0 < last["work"] < 1000
    assert last["time"] - sent >= 1.5
