"""Admin CLI over a state database written by the daemon's own journal (no Slurm needed)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesserae_slurm.cli.main import COMMANDS, build_parser, main
from tesserae_slurm.daemon.round.actions import plan_round
from tesserae_slurm.daemon.round.observe import managed_job
from tesserae_slurm.daemon.service.calls import CallRecord
from tesserae_slurm.daemon.state.journal import Intent, Journal, RoundCounts
from tesserae_slurm.daemon.state.store import JobUpdate, Store
from tesserae_slurm.model import MoveReason, PackedPair, PendingJob, PendingReason, Placement, RoundDecision
from tesserae_slurm.model.meta import JobMeta
from tesserae_slurm.slurm import SlurmJob, SlurmJobState


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
        mj = managed_job(_job(jid, f"job|{jid}", meta))
        j.insert_job(mj.slurm, mj.meta, 1000.0)
    dec = RoundDecision(
        Placement.from_lists({"node1": [["11", "12"], ["11", "12"], ["14"], []]}), ("11", "12", "14"), (), (), (),
        (PackedPair("11", "12", 0.73, 0.70, "10,14", None),),
        (PendingJob("13", PendingReason.RESOURCES, "needs 4 GPUs; 1 free"),), {"11": "10,14"},
        {"11": 0.73, "12": 0.7, "14": 1.0})
    plan = plan_round(dec, {}, ("11", "12", "13", "14"))
    r1 = j.begin_round(2000.0, "tesserae-t", False)
    j.record_decision(r1, dec, plan.targets, RoundCounts(jobs_active=4, running=3, started=3, packed_pairs=1,
                                                          pending=1), ("11", "12", "13", "14"))
    ids = j.record_intents(r1, [Intent("start", a.job_id, {"gpus": "node1:0-1"}) for a in plan.starts], 2000.0)
    for aid in ids:
        j.finish_action(aid, "done", 2001.0)
    j.record_calls(r1, [CallRecord(2000.5, "place", ("11",), True, "", 9.0),
                        CallRecord(2000.6, "release", ("11", "12", "14"), True, "", 5.0)])
    j.update_round(r1, status="applied", finished_at=2001.0)
    j.update_jobs({"11": JobUpdate(state="RUNNING", gpus="node1:0-1", nodes="node1", packed_with="12",
                                   strategy="10,14", executed_time=3725.0, attained_service=7450.0),
                   "12": JobUpdate(state="RUNNING", gpus="node1:0-1", nodes="node1", packed_with="11"),
                   "13": JobUpdate(state="PENDING", reason="Resources: needs 4 GPUs; 1 free"),
                   "14": JobUpdate(state="COMPLETED", reason="completed", run_start=2001.0, finished_at=2301.0,
                                   executed_time=900.0, exit_code=0, nodes="node1", gpus="node1:2")})
    r2 = j.begin_round(2400.0, "tesserae-t", False)
    moved = Placement.from_lists({"node1": [[], [], [], []], "node2": [["11", "12"], ["11", "12"], [], []]})
    dec2 = RoundDecision(moved, (), (), ("11", "12"), (), (PackedPair("11", "12", 0.73, 0.70, "10,14", None),),
                         (PendingJob("13", PendingReason.RESOURCES, "needs 4 GPUs; 1 free"),), {}, {},
                         moves=(MoveReason("11", "migrate", "room", ("15",), 4320.0, 69.0, 0.73, 0.73),))
    j.record_decision(r2, dec2, plan_round(dec2, {}).targets, RoundCounts(migrated=2), ("11", "12", "13"))
    aid = j.record_intents(r2, [Intent("migrate", "11", {"from": "node1:0-1", "to": "node2:0-1"})], 2400.0)[0]
    j.finish_action(aid, "done", 2401.0)
    j.update_round(r2, status="applied")
    j.event(2400.0, "reconcile", "an event about 11", "11", r2)
    store.close()  # the daemon has stopped: its WAL is checkpointed into the file now, not whenever GC runs
    return path


def parse_record(line: str) -> list[str]:
    """Split one `-p` record the way docs/daemon.md says to (backslash escapes, '|' between fields)."""
    fields, cur, i = [], [], 0
    simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "|": "|"}
    while i < len(line):
        c = line[i]
        if c == "\\":
            if line[i + 1] in "xu":
                width = 2 if line[i + 1] == "x" else 4
                cur.append(chr(int(line[i + 2:i + 2 + width], 16)))
                i += 2 + width
            else:
                cur.append(simple[line[i + 1]])
                i += 2
        elif c == "|":
            fields.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(c)
            i += 1
    return [*fields, "".join(cur)]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


NOW = 2001.0 + 125  # two minutes and five seconds into job 11's run (and 14's end long past)


@pytest.fixture
def at_now(db, monkeypatch):
    """Job 11's run began at 2001 and the clock reads NOW (the fixture's other tests need a still TIME)."""
    _edit(db, **{"11": {"run_start": 2001.0}})
    monkeypatch.setattr(time, "time", lambda: NOW)


def test_jobs_like_squeue(db, capsys, at_now):
    code, out, _ = run(capsys, "jobs", "--db", str(db))
    lines = out.splitlines()
    assert code == 0 and lines[0] == ("             JOBID     NAME     USER ST       TIME  NODES GPUS PACKED_WITH "
                                      "NODELIST(REASON)")  # squeue's default widths, as `-o` takes them
    assert [line.split()[0] for line in lines[1:]] == ["11", "12", "13"]  # finished jobs need --all
    assert lines[1] == "                11   job|11    alice  R       2:05      1    2          12 node1"
    assert lines[3] == "                13   job|13    alice PD       0:00      1    4             " \
                       "(Resources: needs 4 GPUs; 1 free)"  # the reason is last: it widens no other row
    code, out, _ = run(capsys, "jobs", "--db", str(db), "--all", "-o", "%.4i %T %w %y|%b", "--noheader")
    assert out.splitlines() == ["  11 RUNNING 12 10,14|2", "  12 RUNNING 11 |2", "  13 PENDING  |4",
                                "  14 COMPLETED  |1"]
    code, out, _ = run(capsys, "jobs", "--db", str(db), "-p", "-t", "RUNNING")
    assert out.splitlines()[1].split("|")[:2] == ["11", "job\\"]  # '|' in a name is escaped ...
    assert parse_record(out.splitlines()[1])[:4] == ["11", "job|11", "alice", "R"]  # ... reversibly
    code, out, _ = run(capsys, "jobs", "--db", str(db), "--json", "-j", "13")
    (job,) = json.loads(out)["jobs"]
    assert job["state"] == "PENDING" and job["num_gpus"] == 4 and job["model"] == "(no profile)"


def test_a_waiting_jobs_nodes_are_what_it_asks_slurm_for(db, capsys, tmp_path):
    """squeue's NODES of a pending job is the count it asked for: tsbatch asks for one node when the job
    fits the partition's largest (4 GPUs here, as the rounds saw it), else whole nodes."""
    def nodes(path, job="13"):
        (rec,) = json.loads(run(capsys, "jobs", "--db", str(path), "--json", "-j", job)[1])["jobs"]
        return rec["num_nodes"]

    assert nodes(db) == 1  # 4 GPUs
    for gpus, count in ((1, 1), (5, 2), (8, 2), (12, 3)):
        _edit(db, **{"13": {"num_gpus": gpus}})
        assert nodes(db) == count, gpus
    _, out, _ = run(capsys, "jobs", "--db", str(db), "-o", "%i %D %b", "-h", "-t", "PD")
    assert out.split() == ["13", "3", "12"]
    # before any round recorded the nodes, the count is not known: squeue's column is left blank
    fresh = tmp_path / "fresh.db"
    j = Journal(Store.open(fresh))
    mj = managed_job(_job(21, "new", JobMeta(2, "DCGAN", "32")))
    j.insert_job(mj.slurm, mj.meta, 1000.0)
    j.store.close()
    assert nodes(fresh, "21") is None
    _, out, _ = run(capsys, "jobs", "--db", str(fresh), "-o", "%i|%D|%b", "-h")
    assert out.split() == ["21||2"]


