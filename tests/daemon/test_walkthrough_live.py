"""`./dev walkthrough` (scripts/walkthrough.sh) as a newcomer runs it: one command brings up the site
install, a dev cluster, the daemon and jobs from two users; the commands it prints work, `nobody`
included; `down --purge` leaves nothing running."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tesserae_slurm.devcluster.procs import SERVICE_PORTS, pick_free_ports

from .helpers import ROOT, wait_for

pytestmark = pytest.mark.slurm_live  # host lane: pip installs this checkout; a dev cluster of its own



def test_walkthrough_up_shows_two_users_jobs_and_down_ends_it() -> None:
    d = Path(tempfile.mkdtemp(prefix="tesserae-walk-", dir="/tmp"))
    web, metrics = pick_free_ports(2, scan=SERVICE_PORTS)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/root", "TESSERAE_WALKTHROUGH_DIR": str(d),
           "TESSERAE_WALKTHROUGH_WEB": str(web), "TESSERAE_WALKTHROUGH_METRICS": str(metrics)}

    def walk(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ROOT / "dev"), "walkthrough", *argv], env=env, capture_output=True, text=True,
                              timeout=900, check=False)

    try:
        up = walk("up")
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        jobs = re.findall(r"^  job (\d+): \S+, \d GPU\(s\) .*, by (root|nobody)$", up.stdout, re.M)
        assert len(jobs) == 9 and {u for _, u in jobs} == {"root", "nobody"}, up.stdout
        assert f"http://127.0.0.1:{web}/" in up.stdout
        again = walk("up")
        assert again.returncode == 2 and "already up" in again.stderr
        as_nobody = re.search(r"^  as nobody: (runuser .*)$", up.stdout, re.M)
        assert as_nobody is not None, up.stdout
        argv = as_nobody.group(1).split()

        def nobody_sees_jobs_run() -> str:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            assert p.returncode == 0, p.stderr
            # squeue's compact state codes: R for a running job
            return p.stdout if len(re.findall(r"^\s*\d+\s+\S+\s+\S+\s+R\s", p.stdout, re.M)) >= 4 else ""

        listed = wait_for(nobody_sees_jobs_run, 240, "the walkthrough's jobs to run, as nobody sees them",
                          every=2, explain=lambda: (d / "daemon.log").read_text()[-3000:])
        assert re.search(r"^\s*\d+\s+\S+\s+nobody\s+R\s", listed, re.M), listed
        status = walk("status")
        assert status.returncode == 0 and f"page http://127.0.0.1:{web}/" in status.stdout, status.stdout
    finally:
        down = walk("down", "--purge")
    assert down.returncode == 0, down.stderr
    assert "daemon" in down.stdout and "stopped" in down.stdout and not d.exists()
    after = walk("status")
    assert after.returncode == 3 and "not installed" in after.stdout, after.stdout
