"""What users and operators see on the real dev cluster, as root and as a second Unix user (`nobody`): a new
job shown at once, before the daemon's first look; explain naming Slurm when root held or cancelled a job
outside the daemon; operators' requests refused when they do not fit and logged as they take effect; the
state made 0750/0640 by a daemon started outside systemd, and every read command through the API for a
user who cannot read it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tesserae_slurm.daemon.operators import admin
from tesserae_slurm.daemon.operators.readers import FIRST_LOOK, FirstLook
from tesserae_slurm.daemon.operators.web import serve
from tesserae_slurm.site.connect import backend_from_config
from tesserae_slurm.site.load import load_config

from .helpers import BIN, Env, submit_tick, wait_for

pytestmark = pytest.mark.slurm_live
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def shared(env: Env) -> Iterator[Path]:
    """A config every user may read, its state in a directory the daemon makes (under a 0755 one)."""
    d = Path(tempfile.mkdtemp(prefix="tesserae-view-"))
    d.chmod(0o755)
    cfg = yaml.safe_load(env.config.read_text())
    cfg["state"]["database"] = str(d / "state" / "state.db")
    cfg["http"]["listen"] = "127.0.0.1:0"
    (d / "tesserae.yaml").write_text(yaml.safe_dump(cfg))
    (d / "tesserae.yaml").chmod(0o644)
    env.config = d / "tesserae.yaml"
    env.db = d / "state" / "state.db"
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _run(env: Env, *argv: str, user: bool = False, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [*(NOBODY if user else []), str(BIN / "tesserae"), *argv, "--config", str(config or env.config)]
    return subprocess.run(cmd, env={**env.os_env(), "HOME": "/tmp"}, capture_output=True, text=True, timeout=60,
                          check=False, cwd="/")


def _once(env: Env) -> subprocess.CompletedProcess[str]:
    p = env.daemon_cli("--once", "--log-format", "json")
    assert p.returncode == 0, p.stderr
    return p


def _web(env: Env, shared: Path) -> tuple[object, Path]:
    """The daemon's page and API on a free port, and a config that names it (for the second user)."""
    cfg = load_config(env.config, check_policy=False)
    server = serve(cfg.state.database, "127.0.0.1:0", FirstLook(cfg, backend_from_config(cfg, env.cluster.env())))
    body = yaml.safe_load(env.config.read_text())
    body["http"]["listen"] = f"127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    path = shared / "web.yaml"
    path.write_text(yaml.safe_dump(body))
    path.chmod(0o644)
    return server, path