def test_time_is_since_the_last_start_and_ended_jobs_show_end_exit_and_nodes(db, capsys, at_now):
    _, out, _ = run(capsys, "jobs", "--db", str(db), "-o", "%i %M %K", "-h")
    assert out.splitlines()[0] == "11 2:05 1:02:05"  # TIME as squeue's; RUN_TIME: every run together
    _, out, _ = run(capsys, "jobs", "--db", str(db), "-a")
    lines = out.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "USER", "ST", "TIME", "NODES", "GPUS", "PACKED_WITH", "END_TIME",
                                "EXIT", "NODELIST(REASON)"]
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(2301))
    assert lines[4].split() == ["14", "job|14", "alice", "CD", "5:00", "1", "1", end, "0", "node1"]  # as squeue
    _, out, _ = run(capsys, "jobs", "--db", str(db), "-t", "CD", "-o", "%i %N %g %D %S %e %X", "-h")
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(2001))
    assert out.split() == ["14", "node1", "node1:2", "1", start, end, "0"]  # where it last ran
    job = json.loads(run(capsys, "jobs", "--db", str(db), "--json", "-j", "14", "-a")[1])["jobs"][0]
    assert (job["time_s"], job["executed_s"], job["exit_code"]) == (300.0, 900.0, 0)
    assert _aware(job["end_time"]).timestamp() == 2301 and _aware(job["last_start"]).timestamp() == 2001


