"""`--log-format json`: one object a line with round / job / action / outcome; the default stays human."""

from __future__ import annotations

import json
import logging

import pytest

from tesserae_slurm.daemon.service.logfmt import JsonFormatter

from .helpers import Env, submit_tick


def _record(msg, *args, **extra):
    r = logging.LogRecord("tesserae_slurm.daemon", logging.INFO, __file__, 1, msg, args, None)
    r.__dict__.update(extra)
    return r


def test_fields_from_extra_and_from_the_wording():
    f = JsonFormatter()
    d = json.loads(f.format(_record("round %d: %s of job %s %s", 7, "start", "123", "done",
                                    round=7, job="123", action="start", outcome="done")))
    assert (d["round"], d["job"], d["action"], d["outcome"], d["level"]) == (7, "123", "start", "done", "INFO")
    assert d["message"] == "round 7: start of job 123 done" and d["time"].endswith("+00:00")
    d = json.loads(f.format(_record("round %d %s: %d started", 12, "applied", 3)))
    assert (d["round"], d["outcome"]) == (12, "applied") and "job" not in d and "action" not in d
    d = json.loads(f.format(_record('quote " and\nnewline in job %s', "55_3")))
    assert d["job"] == "55_3" and "\n" in d["message"]  # still one line: JSON escapes it
    assert "\n" not in f.format(_record('quote " and\nnewline'))


@pytest.mark.slurm_live
def test_the_daemon_logs_json_lines_with_round_job_action_outcome(env: Env) -> None:
    jobs = [submit_tick(env, 2, 200, name=f"lj{i}") for i in range(2)]
    proc = env.daemon_cli("--once", "--log-format", "json")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stderr.splitlines()]  # every line is one JSON object
    starts = [d for d in lines if d.get("action") == "start"]
    assert {d["job"] for d in starts} == set(jobs), lines
    assert all(d["outcome"] == "done" and d["round"] == 1 for d in starts)
    assert any(d.get("round") == 1 and d.get("outcome") == "applied" for d in lines), lines
    human = env.daemon_cli("--once")
    assert human.returncode == 0 and human.stderr.startswith("INFO tesserae_slurm.daemon: "), human.stderr
