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

from tesserae_slurm.harness.assignment import Assignment, from_scontrol_oneliner
from tesserae_slurm.harness.launcher import build_command, node_env
from tesserae_slurm.harness.megatron import parse_strategy
from tesserae_slurm.model import InputError

ROOT = Path(__file__).resolve().parents[1]


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
    assert parse_strategy(strategy, gpus).flags() == flags


@pytest.mark.parametrize("strategy,gpus", [("3,3,4,4", 4), ("10,14", 3), ("a,b", 2), ("0,24", 2)],
                         ids=["unequal-middle", "stages-dont-divide", "garbage", "empty-stage"])
def test_megatron_rejects(strategy, gpus):
    with pytest.raises(InputError):
        parse_strategy(strategy, gpus)


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
    env = {**os.environ, "TESSERAE_ASSIGNMENT": a.encode(), "SLURMD_NODENAME": "nodeX", "TMPDIR": str(tmp_path)}
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
