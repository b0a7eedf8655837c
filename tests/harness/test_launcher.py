"""Job-side launcher: assignment codec, Megatron flags, env pinning, signal forwarding to a real torch job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tesserae_slurm.harness.assignment import STOPS_KEY, Assignment, from_scontrol_oneliner
from tesserae_slurm.harness.launcher import build_command, node_env
from tesserae_slurm.harness.megatron import megatron_parallelism
from tesserae_slurm.model import InputError
from tesserae_slurm.model.strategy import parse_strategy

ROOT = Path(__file__).resolve().parents[2]


def test_assignment_roundtrip_and_scontrol_parse():
    a = Assignment("42", 7, {"node2": (1, 3), "node3": (0, 1, 2, 3)}, partner="41", strategy="10,14",
                   mps_percentage=50)
    text = a.encode()
    assert " " not in text  # one token in `scontrol show job -o`
    assert Assignment.decode(text) == a
    line = f"JobId=42 JobName=x Comment=tesserae:meta AdminComment={text} Priority=0 Nodes=node[2-3]"
    assert from_scontrol_oneliner(line) == a
    assert from_scontrol_oneliner("JobId=42 AdminComment=(null) Priority=0") is None


@pytest.mark.parametrize("text", ["tesserae-assign:{", "tesserae-assign:{\"j\":1}", "other:{}"],
                         ids=["truncated", "missing-keys", "wrong-prefix"])
def test_malformed_assignment(text):
    with pytest.raises(InputError):
        Assignment.decode(text)


@pytest.mark.parametrize(
    "strategy,gpus,flags",
    [
        ("10,14", 2, ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "2",
                      "--decoder-first-pipeline-num-layers", "10", "--decoder-last-pipeline-num-layers", "14"]),
        ("6,6,6,6", 4, ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "4"]),
        ("2,10,10,2", 4, ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "4",
                          "--decoder-first-pipeline-num-layers", "2", "--decoder-last-pipeline-num-layers", "2"]),
        ("TP24", 4, ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "1"]),
        ("DP24", 2, ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1"]),
        ("12,12", 4, ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "2"]),  # DP 2
    ],
    ids=["uneven-2", "even-4", "uneven-4", "tp", "dp", "pp-with-dp"],
)
def test_megatron_flags(strategy, gpus, flags):
    assert megatron_parallelism(parse_strategy(strategy), gpus).flags() == flags


@pytest.mark.parametrize("strategy,gpus", [("3,3,4,4", 4), ("10,14", 3), ("TP24", 0)],
                         ids=["unequal-middle", "stages-dont-divide", "no-gpus"])
def test_megatron_rejects(strategy, gpus):
    """Strategies Megatron cannot run on these GPUs (malformed text: tests/model/test_strategy.py)."""
    with pytest.raises(InputError):
        megatron_parallelism(parse_strategy(strategy), gpus)


def test_env_and_torchrun_command():
    a = Assignment("1234", 3, {"node1": (2, 3), "node2": (0, 1)}, strategy="10,14")
    env = node_env(a, "node2", {})
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    cmd = build_command(["train.py", "--x"], a, "node2", env, torchrun=True, megatron=True)
    assert cmd[:6] == ["torchrun", "--nnodes=2", "--node_rank=1", "--nproc_per_node=2",
                       "--master_addr=node1", "--master_port=21234"]
    assert cmd[6:8] == ["train.py", "--x"] and "--pipeline-model-parallel-size" in cmd
    with pytest.raises(InputError, match="node9"):
        node_env(a, "node9", {})


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_launcher_pins_gpus_forwards_signal_and_job_resumes(tmp_path):
    """Real torch payload: USR1 to the launcher -> checkpoint at a step boundary -> resume continues."""
    a = Assignment("77", 1, {"nodeX": (3,)}, partner="76", mps_percentage=50)
    env = {**os.environ, "TESSERAE_ASSIGNMENT": a.encode(), "SLURMD_NODENAME": "nodeX",
           "TESSERAE_MPS_BASE": str(tmp_path / "mps"), "TESSERAE_REQUEUE_WAIT": "0"}
    log, ckpt = tmp_path / "events.jsonl", tmp_path / "ckpt.pt"
    cmd = [sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable,
           str(ROOT / "jobscripts" / "toy_train.py"), "--steps", "400", "--step-time", "0.01",
           "--checkpoint", str(ckpt), "--log", str(log)]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not any(e["event"] == "progress" for e in _events(log)):
        assert time.time() < deadline and proc.poll() is None, "payload never reported progress"
        time.sleep(0.1)
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    ev = _events(log)
    ck = [e for e in ev if e["event"] == "checkpoint"]
    assert len(ck) == 1 and 0 < ck[0]["step"] < 400
    assert ev[0]["cuda_visible_devices"] == "3" and ev[0]["tesserae_partner"] == "76"
    assert ev[0]["cuda_mps_active_thread_percentage"] == "50"
    assert "MPS skipped" in err  # no GPU here: logged, payload ran anyway
    # second run resumes from the checkpoint and finishes
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=120)
    ev = _events(log)
    starts = [e for e in ev if e["event"] == "start"]
    assert starts[1]["step"] == ck[0]["step"]
    assert ev[-1]["event"] == "done" and ev[-1]["step"] == 400


_LATE_HANDLER = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
time.sleep(float(sys.argv[2]))  # a payload still importing its libraries: no handler yet
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
out.write_text("listening")
deadline = time.time() + 20
while not got and time.time() < deadline:
    time.sleep(0.02)
out.write_text("checkpointed" if got else "no signal")
"""


