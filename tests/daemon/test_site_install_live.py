"""A site install (scripts/install-site.sh) as a second Unix user meets it: the tools in a venv on the
system's Python outside any home, the daemon run from it as the systemd unit runs it, and a user with
nothing of the test's environment submitting with tsbatch and reading `tesserae jobs` and `explain`
through the daemon's API (the state database is out of the user's reach)."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tesserae_slurm.devcluster.procs import SERVICE_PORTS, pick_free_ports

from .helpers import ROOT, TICK, Env, wait_for

pytestmark = pytest.mark.slurm_live  # host lane: pip installs this checkout (PyPI or the local index)

UNIT = ROOT / "systemd" / "tesserae.service"
SCRIPT = ROOT / "scripts" / "install-site.sh"


@pytest.fixture
def site() -> Iterator[Path]:
    """A fresh site install under a directory every user can traverse (not /opt: tests leave it alone)."""
    root = Path(tempfile.mkdtemp(prefix="tesserae-site-", dir="/tmp"))
    root.chmod(0o755)
    try:
        proc = subprocess.run(["bash", str(SCRIPT), "--prefix", str(root / "venv"), "--bin-dir", str(root / "bin"),
                               "--no-profile"], capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"in {root / 'venv'} (extras: daemon)" in proc.stdout, proc.stdout
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def second_user() -> Iterator[tuple[str, Path]]:
    name = f"tsite{os.getpid() % 100000}"
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, capture_output=True)
    try:
        yield name, Path(pwd.getpwnam(name).pw_dir)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True, check=False)



def test_the_unit_runs_the_site_install() -> None:
    """The unit's ExecStart is the tools the install script links by default, into its default prefix."""
    exec_start = next(line.split("=", 1)[1] for line in UNIT.read_text().splitlines() if line.startswith("ExecStart="))
    text = SCRIPT.read_text()
    prefix = re.search(r"^prefix=(\S+)$", text, re.M)
    assert prefix is not None and exec_start.split()[0] == f"{prefix.group(1)}/bin/tesserae", exec_start


def test_a_second_user_runs_tsbatch_jobs_and_explain_from_the_site_install(
        env: Env, site: Path, second_user: tuple[str, Path]) -> None:
    name, home = second_user
    venv = site / "venv"
    package = subprocess.run([str(venv / "bin" / "python"), "-I", "-c",
                              "import tesserae_slurm; print(tesserae_slurm.__file__)"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert package.startswith(str(venv)), package  # a copy, not an editable link into the checkout
    (port,) = pick_free_ports(1, scan=SERVICE_PORTS)
    config = site / "tesserae.yaml"  # readable by the user; the database (env.tmp, 0700) is not
    cfg = yaml.safe_load(env.config.read_text())
    cfg["http"] = {"listen": f"127.0.0.1:{port}"}
    cfg["scheduler"]["round_seconds"] = 1
    config.write_text(yaml.safe_dump(cfg))
    config.chmod(0o644)
    log = env.tmp / "daemon.log"
    with log.open("w") as fh:
        daemon = subprocess.Popen([str(venv / "bin" / "tesserae"), "daemon", "--config", str(config)],
                                  env={**env.cluster.env(), "PATH": "/usr/bin:/bin", "HOME": str(env.tmp)},
                                  stdout=fh, stderr=subprocess.STDOUT)

    def as_user(*argv: str) -> subprocess.CompletedProcess[str]:
        """The user's login as the docs set it up: the site's bin on PATH, the site config, nothing else."""
        return subprocess.run(["runuser", "-u", name, "--", "env", "-i", f"HOME={home}", f"USER={name}",
                               f"PATH={site / 'bin'}:/usr/bin:/bin", f"SLURM_CONF={env.cluster.slurm_conf}",
                               f"TESSERAE_CONFIG={config}", f"TESSERAE_PYTHON={venv / 'bin' / 'python'}", *argv],
                              cwd=home, capture_output=True, text=True, timeout=120, check=False)

    def api(path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return json.loads(r.read())

    job = ""
    try:
        out = home / "out"
        assert as_user("mkdir", str(out)).returncode == 0
        sub = as_user("tsbatch", "--parsable", "--gpus", "1", "--no-profile", "-J", "sitejob",
                      "-o", f"{home}/%j.out", str(TICK), str(out), "600", "0.1")
        assert sub.returncode == 0, sub.stderr
        job = sub.stdout.strip()
        assert job.isdigit(), sub.stdout

        def running() -> bool:
            assert daemon.poll() is None, log.read_text()[-3000:]
            try:
                jobs = api(f"/api/jobs?jobs={job}")["jobs"]
            except OSError:
                return False
            return bool(jobs) and jobs[0]["state"] == "RUNNING"

        # the site's first round compiles the placement cores (numba, no cache yet in the fresh venv)
        wait_for(running, 240, f"the second user's job {job} to run under the site's daemon", every=0.5,
                 explain=lambda: log.read_text()[-3000:])
        listed = as_user("tesserae", "jobs")
        assert listed.returncode == 0, listed.stderr
        # squeue's columns: USER cut to 8 characters, state R
        assert re.search(rf"^\s*{job}\s+sitejob\s+{re.escape(name[:8])}\s+R\s", listed.stdout, re.M), listed.stdout
        explained = as_user("tesserae", "explain", job)
        assert explained.returncode == 0, explained.stderr
        assert explained.stdout.startswith(f"job {job} 'sitejob' ({name}): RUNNING on node"), explained.stdout
        denied = as_user("cat", str(env.db))
        assert denied.returncode != 0  # the answers above came through the API, not the database
    finally:
        if job:
            subprocess.run(["scancel", job], env=env.os_env(), capture_output=True, timeout=30, check=False)
        daemon.terminate()
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
