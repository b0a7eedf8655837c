"""`tesserae devcluster replay` end to end in miniature: 16 jobs of the paper's trace on a 2 x 4-GPU dev
cluster at 240 trace seconds per wall second, under the daemon and under plain Slurm (docs/devcluster.md).

Every job must complete with exactly its trace work done, across the daemon's preemptions and
migrations (each resume starts from the last checkpoint), and the report's numbers must follow from
the per-job records and from the simulator run on the same plan. The daemon runs tesserae-t-paper, the
paper's plan (every move free): tesserae-t moves a job only when that pays, and on 16 jobs it may stop
none, which would leave the work ledger across a resume untested."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tesserae_slurm.devcluster import DevCluster
from tesserae_slurm.devcluster.replay import deviation, plan_replay, predict, summarize_sim
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.trace_source import resolve_trace

pytestmark = pytest.mark.slurm_live
SCALE, JOBS = 240.0, 16


@pytest.fixture
def cluster_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tesserae-rpl-", dir="/tmp"))  # a munge socket path is short
    try:
        yield root
    finally:
        DevCluster(root).down()  # the command downs what it brought up; this covers a run killed midway
        shutil.rmtree(root, ignore_errors=True)


def test_replay_completes_every_job_conserves_work_and_reports_consistently(cluster_dir: Path, tmp_path: Path):
    out = tmp_path / "replay"
    proc = subprocess.run(
        [sys.executable, "-m", "tesserae_slurm.cli.main", "devcluster", "replay", "--dir", str(cluster_dir),
         "--nodes", "2", "--gpus", "4", "--replay-jobs", str(JOBS), "--scale", str(SCALE),
         "--mode", "daemon:tesserae-t-paper,plain", "--out", str(out)],
        capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (cluster_dir / "devcluster-state.json").exists() or not json.loads(
        (cluster_dir / "devcluster-state.json").read_text())["pids"], "replay left its cluster running"
    data = json.loads((out / "report.json").read_text())
    assert list(data["runs"]) == ["daemon:tesserae-t-paper", "plain"] and data["scale"] == SCALE
    plan_jobs = {j["name"]: j for j in data["jobs"]}
    assert len(plan_jobs) == JOBS
    profile = load_profile("a100")
    trace, name = resolve_trace("gen:tesserae:120:80:0", models="a100")
    plan = plan_replay(trace, name, profile, scale=SCALE, nodes=2, gpus_per_node=4, jobs=JOBS)
    for label, run in data["runs"].items():
        real, rows = run["real"], run["jobs"]
        assert real["jobs"] == real["completed"] == real["work_conserved"] == JOBS, (label, rows)
        first = min(r["submit"] for r in rows)
        for r in rows:
            job = plan_jobs[r["name"]]
            assert r["state"] == "COMPLETED" and r["ledger"] == [], (label, r)
            assert r["work_done"] == pytest.approx(job["work_s"], abs=1e-6)
            assert r["submit"] - first >= job["arrival_s"] - 0.05  # the scaled arrivals were kept
            # no faster than the work alone at 1.0
            assert r["jct_s"] >= job["work_s"] - 1e-6 and r["first_start"] >= r["submit"]
        jct = [r["jct_s"] for r in rows]
        assert real["avg_jct_s"] == pytest.approx(statistics.fmean(jct))
        assert real["makespan_s"] == pytest.approx((max(r["end"] for r in rows) - first) * SCALE)
        assert real["makespan_s"] >= max(jct) - 1e-6
        assert real["preemptions"] == sum(r["preemptions"] for r in rows)
        assert real["migrations"] == sum(r["migrations"] for r in rows)
        # the prediction beside it is the simulator's run of the same plan
        mode, _, policy = label.partition(":")
        sim = summarize_sim(label, predict(plan, mode, policy, profile), 8)
        assert run["predicted"]["avg_jct_s"] == pytest.approx(sim.avg_jct_s)
        assert run["predicted"]["makespan_s"] == pytest.approx(sim.makespan_s)
        dev = f"{deviation(real['avg_jct_s'], sim.avg_jct_s):.1f} %"
        assert f"| {label} | {JOBS}/{JOBS} | {JOBS}/{JOBS} |" in (out / "report.md").read_text()
        assert dev in (out / "report.md").read_text()
    daemon, plain = data["runs"]["daemon:tesserae-t-paper"]["jobs"], data["runs"]["plain"]["jobs"]
    assert any(r["runs"] > 1 for r in daemon), "no job was stopped and resumed: the work ledger went untested"
    assert all(r["runs"] == 1 and r["restarts"] == 0 and r["preemptions"] == 0 for r in plain)
