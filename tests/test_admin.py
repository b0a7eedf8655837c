"""Admin CLI over a state database written by the daemon's own journal (no Slurm needed)."""

from __future__ import annotations

import hashlib
import json

import pytest

from tesserae_slurm.cli.main import main
from tesserae_slurm.daemon.calls import CallRecord
from tesserae_slurm.daemon.journal import Intent, Journal
from tesserae_slurm.daemon.observe import managed_job
from tesserae_slurm.daemon.plan import plan_round
from tesserae_slurm.daemon.store import Store
from tesserae_slurm.model import PackedPair, PendingJob, PendingReason, Placement, RoundDecision
from tesserae_slurm.slurm import SlurmJob, SlurmJobState
from tesserae_slurm.tsbatch.meta import JobMeta


def _job(jid: int, name: str, meta: JobMeta) -> SlurmJob:
    return SlurmJob(jid, name, "alice", SlurmJobState.PENDING, comment=meta.encode(), submit_time=1000 + jid)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "state.db"
    store = Store.open(path)
    j = Journal(store)
    metas = {11: JobMeta(2, "GPT2-Medium"), 12: JobMeta(2, "DCGAN", "32"), 13: JobMeta(4, no_profile=True),
             14: JobMeta(1, "resnet50", "64")}
    for jid, meta in metas.items():
        j.insert_job(managed_job(_job(jid, f"job|{jid}", meta)), 1000.0)
    dec = RoundDecision(
        Placement.from_lists({"node1": [["11", "12"], ["11", "12"], ["14"], []]}), ("11", "12", "14"), (), (), (),
        (PackedPair("11", "12", 0.73, 0.70, "10,14", None),),
        (PendingJob("13", PendingReason.RESOURCES, "needs 4 GPUs; 1 free"),), {"11": "10,14"},
        {"11": 0.73, "12": 0.7, "14": 1.0})
    plan = plan_round(dec, {}, ("11", "12", "13", "14"))
    r1 = j.begin_round(2000.0, "tesserae-t", False)
    j.record_decision(r1, dec, plan.targets, {"jobs_active": 4, "running": 3, "started": 3, "packed_pairs": 1,
                                              "pending": 1}, ("11", "12", "13", "14"))
    ids = j.record_intents(r1, [Intent("start", a.job_id, {"gpus": "node1:0-1"}, {}) for a in plan.starts], 2000.0)
    for aid in ids:
        j.finish_action(aid, "done", 2001.0)
    j.record_calls(r1, [CallRecord(2000.5, "place", ("11",), True, "", 9.0),
                        CallRecord(2000.6, "release", ("11", "12", "14"), True, "", 5.0)])
    j.update_round(r1, status="applied", finished_at=2001.0)
    j.update_jobs({"11": {"state": "RUNNING", "gpus": "node1:0-1", "nodes": "node1", "packed_with": "12",
                          "strategy": "10,14", "executed_time": 3725.0, "attained_service": 7450.0},
                   "12": {"state": "RUNNING", "gpus": "node1:0-1", "nodes": "node1", "packed_with": "11"},
                   "13": {"state": "PENDING", "reason": "Resources: needs 4 GPUs; 1 free"},
                   "14": {"state": "COMPLETED", "reason": "completed"}})
    r2 = j.begin_round(2400.0, "tesserae-t", False)
    moved = Placement.from_lists({"node1": [[], [], [], []], "node2": [["11", "12"], ["11", "12"], [], []]})
    dec2 = RoundDecision(moved, (), (), ("11", "12"), (), (PackedPair("11", "12", 0.73, 0.70, "10,14", None),),
                         (PendingJob("13", PendingReason.RESOURCES, "needs 4 GPUs; 1 free"),), {}, {})
    j.record_decision(r2, dec2, plan_round(dec2, {}).targets, {"migrated": 2}, ("11", "12", "13"))
    aid = j.record_intents(r2, [Intent("migrate", "11", {"from": "node1:0-1", "to": "node2:0-1"}, {})], 2400.0)[0]
    j.finish_action(aid, "done", 2401.0)
    j.update_round(r2, status="applied")
    j.event(2400.0, "reconcile", "an event about 11", "11", r2)
    store.close()  # the daemon has stopped: its WAL is checkpointed into the file now, not whenever GC runs
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_jobs_like_squeue(db, capsys):
    code, out, _ = run(capsys, "jobs", "--db", str(db))
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["JOBID", "NAME", "USER", "STATE", "GPUS", "GPU_IDX", "PACKED_WITH",
                                              "TIME", "NODELIST(REASON)"]
    assert [line.split()[0] for line in lines[1:]] == ["11", "12", "13"]  # finished jobs need --all
    assert "1:02:05" in lines[1] and "node1" in lines[1]  # squeue's TIME format; node list when running
    assert "(Resources: needs 4 GPUs; 1 free)" in lines[3]
    code, out, _ = run(capsys, "jobs", "--db", str(db), "--all", "-o", "%.4i %T %w %y|%b", "--noheader")
    assert out.splitlines() == ["  11 RUNNING 12 10,14|2", "  12 RUNNING 11 |2", "  13 PENDING  |4",
                                "  14 COMPLETED  |1"]
    code, out, _ = run(capsys, "jobs", "--db", str(db), "-p", "-t", "RUNNING")
    assert out.splitlines()[1].split("|")[:4] == ["11", "job/11", "alice", "RUNNING"]  # '|' in a name is escaped
    code, out, _ = run(capsys, "jobs", "--db", str(db), "--json", "-j", "13")
    (job,) = json.loads(out)
    assert job["state"] == "PENDING" and job["num_gpus"] == 4 and job["model"] == "(no profile)"