def test_squeue_habits_noheader_users_me(db, capsys, at_now, monkeypatch):
    import pwd

    _, out, _ = run(capsys, "jobs", "--db", str(db), "-h")
    assert [line.split()[0] for line in out.splitlines()] == ["11", "12", "13"]  # -h: no header, as squeue
    with pytest.raises(SystemExit) as done:
        main(["jobs", "--help"])
    assert done.value.code == 0 and "-h, --noheader" in capsys.readouterr().out  # help is --help alone
    _edit(db, **{"12": {"user": "root"}})
    assert _ids(run(capsys, "jobs", "--db", str(db), "-u", "root,alice")[1]) == ["11", "12", "13"]
    assert _ids(run(capsys, "jobs", "--db", str(db), "-u", "0")[1]) == ["12"]  # a uid, as squeue takes it
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd(("alice", "x", uid, uid, "", "/", "/bin/sh")))
    assert _ids(run(capsys, "jobs", "--db", str(db), "--me")[1]) == ["11", "13"]
    # an unknown user among known ones: squeue's error line, then the others' jobs
    code, out, err = run(capsys, "jobs", "--db", str(db), "-u", "alice,nosuchuser9")
    assert code == 0 and err == "tesserae jobs: error: Invalid user: nosuchuser9\n" and _ids(out) == ["11", "13"]
    code, out, err = run(capsys, "jobs", "--db", str(db), "-u", "nosuchuser9")
    assert (code, out, err) == (1, "", "tesserae jobs: error: Invalid user: nosuchuser9\n")
    code, out, err = run(capsys, "jobs", "--db", str(db), "-u", "root")  # on this host, no jobs: an empty table
    assert code == 0 and err == "" and _ids(out) == ["12"]


def test_unknown_job_ids_are_an_error_as_in_squeue(db, capsys):
    code, out, err = run(capsys, "jobs", "--db", str(db), "-j", "99")
    assert (code, out) == (1, "") and err == ("tesserae jobs: error: Invalid job id specified: 99 (not in the "
                                              "daemon's state)\n")
    code, out, err = run(capsys, "jobs", "--db", str(db), "-j", "11,99")  # squeue lists the ones it knows
    assert code == 0 and err == "" and _ids(out) == ["11"]
    code, out, err = run(capsys, "jobs", "--db", str(db), "-j", "14")  # finished: needs -a or -t, as in squeue
    assert code == 0 and err == "" and _ids(out) == []
    assert _ids(run(capsys, "jobs", "--db", str(db), "-j", "14", "-a")[1]) == ["14"]


def test_jobs_json_is_the_apis_answer(db, capsys, at_now):
    """One schema: `tesserae jobs --json` and GET /api/jobs are built by the same function from the same rows."""
    from tesserae_slurm.daemon.operators import api
    from tesserae_slurm.daemon.operators.readers import JOB_FIELDS

    for argv, query in ((["-a"], {"all_jobs": True}), (["-t", "PD,R"], {"states": "PD,R"}),
                        (["-u", "alice", "-j", "11,13"], {"user": "alice", "ids": "11,13"})):
        out = json.loads(run(capsys, "jobs", "--db", str(db), "--json", *argv)[1])
        assert set(out.pop("meta")) == {"tool", "version", "generated_at"}
        store = Store.open(db, read_only=True)
        try:
            assert out == api.jobs(store, **query, limit=api.MAX_JOBS)
        finally:
            store.close()
        assert all(tuple(j) == JOB_FIELDS for j in out["jobs"])


