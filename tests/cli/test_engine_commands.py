"""`tesserae plan / migrate / bench decision`: JSON schemas of docs/formats.md and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tesserae_slurm.cli.demo_cmd import example_path
from tesserae_slurm.cli.main import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_json_on_the_shipped_example(capsys):
    code, out, _ = run_cli(capsys, "plan", example_path("state.json"), "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d) >= {"placement", "started", "preempted", "migrated", "kept", "migrations", "migration_cost",
                      "packed", "pending", "strategies", "speeds", "timings_ms"}
    state = json.load(open(example_path("state.json")))
    ids = {j["id"] for j in state["jobs"]}
    placed = {j for gpus in d["placement"]["nodes"].values() for slot in gpus for j in slot}
    assert placed | {p["job"] for p in d["pending"]} == ids
    assert d["migrations"] == len(d["migrated"])
    for p in d["packed"]:
        assert p["weight"] == pytest.approx(p["placed_speed"] + p["partner_speed"])
    # the no-pack job runs alone
    assert all("106" not in (p["placed"], p["partner"]) for p in d["packed"])


def test_plan_table(capsys):
    code, out, _ = run_cli(capsys, "plan", example_path("state.json"))
    assert code == 0 and "PACKED_WITH" in out and "migrations:" in out


def test_migrate_json(capsys):
    code, out, _ = run_cli(capsys, "migrate", example_path("old.json"), example_path("new.json"), "--json")
    d = json.loads(out)
    assert code == 0 and d["algorithm"] == "tesserae"
    assert (d["migrations"], d["cost"], d["migrated_jobs"]) == (0, 0, [])
    code, out, _ = run_cli(capsys, "migrate", example_path("old.json"), example_path("new.json"),
                           "--algorithm", "gavel", "--json")
    g = json.loads(out)
    assert g["migrations"] == len(g["migrated_jobs"]) > 0 and g["cost"] > 0


@pytest.mark.parametrize("content,message", [
    ('{"nodes": {"a": [["1"], ["2", "3", "4"]]}}', "holds 3 jobs"),
    ('{"nodes": {"a": [["1"], ["2"], []]}}', "shape mismatch"),
    ('{"nodes": ', "malformed JSON"),
    ('{"nodes": {"a": "x"}}', "must be a list"),
], ids=["gpu-over-two", "shape", "malformed", "not-a-list"])
def test_migrate_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    old = tmp_path / "old.json"
    old.write_text('{"nodes": {"a": [["1"], ["2"]]}}')
    new = tmp_path / "new.json"
    new.write_text(content)
    code, out, err = run_cli(capsys, "migrate", str(old), str(new))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and err.startswith("tesserae migrate: error:")


@pytest.mark.parametrize("state,message", [
    ({"cluster": "2x4", "jobs": [{"id": "1", "num_gpus": 1, "model": "resnet50", "batch_size": "32"}],
      "current": {"nodes": {"node9": [[], [], [], []]}}}, "unknown node"),
    ({"cluster": "2x4", "jobs": [{"id": "1", "num_gpus": 1, "model": "nope"}]}, "unknown model"),
    ({"cluster": "2x4", "jobs": [], "packing": "maybe"}, "packing must be one of"),
    ({"cluster": "2x4", "jobs": [{"id": "1", "num_gpus": 1, "model": "resnet50", "colour": 1}]}, "unknown keys"),
    ({"cluster": "2x4x", "jobs": []}, "bad cluster spec"),
    ({"cluster": "2x4", "jobs": [], "moves": "maybe"}, "moves must be true"),
], ids=["unknown-node", "unknown-model", "bad-packing", "unknown-key", "bad-cluster", "bad-moves"])
def test_plan_bad_input(tmp_path, capsys, state, message):
    f = tmp_path / "state.json"
    f.write_text(json.dumps(state))
    code, out, err = run_cli(capsys, "plan", str(f))
    assert code == 2 and err.count("\n") == 1 and message in err


def test_plan_replays_a_recorded_round_and_the_papers_plan_on_request(tmp_path, capsys):
    """--request reads a round's recorded inputs (a line of bench moves' rounds.jsonl); "moves": false
    plans as the paper does, whatever a move costs."""
    from pathlib import Path

    line = (Path(__file__).parents[1] / "placement" / "fixtures" / "moves_dev_before.jsonl").read_text().splitlines()
    rec = json.loads(line[-2])  # round 19: the paper's plan moved job 32 for nothing
    f = tmp_path / "round.json"
    f.write_text(json.dumps(rec))
    code, out, _ = run_cli(capsys, "plan", str(f), "--request", "--json")
    assert code == 0 and json.loads(out)["migrated"] == rec["decision"]["migrated"] == ["32"]
    jobs = [{"id": "a", "num_gpus": 2, "model": "resnet50", "batch_size": "32"},
            {"id": "b", "num_gpus": 1, "model": "resnet50", "batch_size": "32"},
            {"id": "c", "num_gpus": 1, "model": "resnet50", "batch_size": "32"},
            {"id": "d", "num_gpus": 1, "model": "resnet50", "batch_size": "32"}]
    state = {"cluster": "3x4", "jobs": [jobs[i] for i in (0, 3, 2, 1)], "packing": "off",
             "current": {"nodes": {"node1": [["a"], ["a"], ["b"], ["c"]], "node2": [["d"], [], [], []],
                                   "node3": [[], [], [], []]}}}
    f.write_text(json.dumps(state))
    assert json.loads(run_cli(capsys, "plan", str(f), "--json")[1])["migrated"] == []
    f.write_text(json.dumps({**state, "moves": False}))
    assert sorted(json.loads(run_cli(capsys, "plan", str(f), "--json")[1])["migrated"]) == ["b", "d"]


def test_bench_decision_json(capsys):
    code, out, _ = run_cli(capsys, "bench", "decision", "--gpus", "16", "--jobs", "64", "--repeats", "2", "--json")
    d = json.loads(out)
    assert code == 0 and d["median_ms"] > 0 and set(d["stages"]) >= {"placement", "packing", "migration"}


def test_console_script_has_no_traceback_on_error(tmp_path):
    """The installed entry point, as a user runs it: one line, exit 2."""
    bad = tmp_path / "bad.json"
    bad.write_text("[")
    proc = subprocess.run([sys.executable, "-m", "tesserae_slurm.cli.main", "plan", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_launch_subcommand_pins_the_assigned_gpus(tmp_path):
    """`tesserae launch -- CMD`: the job-side launcher reached through the main CLI."""
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "n1",
           "TESSERAE_ASSIGNMENT": 'tesserae-assign:{"g":{"n1":[2,3]},"j":"5","r":1}'}
    proc = subprocess.run([sys.executable, "-m", "tesserae_slurm.cli.main", "launch", "--",
                           "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "2,3"