def test_rounds_and_round_show(db, capsys):
    code, out, _ = run(capsys, "rounds", "--db", str(db), "-p")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("ROUND|STARTED|STATUS|POLICY") and len(lines) == 3
    assert lines[1].split("|")[0] == "1" and lines[1].split("|")[2] == "applied"
    code, out, _ = run(capsys, "round", "show", "1", "--db", str(db))
    lines = [" ".join(line.split()) for line in out.splitlines()]  # tables: compare words, not padding
    assert "node1 11*+12* 11*+12* 14* -" in lines
    assert "11 12 0.73+0.70 10,14/-" in lines
    assert "13 Resources needs 4 GPUs; 1 free" in lines
    assert "release 11,12,14 yes 5.0" in lines
    code, out, _ = run(capsys, "round", "show", "2", "--db", str(db), "--json")
    body = json.loads(out)
    assert body["actions"][0]["kind"] == "migrate" and body["decision"]["migrated"] == ["11", "12"]


def test_explain_pending_packed_and_moved(db, capsys):
    _, out, _ = run(capsys, "explain", "13", "--db", str(db))
    assert "why pending: Resources - needs 4 GPUs; 1 free" in out and "round 2 (tesserae-t): rank 3 of 3" in out
    _, out, _ = run(capsys, "explain", "11", "--db", str(db))
    assert "why packed: shares its GPUs with 12" in out and "0.73 (this job) + 0.70 (12) = 1.43" in out
    assert "why moved in round 2" in out and "node1:0-1 -> node2:0-1" in out
    assert "an event about 11" in out
    _, out, _ = run(capsys, "explain", "11", "--db", str(db), "--json")
    body = json.loads(out)
    assert body["why_packed"]["with"] == "12" and body["history"][-1]["kind"] == "migrate"


@pytest.mark.parametrize("argv,message", [
    (["explain", "99"], "job 99 is not in the state database"),
    (["explain", "x;y"], "job id must be a number"),
    (["round", "show", "7"], "no round 7"),
    (["jobs", "-o", "%Q"], "unknown format code %Q"),
    (["jobs", "-j", "a"], "job ids are numbers"),
    (["rounds", "-n", "0"], "--last must be positive"),
])
def test_bad_requests_are_one_line_errors(db, capsys, argv, message):
    code, _, err = run(capsys, *argv, "--db", str(db))
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err


def test_admin_commands_never_write(db, capsys, tmp_path):
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    for argv in (["jobs", "-a"], ["rounds"], ["round", "show", "1"], ["explain", "11"]):
        assert run(capsys, *argv, "--db", str(db))[0] == 0
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    code, _, err = run(capsys, "jobs", "--db", str(tmp_path / "nope.db"))
    assert code == 2 and "does not exist (has the daemon run yet?)" in err
    assert not (tmp_path / "nope.db").exists()