def test_listings_json_is_one_record_per_line(db, capsys, at_now):
    """A listing's --json (jobs, rounds, actions: emit) writes each record on a line of its own and every other key
    on one line: readable, and each line JSON alone (grep, jq -c), the whole as json.loads reads it."""
    for argv, key in ((["jobs", "-a"], "jobs"), (["rounds"], "rounds")):
        text = run(capsys, *argv, "--db", str(db), "--json")[1]
        body = json.loads(text)
        lines = text.splitlines()
        assert lines[0] == "{" and lines[-1] == "}" and json.loads(lines[1].removesuffix(",")[2:].split(": ", 1)[1]) \
            == body["meta"]
        at = lines.index(f'  "{key}": [')
        rows = lines[at + 1:at + 1 + len(body[key])]
        assert [json.loads(line.strip().removesuffix(",")) for line in rows] == body[key]
        assert lines[at + 1 + len(body[key])] in ("  ]", "  ],") and len(body[key]) >= 2
    (rec,) = json.loads(run(capsys, "jobs", "--db", str(db), "--json", "-j", "13")[1])["jobs"]
    assert rec["job_id"] == "13"
    _, text, _ = run(capsys, "jobs", "--db", str(db), "--json", "-j", "14")  # none listed: an empty list
    assert '  "jobs": [],' in text.splitlines() and json.loads(text)["jobs"] == []


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
    assert "why moved in round 2: made room for 15: bought 4320 GPU-s of work over the horizon, cost 69 GPU-s " \
        "(its restart and stop); node1:0-1 -> node2:0-1" in out
    assert "an event about 11" in out
    _, out, _ = run(capsys, "explain", "11", "--db", str(db), "--json")
    body = json.loads(out)
    assert body["why_packed"]["with"] == "12" and body["history"][-1]["kind"] == "migrate"
    assert body["history"][-1]["why"]["cause"] == "room" and body["history"][-1]["why"]["for"] == ["15"]
    _, out, _ = run(capsys, "round", "show", "2", "--db", str(db))
    assert "moves (what each move or preemption bought and cost" in out
    assert any(line.split()[:6] == ["11", "migrate", "room", "15", "4320", "69"] for line in out.splitlines())