def test_state_modes_first_look_and_every_read_through_the_api(env: Env, shared: Path) -> None:
    old = os.umask(0o022)  # as a shell would start it outside systemd
    try:
        _once(env)
    finally:
        os.umask(old)
    assert stat.S_IMODE(env.db.parent.stat().st_mode) == 0o750
    assert stat.S_IMODE(env.db.stat().st_mode) == 0o640
    unreadable = subprocess.run([*NOBODY, "cat", str(env.db)], capture_output=True, text=True, check=False)
    assert unreadable.returncode != 0

    job = submit_tick(env, 2, 100000, name="fresh", step_time=0.05)
    # before the daemon looks: shown at once, with what squeue knows
    mine = _run(env, "jobs", "-j", job, "-o", "%i|%u|%j|%b|%T|%r")
    assert mine.returncode == 0, mine.stderr
    jid, user, name, gpus, state, why = mine.stdout.splitlines()[1].split("|")
    assert (jid, user, name, gpus, state) == (job, "root", "fresh", "2", "PENDING") and why.startswith(FIRST_LOOK)
    ex = _run(env, "explain", job)
    assert ex.returncode == 0 and FIRST_LOOK in ex.stdout, ex.stderr
    server, web = _web(env, shared)
    try:
        for argv in (["jobs", "-j", job, "-l"], ["explain", job]):  # the second user, through the API
            theirs = _run(env, *argv, user=True, config=web)
            assert theirs.returncode == 0 and FIRST_LOOK in theirs.stdout, theirs.stderr
        _once(env)
        for argv in (["jobs", "-l"], ["rounds"], ["round", "show", "last"], ["explain", job], ["actions"]):
            theirs = _run(env, *argv, user=True, config=web)
            assert theirs.returncode == 0, (argv, theirs.stderr)
            if argv[0] not in ("jobs", "explain"):  # (times move on; the others are the same records)
                assert theirs.stdout == _run(env, *argv).stdout, argv
        assert FIRST_LOOK not in _run(env, "explain", job).stdout  # looked at now
        # NODES as squeue shows it: the placed job's node, and the count a waiting one asked for (8 GPUs on
        # 4-GPU nodes: 2), before the daemon's look too
        wide = submit_tick(env, 8, 100000, name="wide", step_time=0.05)
        ours = _run(env, "jobs", "-j", f"{job},{wide}", "-o", "%i %D", "-h")
        theirs = subprocess.run(["squeue", "-h", "-j", f"{job},{wide}", "-o", "%i %D"], env=env.os_env(),
                                capture_output=True, text=True, timeout=30, check=True)
        assert sorted(ours.stdout.split()) == sorted(theirs.stdout.split()), (ours.stdout, theirs.stdout)
        assert f"{wide} 2" in ours.stdout and f"{job} 1" in ours.stdout, ours.stdout
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]

    # a world-readable database: refused in one line
    env.db.chmod(0o644)
    p = env.daemon_cli("--once")
    assert p.returncode == 2 and "readable by every user" in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_explain_names_slurm_when_root_holds_requeues_or_cancels_outside_the_daemon(env: Env, shared: Path) -> None:
    a, b = (submit_tick(env, 2, 100000, name=f"out{i}", step_time=0.05) for i in range(2))
    _once(env)
    wait_for(lambda: env.store().job(a).state == "RUNNING" and env.store().job(b).state == "RUNNING", 90,
             "both jobs to run", tick=lambda: _once(env))
    # root holds a running job by hand (Slurm 22.05 takes it and lets the job run on)
    subprocess.run(["scontrol", "hold", a], env=env.os_env(), check=True, capture_output=True, timeout=30)
    _once(env)
    e = json.loads(_run(env, "explain", a, "--json").stdout)
    assert e["state"] == "RUNNING" and e["cause"]["by"] == "slurm", e
    assert "scontrol hold" in e["cause"]["why"] and "it runs on" in e["cause"]["why"], e["cause"]
    assert e["cause"]["undo"] == f"`scontrol release {a}`"
    assert "why running: slurm: held in Slurm by an administrator" in _run(env, "explain", a).stdout
    # root requeues b held: the daemon says it saw that done outside it (Slurm), and places b again
    subprocess.run(["scontrol", "requeuehold", b], env=env.os_env(), check=True, capture_output=True, timeout=30)
    wait_for(lambda: any(ev.get("cause") == "slurm" for ev in json.loads(_run(env, "explain", b, "--json").stdout)
                         ["events"]), 60, "the requeue to be seen", tick=lambda: _once(env))
    assert "(slurm)" in _run(env, "explain", b).stdout
    # cancelled by hand: Slurm, not an operator's `tesserae cancel`
    subprocess.run(["scancel", b], env=env.os_env(), check=True, capture_output=True, timeout=30)
    wait_for(lambda: env.store().job(b).state == "CANCELLED", 60, "the cancel to be seen", tick=lambda: _once(env))
    e = json.loads(_run(env, "explain", b, "--json").stdout)
    assert e["cause"]["by"] == "slurm" and "cancelled in Slurm outside tesserae" in e["cause"]["why"], e


def test_requests_that_do_not_fit_are_refused_and_the_rest_logged(env: Env, shared: Path) -> None:
    job = submit_tick(env, 2, 100000, name="req", step_time=0.05)
    _once(env)
    requests = admin.requests_dir(load_config(env.config, check_policy=False))
    for argv, message in ((["drain", "node99"], "no node node99 in partition tesserae (its nodes: node1, node2)"),
                          (["pin", job, "node[2-3]"], "no node node3"),
                          (["release", job], f"job {job} is not held with `tesserae hold`"),
                          (["hold", "99999999"], "job 99999999 is not a tesserae job")):
        p = _run(env, *argv)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and message in p.stderr, (argv, p.stderr)
    assert os.listdir(requests) == []
    wait_for(lambda: env.store().job(job).state == "RUNNING", 60, "the job to run", tick=lambda: _once(env))
    p = _run(env, "drain", "node1")
    assert p.returncode == 0 and "rounds began every" in p.stdout, (p.stdout, p.stderr)
    log = [json.loads(line) for line in _once(env).stderr.splitlines() if line.startswith("{")]
    taken = [x for x in log if x.get("action") == "operator-drain"]
    assert taken and taken[0]["outcome"] == "accepted" and "drain node node1" in taken[0]["message"], log
    listed = _run(env, "actions").stdout.splitlines()
    assert listed[1].split()[:3] == ["drain", "node1", "root"], listed
    p = _run(env, "drain", "node1")
    assert p.returncode == 2 and "already drained" in p.stderr, p.stderr
