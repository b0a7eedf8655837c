"""Job side of online feedback: the reporter's windows and lines, and what the launcher exports."""

from __future__ import annotations

import json

from tesserae_slurm.harness.assignment import EVERY_KEY, REPORTS_KEY, Assignment
from tesserae_slurm.harness.launcher import node_env
from tesserae_slurm.harness.report import ENV_EVERY, ENV_FILE, ThroughputReporter


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_windows_after_the_warmup_window_become_lines(tmp_path):
    clock, path = Clock(), tmp_path / "7.jsonl"
    rep = ThroughputReporter(path, 10.0, "7", 3, clock=clock)
    for _ in range(5):  # warm-up window: 5 steps in 10 s, not reported
        clock.t += 2.0
        rep.step()
    assert not path.exists()
    for _ in range(20):  # two windows of 10 steps in 10 s
        clock.t += 1.0
        rep.step()
    clock.t += 3.0
    rep.step()  # a partial window is not reported
    got = lines(path)
    assert got == [{"v": 1, "job": "7", "round": 3, "t0": 1010.0, "t1": 1020.0, "steps": 10},
                   {"v": 1, "job": "7", "round": 3, "t0": 1020.0, "t1": 1030.0, "steps": 10}]


def test_a_restart_drops_the_window_in_progress(tmp_path):
    """A partner arrived mid-window: the steps before it are not blended into the next line."""
    clock, path = Clock(), tmp_path / "7.jsonl"
    rep = ThroughputReporter(path, 10.0, "7", 3, clock=clock, skip_first=False)
    for _ in range(6):  # alone: 2 steps a second
        clock.t += 0.5
        rep.step()
    rep.restart()
    for _ in range(10):  # packed: 1 step a second
        clock.t += 1.0
        rep.step()
    assert lines(path) == [{"v": 1, "job": "7", "round": 3, "t0": 1003.0, "t1": 1013.0, "steps": 10}]


def test_from_env_only_on_rank_zero_and_when_asked(tmp_path):
    env = {ENV_FILE: str(tmp_path / "9.jsonl"), ENV_EVERY: "30", "SLURM_JOB_ID": "9", "TESSERAE_ROUND": "4"}
    rep = ThroughputReporter.from_env(env)
    assert rep is not None and (rep.every, rep.job, rep.round) == (30.0, "9", 4)
    assert ThroughputReporter.from_env({**env, "RANK": "1"}) is None
    assert ThroughputReporter.from_env({**env, "SLURM_PROCID": "2"}) is None
    assert ThroughputReporter.from_env({k: v for k, v in env.items() if k != ENV_FILE}) is None
    assert ThroughputReporter.from_env({**env, ENV_EVERY: "0"}) is None  # bad interval: no reports, no crash


def test_an_unwritable_report_file_never_stops_training(tmp_path):
    clock = Clock()
    rep = ThroughputReporter(tmp_path / "missing-dir" / "1.jsonl", 1.0, "1", 1, clock=clock, skip_first=False)
    for _ in range(3):
        clock.t += 1.0
        rep.step()
    assert rep.broken


def test_the_launcher_exports_where_and_how_often_to_report():
    a = Assignment("42", 5, {"n1": (0,)}, extra={REPORTS_KEY: "/shared/reports", EVERY_KEY: "60"})
    env = node_env(a, "n1", {})
    assert env[ENV_FILE] == "/shared/reports/42.jsonl" and env[ENV_EVERY] == "60"
    assert ENV_FILE not in node_env(Assignment("42", 5, {"n1": (0,)}), "n1", {})
    assert Assignment.decode(a.encode()) == a  # the daemon's extra keys survive AdminComment