@pytest.mark.parametrize("argv,message", [
    (["explain", "99"], "job 99 is not in the state database"),
    (["explain", "x;y"], "job id must be a number"),
    (["round", "show", "7"], "no round 7"),
    (["jobs", "-o", "%Z"], "unknown format code %Z"),
    (["jobs", "-j", "a"], "job ids are numbers"),
    (["rounds", "-n", "0"], "--last must be positive"),
    (["jobs", "-t", "BOGUS"], "-t: unknown job state 'BOGUS'"),
    (["jobs", "-t", "PD,XX"], "unknown job state 'XX'"),
    (["round", "show", "first"], "expected a round number or last"),
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


def _edit(db, **rows: dict) -> None:
    """Change job rows the way the daemon's store would (the admin commands only read)."""
    from tesserae_slurm.daemon.state.store import JobRow

    store = Store.open(db)
    with store.session() as s:
        for jid, values in rows.items():
            row = s.get(JobRow, jid)
            for k, v in values.items():
                setattr(row, k, v)
    store.close()


def _ids(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[1:]]


@pytest.mark.parametrize("states,ids", [
    ("PD", ["13"]), ("pending", ["13"]), ("R", ["11", "12"]), ("CD", ["14"]), ("COMPLETED", ["14"]),
    ("pd,r", ["11", "12", "13"]), ("PD,CD", ["13", "14"]), ("all", ["11", "12", "13", "14"]),
    ("PR", []), ("CA,F,TO", []),
])
def test_states_take_squeue_codes_and_names(db, capsys, states, ids):
    code, out, err = run(capsys, "jobs", "--db", str(db), "-t", states)
    assert code == 0 and err == "" and _ids(out) == ids


def test_daemon_state_codes_do_not_clash_with_slurm_and_preempting_has_a_reason(db, capsys):
    from tesserae_slurm.daemon.operators.readers import DAEMON_STATES, SLURM_STATES

    assert not set(DAEMON_STATES) & set(SLURM_STATES) and not set(DAEMON_STATES.values()) & set(SLURM_STATES.values())
    _edit(db, **{"11": {"state": "PREEMPTING", "reason": ""}, "12": {"state": "STARTING"},
                 "13": {"state": "PREEMPTING", "reason": ""}})
    code, out, _ = run(capsys, "jobs", "--db", str(db), "-o", "%i %t %R", "--noheader")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "11 PG (Preempting: moving to node2:0-1 (round 2); checkpointing, then requeued)"
    assert lines[1] == "12 SG node1"
    assert lines[2] == "13 PG (Preempting: signalled to checkpoint; requeued once it stops)"  # no stop recorded
    assert _ids(run(capsys, "jobs", "--db", str(db), "-t", "PG")[1]) == ["11", "13"]
    assert _ids(run(capsys, "jobs", "--db", str(db), "-t", "starting")[1]) == ["12"]
    _, out, _ = run(capsys, "explain", "11", "--db", str(db))
    assert "reason: Preempting: moving to node2:0-1 (round 2)" in out


def _aware(stamp: str) -> datetime:
    t = datetime.fromisoformat(stamp)
    assert t.tzinfo is not None, stamp
    return t


def test_json_is_an_object_with_meta_seconds_and_zoned_times(db, capsys):
    import tesserae_slurm

    code, out, _ = run(capsys, "jobs", "--db", str(db), "--json", "--all")
    body = json.loads(out)
    assert code == 0 and set(body) == {"meta", "round", "jobs", "truncated", "unknown_jobs", "unknown_users"}
    assert body["meta"]["version"] == tesserae_slurm.__version__ and body["meta"]["tool"] == "tesserae-slurm"
    assert abs(_aware(body["meta"]["generated_at"]).timestamp() - time.time()) < 60
    job = next(j for j in body["jobs"] if j["job_id"] == "11")
    assert job["executed_s"] == 3725.0 and job["attained_gpu_s"] == 7450.0  # seconds, as numbers
    assert _aware(job["submit_time"]).timestamp() == 1011 and job["first_start"] is None
    body = json.loads(run(capsys, "rounds", "--db", str(db), "--json")[1])
    assert set(body) == {"meta", "rounds"} and [r["round"] for r in body["rounds"]] == [1, 2]
    assert _aware(body["rounds"][0]["started_at"]).timestamp() == 2000
    body = json.loads(run(capsys, "round", "show", "1", "--db", str(db), "--json")[1])
    assert "meta" in body and _aware(body["finished_at"]).timestamp() == 2001
    body = json.loads(run(capsys, "explain", "11", "--db", str(db), "--json")[1])
    assert "meta" in body and _aware(body["submitted"]).timestamp() == 1011 and body["executed_s"] == 3725.0
    assert _aware(body["events"][0]["time"]).timestamp() == 2400


def test_round_show_last(db, capsys):
    code, out, _ = run(capsys, "round", "show", "last", "--db", str(db))
    assert code == 0 and out.startswith("round 2 ")
    assert json.loads(run(capsys, "round", "show", "last", "--db", str(db), "--json")[1])["round"] == 2


HOSTILE = ["a|b", "line1\nline2", "nel\x85ls\u2028fs\x1c", "back\\slash", "tab\there\r", "\\|\\n",
           "nul\x00bell\x07", "é ü 漢字 🚀", ""]


@pytest.mark.parametrize("name", HOSTILE)
def test_parsable_records_survive_any_name(db, capsys, name):
    _edit(db, **{"12": {"name": name}})
    code, out, _ = run(capsys, "jobs", "--db", str(db), "-p", "--all")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 5  # header + one line per job, whatever the name
    records = [parse_record(line) for line in lines]
    assert all(len(r) == len(records[0]) for r in records)
    assert records[2][:2] == ["12", name] and records[1][1] == "job|11"
    _, out, _ = run(capsys, "jobs", "--db", str(db), "--all")  # the table keeps one line per job too
    assert len(out.splitlines()) == 5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
def test_parsable_names_round_trip(db, capsys, name):
    _edit(db, **{"12": {"name": name}})
    _, out, _ = run(capsys, "jobs", "--db", str(db), "-p", "-j", "12", "--noheader")
    (line,) = out.splitlines() or [""]
    assert parse_record(line)[1] == name


def _parsers(parser: argparse.ArgumentParser, path: str = "tesserae"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_names_only_options_that_exist_and_matches_the_listing(command):
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    listed = next(a.help for a in sub._choices_actions if a.dest == command)
    assert listed == COMMANDS[command].help  # the top-level listing (no import) says what the module says
    for path, p in _parsers(sub.choices[command], f"tesserae {command}"):
        known = set(p._option_string_actions) | set(parser._option_string_actions)
        for sibling in (a for a in p._actions if isinstance(a, argparse._SubParsersAction)):
            for sp in sibling.choices.values():
                known |= set(sp._option_string_actions)
        named = set(re.findall(r"(?<![\w`-])--[a-z][a-z0-9-]*", p.format_help()))
        assert named <= known, f"{path} --help names options it does not have: {named - known}"


@pytest.mark.parametrize("command,extra,module", [
    ("jobs", "daemon", "sqlalchemy"), ("explain", "daemon", "sqlalchemy"), ("round", "daemon", "yaml"),
    ("daemon", "daemon", "yaml"), ("profile", "torch", "torch"),
])
def test_a_missing_extra_is_named_not_hidden(monkeypatch, capsys, command, extra, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if the package were not installed
    code, out, err = run(capsys, command, "--help")
    assert code == 2 and out == ""
    assert err.strip() == (f"tesserae {command}: error: this command needs the '{extra}' extra: "
                           f"pip install 'tesserae-slurm[{extra}]'")
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    listing = " ".join(capsys.readouterr().out.split())  # help wraps long lines
    assert f"{command} {COMMANDS[command].help} [needs: pip install 'tesserae-slurm[{extra}]']" in listing


def test_help_and_admin_commands_import_no_heavy_modules(db):
    """Start-up time is the admin commands' cost: `--help` loads no command module, `jobs` no numpy."""
    probe = ("import sys, contextlib, io\n"
             "from tesserae_slurm.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try: main(sys.argv[1:])\n"
             "    except SystemExit: pass\n"
             "heavy = ('numpy', 'scipy', 'numba', 'sqlalchemy', 'matplotlib', 'torch', 'yaml')\n"
             "print(' '.join(m for m in heavy if m in sys.modules))")
    for argv, allowed in ((["--help"], set()), (["jobs", "--db", str(db)], {"sqlalchemy"}),
                          (["rounds", "--db", str(db)], {"sqlalchemy"}),
                          (["round", "show", "last", "--db", str(db)], {"sqlalchemy"}),
                          (["explain", "11", "--db", str(db)], {"sqlalchemy"})):
        out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True)
        assert set(out.stdout.split()) == allowed, (argv, out.stdout)


def test_jobs_reads_through_core_alone(db):
    """`tesserae jobs` lists thousands of rows: SQLAlchemy's ORM (its import, the mapped classes, an object
    per row) was most of its time at 5,000 jobs, so the listing reads the tables through Core alone; nor
    does it load the engine, the policies, numpy or Alembic."""
    probe = ("import sys, contextlib, io\n"
             "from tesserae_slurm.cli.main import main\n"
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out):\n"
             "    main(sys.argv[1:])\n"
             "heavy = ('sqlalchemy.orm', 'tesserae_slurm.daemon.state.store', 'tesserae_slurm.engine',\n"
             "         'tesserae_slurm.policies', 'numpy', 'alembic')\n"
             "print(len(out.getvalue().splitlines()), *sorted(m for m in heavy if m in sys.modules))")
    for argv, lines in ((["jobs"], 4), (["jobs", "-a", "-l"], 5), (["jobs", "-t", "all", "--json"], None)):
        out = subprocess.run([sys.executable, "-c", probe, *argv, "--db", str(db)], capture_output=True, text=True,
                             check=True)
        shown, *loaded = out.stdout.split()
        assert loaded == [], (argv, loaded)
        assert lines is None or int(shown) == lines, (argv, out.stdout)  # the listing itself ran


def test_job_views_hold_what_the_orm_rows_hold(db):
    """The listings' plain rows (readers.job_views, through Core) against the daemon's ORM rows."""
    from dataclasses import asdict

    from tesserae_slurm.daemon.operators.readers import VIEW_COLUMNS, job_views
    from tesserae_slurm.daemon.state.database import Database

    store, reader = Store.open(db, read_only=True), Database.open(db, read_only=True)
    try:
        orm = {r.job_id: {c: getattr(r, c) for c in VIEW_COLUMNS} for r in store.jobs()}
        views = job_views(reader)
        assert [v.job_id for v in views] == [r.job_id for r in store.jobs()]  # the same order
        assert {v.job_id: {c: asdict(v)[c] for c in VIEW_COLUMNS} for v in views} == orm
        assert len(orm) == 4 and {v.state for v in views} == {"RUNNING", "PENDING", "COMPLETED"}
        assert [v.job_id for v in job_views(reader, ids=["13", "11", "99"])] == ["11", "13"]
    finally:
        store.close()
        reader.close()
