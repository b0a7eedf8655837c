"""`tesserae bench daemon-scale --world generated` at a small size: the generated 22.05 output goes through the
real parser, the daemon's rounds agree with the generated Slurm, and the calls are batched. Not timing."""

from __future__ import annotations

import json
from collections import Counter

from tesserae_slurm.bench.daemon_scale import PHASES, markdown, perlmutter_jobs, run_generated
from tesserae_slurm.bench.generated_slurm import GeneratedSlurm
from tesserae_slurm.cli.main import main
from tesserae_slurm.daemon.state.store import Store
from tesserae_slurm.model.meta import JobMeta
from tesserae_slurm.slurm import SlurmCliBackend, SlurmJobState


def test_generated_output_reads_back_through_the_cli_backend_and_follows_the_daemons_commands() -> None:
    slurm = GeneratedSlurm(nodes=3)
    for j in perlmutter_jobs(5, 100, seed=1):
        slurm.submit(j)
    backend = SlurmCliBackend(runner=slurm)  # type: ignore[arg-type]
    assert backend.slurm_version() == (22, 5)
    jobs = {j.job_id: j for j in backend.list_jobs("tesserae")}
    assert sorted(jobs) == [100, 101, 102, 103, 104]
    assert all(j.held and j.state is SlurmJobState.PENDING and JobMeta.decode(j.comment) for j in jobs.values())
    backend.place(101, ["node0002"], {"NumNodes": "1", "AdminComment": "tesserae-assign:x"})
    backend.release([101, 102])  # 102 has no node list: released, not started
    backend.admin_hold([103])
    after = {j.job_id: j for j in backend.list_jobs("tesserae")}
    assert after[101].state is SlurmJobState.RUNNING and after[101].nodes == ("node0002",)
    assert after[101].admin_comment == "tesserae-assign:x"
    assert after[102].state is SlurmJobState.PENDING and not after[102].held
    assert after[103].state_reason == "JobHeldAdmin"
    nodes = {n.name: n for n in backend.list_nodes("tesserae")}
    assert (nodes["node0002"].state, nodes["node0001"].state, nodes["node0002"].gpus) == ("mixed", "idle", 4)
    backend.requeue_hold([101])
    assert {j.job_id: j for j in backend.list_jobs()}[101].restart_count == 1
    assert slurm.calls == Counter({"sinfo --version": 1, "squeue --json": 3, "scontrol update": 1,
                                   "scontrol release": 1, "scontrol hold": 1, "sinfo --json": 1,
                                   "scontrol requeuehold": 1})
    assert json.loads(slurm.run(["squeue", "--json"]))["meta"]["Slurm"]["release"] == "22.05.8"


def test_a_small_generated_run_starts_each_job_once_and_batches_its_calls(tmp_path) -> None:
    report = run_generated(tmp_path, nodes=8, jobs=120, rounds=3, churn=0.25, seed=3)
    assert [s.status for s in report.samples] == ["applied"] * 3
    assert all(set(s.phases_ms) == set(PHASES) and min(s.phases_ms.values()) >= 0 for s in report.samples)
    store = Store.open(tmp_path / "state.db", read_only=True)
    for s in report.samples:
        starts = sum(1 for a in store.actions(s.round_id) if a.kind == "start")
        stops = sum(1 for a in store.actions(s.round_id) if a.kind in ("preempt", "migrate"))
        assert s.calls.get("scontrol update", 0) == starts  # one call per started job
        assert s.calls.get("scontrol release", 0) == (1 if starts else 0)
        assert s.calls.get("scontrol hold", 0) <= 1
        assert s.writes <= s.changed + 1 + stops
    first = report.samples[0]
    assert first.changed == 120 and first.calls["scontrol hold"] == 1  # the whole queue secured in one call
    assert sum(s.calls.get("scontrol update", 0) for s in report.samples[1:]) > 0  # churn: later rounds start jobs
    started = Counter(a.job_id for a in store.actions() if a.kind == "start" and a.status == "done")
    restarted = {a.job_id for a in store.actions() if a.kind in ("preempt", "migrate")}
    assert all(n == 1 for j, n in started.items() if j not in restarted)
    assert report.cli_ms and report.page_ms and report.samples[-1].db_bytes > 0
    table = markdown([report])
    assert "| 3-3 (median) |" in table and "8 x 4" in table


def test_bad_sizes_are_refused_with_one_line(capsys) -> None:
    assert main(["bench", "daemon-scale", "--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert "--jobs" in err and len(err.strip().splitlines()) == 1


def test_the_sweeps_report_keeps_the_hand_written_daemon_section(tmp_path) -> None:
    from tesserae_slurm.bench.report import KEEP_MARK, kept_tail

    doc = tmp_path / "performance.md"
    assert kept_tail(doc) == ""
    doc.write_text("# Performance\nold sweep\n")
    assert kept_tail(doc) == ""
    doc.write_text(f"# Performance\nold sweep\n{KEEP_MARK}\n## The daemon's round\nnumbers\n")
    assert kept_tail(doc) == f"\n{KEEP_MARK}\n## The daemon's round\nnumbers\n"