def _launch_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    a = Assignment("91", 1, {"nodeX": (0,)})
    return {**os.environ, "TESSERAE_ASSIGNMENT": a.encode(), "SLURMD_NODENAME": "nodeX",
            "TESSERAE_MPS_BASE": str(tmp_path / "mps"), **extra}


def test_signal_recorded_before_the_launcher_listened_reaches_the_payload_once_it_listens(tmp_path):
    """The batch shell trapped USR1 before the launcher existed and wrote it down: the launcher reads
    the record, holds the signal while the payload ignores it, delivers it once the payload catches
    it, then outlives the payload until the requeue-hold (here: its bounded wait)."""
    record, out = tmp_path / "signals", tmp_path / "payload.txt"
    record.write_text("USR1\n")
    env = _launch_env(tmp_path, TESSERAE_SIGNAL_FILE=str(record), TESSERAE_REQUEUE_WAIT="1.5")
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable, "-c",
                           _LATE_HANDLER, str(out), "0.7"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "checkpointed", proc.stderr
    assert "holding signal" in proc.stderr
    assert time.time() - t0 >= 0.7 + 1.5  # waited for the requeue-hold after the payload checkpointed
    rec = json.loads(next(line for line in proc.stderr.splitlines() if "tesserae-launch: record " in line)
                     .split("record ", 1)[1])
    assert rec["signals_before_launcher"] == ["USR1"]


