"""Operators' actions on the real dev cluster: hold/release, drain/resume, requeue, cancel, pin/keep-off/unpin,
each taking effect at the next round and recorded with who and when (`explain`); non-operators refused in one line,
by the command and by the daemon (which trusts the request file's owner)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.site.load import load_config

from .helpers import BIN, Env, submit_tick, wait_for

pytestmark = pytest.mark.slurm_live


def _act(env: Env, *args: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
    config = env.config
    if user:  # a copy `nobody` can read (pytest's tmp dirs are root-only): the refusal must come from the check
        shared = Path(tempfile.mkdtemp(prefix="tesserae-op-"))
        shared.chmod(0o755)
        config = shared / "tesserae.yaml"
        shutil.copy(env.config, config)
        config.chmod(0o644)
    argv = [str(BIN / "tesserae"), *args, "--config", str(config)]
    if user:
        argv = ["setpriv", f"--reuid={user}", "--regid=65534", "--clear-groups", *argv]
    try:
        return subprocess.run(argv, env=env.os_env(), capture_output=True, text=True, timeout=60, check=False)
    finally:
        if user:
            shutil.rmtree(config.parent)


def _once(env: Env) -> None:
    p = env.daemon_cli("--once")
    assert p.returncode == 0, p.stderr


def _row(env: Env, job: str):
    return env.store().job(job)


def _rounds_until(env: Env, cond, what: str) -> None:  # noqa: ANN001
    wait_for(cond, 90, what, tick=lambda: _once(env))


def _running(env: Env, job: str) -> bool:
    return _row(env, job).state == "RUNNING"


def test_operator_actions_take_effect_at_the_next_round_and_are_recorded(env: Env) -> None:
    env.write_config(scheduler={"round_seconds": 2}, preemption={"grace_seconds": 10})
    a, b = (submit_tick(env, 2, 100000, name=f"op{i}", step_time=0.05) for i in range(2))
    _once(env)
    _rounds_until(env, lambda: _running(env, a) and _running(env, b), "both jobs to run")

    # hold: said to take effect at the next round; then the running job is stopped and stays unplaced
    out = _act(env, "hold", a)
    assert out.returncode == 0, out.stderr
    assert f"job {a} will be held at the daemon's next round" in out.stdout and "recorded as root" in out.stdout
    assert _row(env, a).state == "RUNNING"  # nothing happened yet
    _once(env)
    assert not _running(env, a) and _running(env, b)
    _rounds_until(env, lambda: _row(env, a).state == "PENDING", "the held job to be stopped")
    _once(env)
    row = _row(env, a)
    assert row.state == "PENDING" and not row.gpus and "held by root with `tesserae hold`" in row.reason, row.reason
    ex = env.tesserae("explain", a)
    assert ex.returncode == 0 and "operator actions:" in ex.stdout, ex.stdout
    assert re.search(r"root: hold \[accepted, round \d+\]", ex.stdout), ex.stdout
    assert json.loads(env.tesserae("explain", a, "--json").stdout)["admin"][0]["user"] == "root"

    # release: placed again at the next round
    assert _act(env, "release", a).returncode == 0
    _rounds_until(env, lambda: _running(env, a), "the released job to run")

    # drain the node b runs on: b moves off it, Slurm's node state stays as it was
    node = _row(env, b).nodes.split(",")[0]
    assert _act(env, "drain", node).returncode == 0
    _rounds_until(env, lambda: node not in _row(env, b).nodes.split(",") and _running(env, b), "b to move off")
    assert node not in _row(env, b).nodes.split(",") and node not in _row(env, a).nodes.split(","), \
        (_row(env, a).nodes, _row(env, b).nodes)
    state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], env=env.os_env(), capture_output=True,
                           text=True, timeout=30, check=True).stdout.strip()
    assert "drain" not in state, state
    assert _act(env, "resume", node).returncode == 0
    _once(env)

    # requeue: checkpoint-signalled, requeued, placed again by the policy (a job that is not running is refused)
    _rounds_until(env, lambda: _running(env, b), "b to run before the requeue")
    assert _act(env, "requeue", b).returncode == 0
    _rounds_until(env, lambda: any(x.kind == "requeue" for x in env.store().actions(job_id=b)), "the requeue")
    acts = env.store().actions(job_id=b)
    assert any(x.kind == "requeue" and x.status == "done" for x in acts), [(x.kind, x.status) for x in acts]
    ex = env.tesserae("explain", b, "--json")
    assert [(x["command"], x["status"]) for x in json.loads(ex.stdout)["admin"]] == [("requeue", "done")]

    # cancel
    assert _act(env, "cancel", a).returncode == 0
    _once(env)
    wait_for(lambda: env.squeue().get(a, {}).get("state", "CANCELLED") == "CANCELLED", 30, "the cancel")

    # a non-operator: refused by the command in one line ...
    out = _act(env, "hold", b, user="nobody")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "nobody is not a tesserae operator" in out.stderr
    # ... and by the daemon, for a request file `nobody` owns
    cfg = load_config(env.config)
    path = admin.submit(cfg, "hold", b)
    os.chown(path, 65534, 65534)
    _once(env)
    rows = [r for r in env.store().admin_actions(target=b) if r.command == "hold"]
    assert [(r.user, r.status) for r in rows] == [("nobody", "refused")] and "not an operator" in rows[0].note
    _rounds_until(env, lambda: _running(env, b), "b to run again")
    _once(env)
    assert _running(env, b)  # the refused hold did nothing
    assert os.listdir(admin.requests_dir(cfg)) == []  # every request taken in


def test_keep_off_moves_a_running_job_and_a_pinned_job_lands_on_its_node(env: Env) -> None:
    env.write_config(scheduler={"round_seconds": 2}, preemption={"grace_seconds": 10})
    a, b = (submit_tick(env, 2, 100000, name=f"pin{i}", step_time=0.05) for i in range(2))
    _once(env)
    _rounds_until(env, lambda: _running(env, a) and _running(env, b), "both jobs to run")

    def nodes(job: str) -> set[str]:
        return set(_row(env, job).nodes.split(","))

    assert nodes(a) == nodes(b) and len(nodes(a)) == 1, (nodes(a), nodes(b))  # best fit: one node of 4 GPUs
    (here,) = nodes(a)
    (other,) = {"node1", "node2"} - {here}

    # keep-off: said to take effect at the next round; then b runs elsewhere, a stays
    out = _act(env, "keep-off", b, here)
    assert out.returncode == 0, out.stderr
    assert f"job {b} will be kept off {here} at the daemon's next round" in out.stdout, out.stdout
    assert nodes(b) == {here}  # nothing happened yet
    _rounds_until(env, lambda: _running(env, b) and nodes(b) == {other}, "b to move off the node it is kept off")
    assert nodes(a) == {here} and _running(env, a)

    # pin, in Slurm hostlist syntax: a moves to the pinned node (beside b), and stays there
    pinned = f"node[{other.removeprefix('node')}]"
    out = _act(env, "pin", a, pinned)
    assert out.returncode == 0 and f"job {a} will be pinned to {pinned}" in out.stdout, (out.stdout, out.stderr)
    _rounds_until(env, lambda: _running(env, a) and nodes(a) == {other}, "a to land on its pinned node")
    _once(env)
    assert nodes(a) == nodes(b) == {other} and _running(env, a) and _running(env, b)
    ex = env.tesserae("explain", a)
    assert re.search(rf"root: pin {re.escape(pinned)} \[accepted, round \d+\]", ex.stdout), ex.stdout
    assert [(x["command"], x["nodes"]) for x in json.loads(env.tesserae("explain", a, "--json").stdout)["admin"]] \
        == [("pin", pinned)]

    # unpin is recorded; a non-operator is refused in one line and nothing changes
    assert _act(env, "unpin", b).returncode == 0
    out = _act(env, "pin", b, here, user="nobody")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "nobody is not a tesserae operator" in out.stderr
    _once(env)
    assert [r.command for r in env.store().admin_actions(target=b)] == ["keep-off", "unpin"]
    assert nodes(a) == nodes(b) == {other}


def test_unknown_or_ended_job_and_bad_node_are_refused_in_one_line(env: Env) -> None:
    _once(env)
    for args, msg in ((("hold", "99999999"), "is not a tesserae job"), (("drain", "bad/node"), "not a node name"),
                      (("cancel", "x1"), "job id must be a number")):
        out = _act(env, *args)
        assert out.returncode == 2 and msg in out.stderr and out.stderr.count("\n") == 1, out.stderr
