"""What operators and users see is what happened, on recorded state (no Slurm; the in-memory one where Slurm
is read): jobs the daemon has not looked at yet, the cause `explain` names for each stop, operators' requests
checked when given, listed and logged, drained nodes on the map, the promised delay, the state's modes.
The same on a real Slurm, as a second Unix user: test_operator_view_live.py."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tesserae_slurm.cli.main import main
from tesserae_slurm.daemon.operators import admin, api
from tesserae_slurm.daemon.operators.readers import FIRST_LOOK, FirstLook, in_force, round_cadence
from tesserae_slurm.daemon.service.logfmt import JsonFormatter
from tesserae_slurm.daemon.state.journal import Intent, Journal, RoundCounts
from tesserae_slurm.daemon.state.store import AdminRow, JobRow, Store, prepare_state
from tesserae_slurm.model import InputError, PendingJob, PendingReason, Placement, RoundDecision
from tesserae_slurm.site.load import config_from_mapping, load_config
from tesserae_slurm.slurm import SlurmError, SlurmJobState

from .fake_slurm import FakeSlurm, managed

S = SlurmJobState


def _cfg(db: Path):
    return config_from_mapping({"state": {"database": str(db)}, "slurm": {"partition": "tesserae"},
                                "metrics": {"listen": ""}, "http": {"listen": ""}}, check_policy=False)


class DownSlurm(FakeSlurm):
    def list_jobs(self, partition=None):  # noqa: ANN001, ANN201
        raise SlurmError("squeue: error: Unable to contact slurm controller (connect failure)")


def _round(j: Journal, t: float, *, order=(), pending=(), excluded=None, nodes_out=None, started=(),
           stops=()) -> int:  # noqa: ANN001
    """A round as the daemon records it: its decision (with what it left out) and its stops."""
    rid = j.begin_round(t, "tesserae-t", False)
    dec = RoundDecision(Placement.from_lists({"node1": [[], [], [], []], "node2": [[], [], [], []]}), tuple(started),
                        (), (), (), (), tuple(pending), {}, {})
    j.record_decision(rid, dec, {}, RoundCounts(), tuple(order), {},
                      extra={"excluded": excluded or {}, "nodes_out": nodes_out or {}})
    for kind, job, frm in stops:
        for aid in j.record_intents(rid, [Intent(kind, job, {"from": frm, "to": ""})], t):
            j.finish_action(aid, "done", t + 1)
    j.update_round(rid, status="applied", finished_at=t + 1)
    return rid


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open(tmp_path / "state.db")
    with s.session() as ss:
        for jid, state in (("1", "PENDING"), ("2", "PENDING"), ("3", "PENDING"), ("4", "PENDING"), ("5", "PENDING"),
                           ("6", "CANCELLED"), ("7", "CANCELLED"), ("8", "RUNNING")):
            ss.add(JobRow(job_id=jid, name=f"j{jid}", user="alice", num_gpus=2, submit_time=100.0 + int(jid),
                          state=state))
    return s


# ---- 1. a job Slurm lists that the daemon has not looked at yet --------------------------------------------
def test_a_new_job_is_shown_at_once_as_waiting_for_the_first_look(store: Store, tmp_path: Path) -> None:
    slurm = FakeSlurm([managed(13, 4, user="bob", submit_time=500), managed(8, 2, state=S.RUNNING, held=False),
                       managed(14, 1, state=S.COMPLETED, held=False)])
    look = FirstLook(_cfg(tmp_path / "state.db"), slurm)
    body = api.jobs(store, look=look)
    new = [j for j in body["jobs"] if j["job_id"] == "13"]
    assert len(new) == 1 and "slurm_error" not in body
    rec = new[0]
    assert (rec["user"], rec["name"], rec["num_gpus"], rec["state"], rec["slurm_state"], rec["submit_time"]) == \
        ("bob", "job13", 4, "PENDING", "PENDING", "1970-01-01T00:08:20+00:00")  # the records' ISO times
    assert rec["reason"] == f"{FIRST_LOOK} (Slurm: PENDING, JobHeldUser)"
    assert [j["job_id"] for j in body["jobs"]].count("8") == 1  # a job the database has is shown from it, once
    assert "14" not in {j["job_id"] for j in body["jobs"]}  # ended before the daemon saw it: never its job
    e = api.job(store, "13", look)
    assert e["state"] == "PENDING" and e["reason"].startswith(FIRST_LOOK) and e["history"] == [] and e["gpus"] == 4
    with pytest.raises(LookupError, match="neither in the state database nor a tesserae job in partition tesserae"):
        api.job(store, "99", look)


def test_slurm_unreachable_is_one_line_and_the_known_jobs_still_show(store: Store, tmp_path: Path) -> None:
    look = FirstLook(_cfg(tmp_path / "state.db"), DownSlurm())
    body = api.jobs(store, look=look)
    assert {j["job_id"] for j in body["jobs"]} == {"1", "2", "3", "4", "5", "8"}
    assert body["slurm_error"].startswith("Slurm not reachable") and "\n" not in body["slurm_error"]
    with pytest.raises(LookupError, match=r"job 13 is not in the state database, and Slurm not reachable"):
        api.job(store, "13", look)


def test_the_listing_is_asked_once_per_ttl(tmp_path: Path) -> None:
    slurm, now = FakeSlurm([managed(13)]), [0.0]
    look = FirstLook(_cfg(tmp_path / "db"), slurm, ttl=2.0, clock=lambda: now[0])
    look.jobs(), look.jobs()
    now[0] = 2.5
    look.jobs()
    assert [m for m, _ in slurm.calls if m == "list_jobs"] == ["list_jobs", "list_jobs"]


# ---- 3. the cause of each stop ----------------------------------------------------------------------------
def _cause_of(store: Store, job: str, kind: str = "preempt") -> dict:
    e = api.job(store, job)
    return [m for m in e["history"] if m["kind"] == kind][-1]["cause"]


def test_explain_names_the_cause_of_each_stop(store: Store) -> None:
    j = Journal(store)
    # Slurm: held by root with scontrol: the round left it out, so its stop is not the placement's
    _round(j, 1000, order=("2", "3", "4"), excluded={"1": "held by an administrator"},
           stops=[("preempt", "1", "node1:0-1")])
    # operator: `tesserae hold`
    store.add_admin_actions([AdminRow(time=1990.0, user="root", uid=0, command="hold", target="2", status="accepted",
                                      round_id=2)])
    _round(j, 2000, order=("3", "4"), excluded={"2": admin.hold_reason(store.admin_actions(target="2")[0])},
           stops=[("preempt", "2", "node1:0-1")])
    # operator: node drained under it; Slurm: node down under it
    _round(j, 3000, order=("3", "4", "5"), nodes_out={"node2": {"gpus": 4, "why": "drained for tesserae by root (x)"},
                                                      "node3": {"gpus": 4, "why": "down in Slurm: Not responding"}},
           stops=[("migrate", "3", "node2:0-1"), ("preempt", "5", "node3:0-1")])
    # policy: ranked below the jobs that started; placement: no GPUs left, fragmentation
    _round(j, 4000, order=("8", "4", "3", "5"), started=("8",),
           pending=(PendingJob("4", PendingReason.PRIORITY, "every GPU taken before its turn"),
                    PendingJob("3", PendingReason.RESOURCES, "needs 2 GPUs; 1 free"),
                    PendingJob("5", PendingReason.CONSOLIDATION, "2 GPUs free on 2 nodes")),
           stops=[("preempt", "4", "node1:2-3"), ("preempt", "3", "node1:0-1"), ("preempt", "5", "node3:0-1")])

    c = _cause_of(store, "1")
    assert c["by"] == "slurm" and "scontrol hold" in c["why"] and c["undo"] == "`scontrol release 1`"
    assert "placement" not in c["why"]
    c = _cause_of(store, "2")
    assert c["by"] == "operator" and "held by root with `tesserae hold`" in c["why"] and "release 2" in c["undo"]
    c = _cause_of(store, "3", "migrate")
    assert c["by"] == "operator" and "node node2 drained for tesserae by root" in c["why"]
    assert c["undo"] == "`tesserae resume node2`"
    causes = [m["cause"] for m in api.job(store, "5")["history"]]
    assert causes[0]["by"] == "slurm" and "node3 cannot be used: down in Slurm" in causes[0]["why"]
    assert causes[1]["by"] == "placement" and causes[1]["why"].startswith("Consolidation")
    c = _cause_of(store, "4")
    assert c["by"] == "policy" and "ranked 2 of 4, below 8 that started" in c["why"]
    c = _cause_of(store, "3")
    assert c["by"] == "placement" and c["why"] == "Resources: needs 2 GPUs; 1 free"


def test_a_stop_of_a_job_held_in_slurm_says_so_beside_its_own_cause(store: Store) -> None:
    j = Journal(store)
    rid = _round(j, 1000, order=("8", "1"), started=("8",), stops=[("preempt", "1", "node1:0-1")],
                 pending=(PendingJob("1", PendingReason.RESOURCES, "needs 2 GPUs; 0 free"),))
    with store.session() as s:  # the round saw job 1 held in Slurm by an administrator while it ran
        from tesserae_slurm.daemon.state.store import RoundRow
        row = s.get(RoundRow, rid)
        row.decision_json = json.dumps({**json.loads(row.decision_json), "held_in_slurm": ["1"]})
    c = _cause_of(store, "1")
    assert c["by"] == "placement" and c["why"].startswith("Resources: needs 2 GPUs; 0 free; held in Slurm")
    assert c["undo"] == "`scontrol release 1`"


def test_a_hold_set_in_slurm_on_a_running_job_is_named_from_slurm(store: Store, tmp_path: Path) -> None:
    look = FirstLook(_cfg(tmp_path / "state.db"), FakeSlurm([managed(8, 2, state=S.RUNNING, held=False,
                                                                     state_reason="JobHeldAdmin")]))
    e = api.job(store, "8", look)
    assert e["cause"]["by"] == "slurm" and "while it runs: it runs on" in e["cause"]["why"]
    assert "cause" not in api.job(store, "8", FirstLook(_cfg(tmp_path / "state.db"), DownSlurm()))


def test_explain_tells_slurm_from_the_operator_for_ended_and_held_jobs(store: Store, capsys) -> None:  # noqa: ANN001
    store.add_admin_actions([AdminRow(time=5.0, user="root", uid=0, command="cancel", target="7", status="done",
                                      round_id=None)])
    from tesserae_slurm.daemon.state.store import JobUpdate
    Journal(store).update_jobs({"1": JobUpdate(reason="held by an administrator (scontrol release to let tesserae "
                                                      "schedule it)")})
    assert api.job(store, "6")["cause"]["by"] == "slurm"
    assert "cancelled in Slurm outside tesserae" in api.job(store, "6")["cause"]["why"]
    assert api.job(store, "7")["cause"]["by"] == "operator"
    assert api.job(store, "1")["cause"]["undo"] == "`scontrol release 1`"
    assert "cause" not in api.job(store, "2")
    db = str(store.engine.url.database)
    assert main(["explain", "1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "why pending: slurm: held in Slurm by an administrator" in out and "to undo: `scontrol release 1`" in out


# ---- 4. operators' requests: checked, listed, logged, drained nodes, the promised delay -----------------------
FORCE = {"holds": [{"target": "2", "user": "root", "time": "t"}], "rules": [{"target": "3"}],
         "drains": [{"target": "node2", "user": "root", "time": "t"}], "waiting": []}


@pytest.mark.parametrize(("command", "target", "nodes", "state", "message"), [
    ("hold", "9", "", None, "job 9 is not a tesserae job: not in the daemon's database nor in partition p"),
    ("requeue", "6", "", "CANCELLED", "job 6 has ended (CANCELLED)"),
    ("requeue", "1", "", "PENDING", "job 1 is not running (pending): nothing to requeue"),
    ("requeue", "1", "", "PREEMPTING", "job 1 is already being stopped"),
    ("requeue", "1", "", admin.FIRST_LOOK_STATE, "nothing to requeue"),
    ("hold", "2", "", "PENDING", "job 2 is already held (by root at t)"),
    ("release", "1", "", "PENDING", "job 1 is not held with `tesserae hold`"),
    ("unpin", "1", "", "RUNNING", "job 1 has no pin or keep-off to lift"),
    ("drain", "node99", "", "", "no node node99 in partition p (its nodes: node1, node2)"),
    ("drain", "node2", "", "", "node node2 is already drained for tesserae (by root at t)"),
    ("resume", "node1", "", "", "node node1 is not drained for tesserae"),
    ("pin", "1", "node[1-3]", "PENDING", "no node node3 in partition p"),
])
def test_a_request_that_does_not_fit_is_refused(command, target, nodes, state, message) -> None:  # noqa: ANN001
    assert message in admin.misfit(command, target, nodes, state, FORCE, {"node1", "node2"}, "p")


@pytest.mark.parametrize(("command", "target", "nodes", "state"), [
    ("hold", "1", "", "PENDING"), ("hold", "13", "", admin.FIRST_LOOK_STATE), ("release", "2", "", "PENDING"),
    ("requeue", "8", "", "RUNNING"), ("cancel", "1", "", "PENDING"), ("unpin", "3", "", "PENDING"),
    ("pin", "1", "node[1-2]", "PENDING"), ("drain", "node1", "", ""), ("resume", "node2", "", "")])
def test_a_request_that_fits_passes(command, target, nodes, state) -> None:  # noqa: ANN001
    assert admin.misfit(command, target, nodes, state, FORCE, {"node1", "node2"}, "p") == ""


@pytest.fixture
def cfg_path(store: Store, tmp_path: Path) -> Path:
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"state: {{database: {store.engine.url.database}}}\nmetrics: {{listen: ''}}\n"
                   "http: {listen: ''}\nslurm: {partition: tesserae, bin_dir: /nonexistent, retries: 0}\n")
    j = Journal(store)
    for t in (1000.0, 1023.0, 1060.0):  # rounds began every 23 and 37 s
        _round(j, t)
    admin.ensure_dir(admin.requests_dir(load_config(cfg, check_policy=False)))
    return cfg


def _act(cfg: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERAE_")}
    return subprocess.run([sys.executable, "-m", "tesserae_slurm.cli.main", *argv, "--config", str(cfg)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_command_refuses_in_one_line_and_leaves_nothing(cfg_path: Path) -> None:
    requests = admin.requests_dir(load_config(cfg_path, check_policy=False))
    for argv, message in ((["drain", "node99"], "no node node99 in partition tesserae (its nodes: node1, node2)"),
                          (["requeue", "1"], "job 1 is not running (pending): nothing to requeue"),
                          (["release", "3"], "job 3 is not held"),
                          (["hold", "6"], "job 6 has ended (CANCELLED)")):
        p = _act(cfg_path, *argv)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and message in p.stderr, (argv, p.stderr)
    assert os.listdir(requests) == []
    p = _act(cfg_path, "drain", "node1")
    assert p.returncode == 0, p.stderr
    assert "within about 37 s: rounds began every 23-37 s lately" in p.stdout, p.stdout
    assert len(os.listdir(requests)) == 1


def test_actions_in_force_are_listed_with_who_and_when(store: Store, cfg_path: Path, capsys) -> None:  # noqa: ANN001
    cfg = load_config(cfg_path, check_policy=False)
    for command, target, nodes in (("hold", "1", ""), ("pin", "3", "node1"), ("drain", "node2", ""),
                                   ("hold", "4", ""), ("release", "4", ""), ("requeue", "8", "")):
        admin.submit(cfg, command, target, now=1234.0, nodes=nodes)
    admin.ingest(store, cfg, 5)
    force = in_force(store)
    assert [(r["command"], r["target"]) for r in force["holds"] + force["rules"] + force["drains"]] == \
        [("hold", "1"), ("pin", "3"), ("drain", "node2")]
    assert force["waiting"][0]["command"] == "requeue"
    me = admin.user_name(os.geteuid())
    assert main(["actions", "--config", str(cfg_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ACTION", "TARGET", "NODES", "USER", "SINCE", "ROUND"]
    assert [ln.split()[:2] for ln in lines[1:]] == [["hold", "1"], ["pin", "3"], ["drain", "node2"], ["requeue", "8"]]
    assert all(me in ln and "T" in ln.split()[-2] for ln in lines[1:])
    assert main(["actions", "--all", "--json", "--config", str(cfg_path)]) == 0
    every = json.loads(capsys.readouterr().out)["actions"]
    assert [a["command"] for a in every] == ["hold", "pin", "drain", "hold", "release", "requeue"]
    # the map: the drained node is drawn as drained, with who and when
    drained = [n for n in api.cluster(store)["nodes"] if n["name"] == "node2"]
    assert drained and drained[0]["drained"]["user"] == me


def test_the_map_keeps_nodes_the_round_could_not_use(store: Store) -> None:
    _round(Journal(store), 10.0, nodes_out={"node3": {"gpus": 4, "why": "down in Slurm: Not responding"}})
    n3 = [n for n in api.cluster(store)["nodes"] if n["name"] == "node3"][0]
    assert n3 == {"name": "node3", "gpus": [[], [], [], []], "unavailable": "down in Slurm: Not responding",
                  "drained": None}


def test_requests_are_logged_as_they_take_effect(store: Store, cfg_path: Path, caplog) -> None:  # noqa: ANN001
    cfg = load_config(cfg_path, check_policy=False)
    admin.submit(cfg, "hold", "1")
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.operators.admin"):
        admin.ingest(store, cfg, 9)
    rec = [r for r in caplog.records if "operator" in r.getMessage()]
    assert len(rec) == 1 and rec[0].getMessage().endswith("hold job 1 accepted")
    line = json.loads(JsonFormatter().format(rec[0]))
    assert (line["job"], line["action"], line["outcome"]) == ("1", "operator-hold", "accepted")


def test_round_cadence() -> None:
    assert round_cadence([]) is None and round_cadence([5.0]) is None
    assert round_cadence([60.0, 0.0, 23.0]) == (23.0, 37.0)


# ---- 5. the state's modes --------------------------------------------------------------------------------
def test_the_state_is_made_0750_and_0640_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        db = prepare_state(tmp_path / "state" / "sub" / "state.db")
        Store.open(db).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o750 and stat.S_IMODE(db.stat().st_mode) == 0o640
    for f in db.parent.iterdir():
        if f.name.startswith("state.db"):
            assert not f.stat().st_mode & 0o007, f


def test_a_world_readable_state_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Store.open(db).close()
    db.chmod(0o644)
    with pytest.raises(InputError, match=r"readable by every user \(mode 0644\); chmod 640"):
        prepare_state(db)
    db.chmod(0o640)
    prepare_state(db)
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(InputError, match="writable by every user"):
        prepare_state(d / "state.db")
    cfg = tmp_path / "t.yaml"
    db.chmod(0o644)
    cfg.write_text(f"state: {{database: {db}}}\nmetrics: {{listen: ''}}\nhttp: {{listen: ''}}\n")
    p = _act(cfg, "daemon", "--once")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "readable by every user" in p.stderr, p.stderr
