"""`tesserae devcluster compare` end to end on its own small dev cluster: four tiny jobs under plain Slurm
and under the daemon, and a report whose numbers agree with each other (docs/devcluster.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tesserae_slurm.devcluster import DevCluster
from tesserae_slurm.site.config import SiteConfig

pytestmark = pytest.mark.slurm_live


@pytest.fixture
def cluster_dir() -> Iterator[Path]:
    # Its own cluster (a plain partition beside the managed one), under /tmp: a munge socket path is short.
    root = Path(tempfile.mkdtemp(prefix="tesserae-cmp-", dir="/tmp"))
    try:
        yield root
    finally:
        DevCluster(root).down()  # the command downs what it brought up; this covers a run killed midway
        shutil.rmtree(root, ignore_errors=True)


def test_compare_runs_both_modes_and_reports_consistently(cluster_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "tesserae_slurm.cli.main", "devcluster", "compare", "--dir", str(cluster_dir),
         "--nodes", "2", "--gpus", "2", "--jobs", "4", "--seed", "1", "--min-duration", "2", "--max-duration", "3",
         "--mean-gap", "0.5", "--round-seconds", "1", "--grace-seconds", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=150, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not (cluster_dir / "devcluster-state.json").exists() or not json.loads(
        (cluster_dir / "devcluster-state.json").read_text())["pids"], "compare left its cluster running"
    data = json.loads((out / "report.json").read_text())
    jobs = {j["name"]: j for j in data["jobs"]}
    assert len(jobs) == 4 and list(data["modes"]) == ["plain", f"daemon:{SiteConfig().scheduler.policy}"]
    for mode, run in data["modes"].items():
        s, rows = run["summary"], run["jobs"]
        assert s["jobs"] == s["completed"] == 4, (mode, rows)
        assert len({r["job_id"] for r in rows}) == 4
        first_submit = min(r["submit"] for r in rows)
        for r in rows:
            job = jobs[r["name"]]
            assert r["state"] == "COMPLETED" and r["run_nodes"], (mode, r)
            assert 0 <= r["queueing"] and r["jct"] >= r["queueing"] + job["duration_s"] - 0.5, (mode, r)
            assert r["end"] - first_submit <= s["makespan_s"] + 1e-6
            assert r["submit"] - first_submit >= job["arrival_s"] - 0.05  # the arrival offsets were kept
            assert all(n == 1 for n in r["run_nodes"]) or r["gpus"] > 1  # a 1-GPU run is on one node
        assert s["makespan_s"] >= s["max_jct_s"] > 0 and s["max_jct_s"] >= s["avg_jct_s"] > 0
        assert s["avg_jct_s"] == pytest.approx(sum(r["jct"] for r in rows) / 4)
        assert s["runs"] >= 4
    plain = data["modes"]["plain"]
    assert all(r["restarts"] == 0 and r["preemptions"] == 0 for r in plain["jobs"])  # Slurm never preempts here
    report = (out / "report.md").read_text()
    assert "| plain | 4/4 |" in report and f"| daemon:{SiteConfig().scheduler.policy} | 4/4 |" in report