def test_signal_the_shell_records_later_is_followed_and_term_ends_the_wait(tmp_path):
    """A USR1 appended to the record while the payload runs is delivered; a TERM recorded while the
    launcher waits for the requeue-hold ends the job at once with the payload's exit code."""
    record, out = tmp_path / "signals", tmp_path / "payload.txt"
    record.write_text("")
    env = _launch_env(tmp_path, TESSERAE_SIGNAL_FILE=str(record), TESSERAE_REQUEUE_WAIT="60")
    proc = subprocess.Popen([sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable, "-c",
                             _LATE_HANDLER, str(out), "0"], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not (out.exists() and out.read_text() == "listening"):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    with record.open("a") as fh:
        fh.write("USR1\n")
    while out.read_text() != "checkpointed":
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.5)
    assert proc.poll() is None  # the payload has exited; the launcher keeps the job alive
    with record.open("a") as fh:
        fh.write("TERM\n")
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_packable_job_records_consistent_mps_settings_without_mps(tmp_path):
    """Without nvidia-cuda-mps-control the launcher says so in its record and runs the payload; the
    pipe directory depends on user, node and GPUs only, so a partner finds the same server."""
    def launch(job: str, partner: str, pct: int) -> dict:
        a = Assignment(job, 3, {"nodeX": (2, 3)}, partner=partner, mps_percentage=pct)
        env = {**os.environ, "TESSERAE_ASSIGNMENT": a.encode(), "SLURMD_NODENAME": "nodeX",
               "TESSERAE_MPS_BASE": str(tmp_path / "mps"), "TESSERAE_PACKABLE": "1"}
        proc = subprocess.run([sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable, "-c",
                               "import os; print(os.environ['CUDA_MPS_PIPE_DIRECTORY'], "
                               "os.environ.get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE', ''), "
                               "os.environ['CUDA_VISIBLE_DEVICES'])"],
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        rec = json.loads(next(line for line in proc.stderr.splitlines() if "record " in line).split("record ", 1)[1])
        pipe, pct_seen, cvd = proc.stdout.split(" ") if proc.stdout.count(" ") == 2 else (*proc.stdout.split(), "")
        assert rec["mps"]["pipe_dir"] == pipe and cvd.strip() == "2,3"
        return rec | {"pct_seen": pct_seen}

    alone = launch("10", "", 0)  # packable, alone: already a client, no thread limit
    joined = launch("11", "10", 50)
    assert alone["mps"]["pipe_dir"] == joined["mps"]["pipe_dir"] == str(tmp_path / "mps" / str(os.getuid()) /
                                                                        "nodeX" / "gpu2_3" / "pipe")
    assert alone["mps"]["thread_percentage"] == 0 and joined["mps"]["thread_percentage"] == 50
    assert joined["pct_seen"] == "50" and alone["pct_seen"] == ""
    for rec in (alone, joined):
        assert rec["packable"] and rec["mps"]["active"] is False and not rec["mps"]["started_server"]
        assert "not found" in rec["mps"]["skipped"]


def test_a_payload_that_ends_without_taking_the_signal_ends_the_job(tmp_path):
    """A checkpoint signal the payload never took (no handler; or it had finished) does not keep the
    job alive waiting for a requeue-hold: the payload's exit is the job's exit."""
    record = tmp_path / "signals"
    record.write_text("USR1\n")
    env = _launch_env(tmp_path, TESSERAE_SIGNAL_FILE=str(record), TESSERAE_REQUEUE_WAIT="60")
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable, "-c",
                           "import time; time.sleep(0.5); raise SystemExit(3)"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert time.time() - t0 < 20 and "waiting up to" not in proc.stderr, proc.stderr


_FAKE_MPS = """#!/bin/bash
# stands in for nvidia-cuda-mps-control: -d starts a "server" (a sleep) and writes its pid file; "quit" on stdin stops it
pid="$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
if [ "${1:-}" = -d ]; then
    echo "start $CUDA_VISIBLE_DEVICES" >>"$CUDA_MPS_LOG_DIRECTORY/calls"
    sleep 300 >/dev/null 2>&1 </dev/null & echo $! >"$pid"
else
    read -r cmd; echo "$cmd" >>"$CUDA_MPS_LOG_DIRECTORY/calls"; kill "$(cat "$pid")"; rm -f "$pid"
fi
"""


def test_mps_server_is_shared_by_the_users_jobs_on_a_gpu_and_the_last_client_stops_it(tmp_path, monkeypatch):
    """Lifecycle with a stand-in for nvidia-cuda-mps-control (no GPU here): the first packable job starts
    the server for its GPUs, a partner joins it, the server outlives the first and stops with the last."""
    from tesserae_slurm.harness.mps import join_mps, leave_mps

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-cuda-mps-control"
    fake.write_text(_FAKE_MPS)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    base = str(tmp_path / "mps")
    first = join_mps("1", (2,), 0, "n1", base=base, available=(True, ""))
    second = join_mps("2", (2,), 50, "n1", base=base, available=(True, ""))
    other_gpu = join_mps("3", (3,), 0, "n1", base=base, available=(True, ""))
    assert first.record["started_server"] and not second.record["started_server"]
    assert other_gpu.record["started_server"]  # one server per GPU (and user)
    assert first.env["CUDA_MPS_PIPE_DIRECTORY"] == second.env["CUDA_MPS_PIPE_DIRECTORY"]
    assert first.env["CUDA_VISIBLE_DEVICES"] == "0" and second.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    calls = first.root / "log" / "calls"
    assert calls.read_text().splitlines() == ["start 2"]  # the server sees the job's physical GPU
    pid = int((first.root / "pipe" / "nvidia-cuda-mps-control.pid").read_text())
    assert leave_mps(first) is False  # the partner still runs
    os.kill(pid, 0)
    assert leave_mps(second) is True
    assert calls.read_text().splitlines() == ["start 2", "quit"]
    assert leave_mps(other_gpu) is True


def test_after_the_payload_checkpointed_the_launcher_records_it_and_removes_the_record_on_term(tmp_path):
    """The stop record (harness/stop_record.py) appears once the payload exited after the checkpoint
    signal, names this job and run, and is gone when the requeue-hold's TERM ends the launcher."""
    stops, signals, out = tmp_path / "stops", tmp_path / "signals", tmp_path / "payload.txt"
    stops.mkdir()
    signals.write_text("")
    a = Assignment("91", 4, {"nodeX": (0,)}, extra={STOPS_KEY: str(stops)})
    env = {**_launch_env(tmp_path, TESSERAE_SIGNAL_FILE=str(signals), TESSERAE_REQUEUE_WAIT="60",
                         SLURM_RESTART_COUNT="2"), "TESSERAE_ASSIGNMENT": a.encode()}
    proc = subprocess.Popen([sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable, "-c",
                             _LATE_HANDLER, str(out), "0"], env=env, stderr=subprocess.PIPE, text=True)
    record = stops / "91.2.stopped"
    deadline = time.time() + 30
    while not (out.exists() and out.read_text() == "listening"):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    assert not record.exists()  # running: nothing to record
    with signals.open("a") as fh:
        fh.write("USR1\n")
    while not record.exists():
        assert time.time() < deadline and proc.poll() is None, "no stop record after the checkpoint"
        time.sleep(0.05)
    body = json.loads(record.read_text())
    assert (body["v"], body["job"], body["restart"], body["exit"]) == (1, "91", 2, 0)
    assert out.read_text() == "checkpointed" and proc.poll() is None  # the launcher outlives the payload
    with signals.open("a") as fh:
        fh.write("TERM\n")
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert not record.exists()


def test_no_stop_record_when_the_launcher_will_not_wait_or_the_daemon_did_not_ask(tmp_path):
    """A launcher that ends with its payload (requeue wait 0) must not ask for a requeue-hold: the job
    has ended; and without a directory in the assignment there is nothing to write."""
    stops, signals = tmp_path / "stops", tmp_path / "signals"
    stops.mkdir()
    for wait, extra in (("0", {STOPS_KEY: str(stops)}), ("1", {})):
        signals.write_text("USR1\n")
        a = Assignment("92", 1, {"nodeX": (0,)}, extra=extra)
        env = {**_launch_env(tmp_path, TESSERAE_SIGNAL_FILE=str(signals), TESSERAE_REQUEUE_WAIT=wait),
               "TESSERAE_ASSIGNMENT": a.encode()}
        proc = subprocess.run([sys.executable, "-m", "tesserae_slurm.harness", "launch", "--", sys.executable, "-c",
                               _LATE_HANDLER, str(tmp_path / "out.txt"), "0"], env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert list(stops.iterdir()) == [], (wait, extra)
