"""Online feedback in the daemon, offline: report parsing and file checks, attribution against the
daemon's records (worked examples), folding and persistence across a restart, the folded table,
and per-decision provenance as `tesserae explain` shows it. No Slurm: a journal-written database."""

from __future__ import annotations

import json
import os
import pwd

import pytest

from tesserae_slurm.cli.main import main
from tesserae_slurm.site.config import SiteConfig, FeedbackSection, SchedulerSection
from tesserae_slurm.daemon.feedback.report_files import History, RawReport, ReportFileError, Run, attribute, covering_rounds, parse_line, read_new
from tesserae_slurm.daemon.state.journal import Intent, Journal, RoundCounts
from tesserae_slurm.daemon.round.observe import managed_job
from tesserae_slurm.daemon.feedback.online import OnlineFeedback
from tesserae_slurm.daemon.round.actions import plan_round
from tesserae_slurm.site.partition import scheduling_profile
from tesserae_slurm.daemon.feedback.provenance import FALLBACK, base_table, decision_sources
from tesserae_slurm.daemon.state.store import JobUpdate, Store
from tesserae_slurm.estimators.entries import Endpoint, make_entry
from tesserae_slurm.model import Cluster, Job, Node, PackedPair, Placement, RoundDecision
from tesserae_slurm.profiles import ProfileKey, write_profile_csv
from tesserae_slurm.slurm import SlurmJob, SlurmJobState
from tesserae_slurm.model.meta import JobMeta

USER = pwd.getpwuid(os.getuid()).pw_name
PROFILE = scheduling_profile("a100")
DCGAN = Endpoint(PROFILE.key("DCGAN", "32", 1))
POINTNET = Endpoint(PROFILE.key("PointNet", "32", 1))
NOW = 5000.0


def line(job: str, rnd: int, t0: float, t1: float, steps: int) -> str:
    return json.dumps({"v": 1, "job": job, "round": rnd, "t0": t0, "t1": t1, "steps": steps})


# ---- parsing and reading --------------------------------------------------------------------------
def test_parse_line_accepts_a_report_and_refuses_everything_else():
    got = parse_line(line("7", 3, 100.0, 160.0, 120), "7", NOW, 30.0)
    assert isinstance(got, RawReport) and got.steps_per_s == 2.0
    bad = {
        "garbage": "not JSON", json.dumps([1]): "version", line("8", 3, 100, 160, 1): "another job",
        line("7", 0, 100, 160, 1): "round", line("7", 3, 100, 160, 0): "steps",
        line("7", 3, 100, 110, 5): "window", line("7", 3, 100, NOW + 1000, 5): "future",
        line("7", 3, 100, 160, 10**9): "implausible", json.dumps({"v": 1, "job": "7", "round": 3, "t0": "x",
                                                                 "t1": 2, "steps": 1}): "finite",
        json.dumps({"v": 2, "job": "7", "round": 3, "t0": 1, "t1": 99, "steps": 1}): "version",
    }
    for text, why in bad.items():
        got = parse_line(text, "7", NOW, 30.0)
        assert isinstance(got, str) and why in got, (text, got)


def test_read_new_returns_complete_lines_and_resumes(tmp_path):
    p = tmp_path / "5.jsonl"
    p.write_text("a\nb\npartial")
    lines, off = read_new(p, 0, os.getuid())
    assert lines == ["a", "b"] and off == 4
    with p.open("a") as fh:
        fh.write(" line\nc\n")
    lines, off = read_new(p, off, os.getuid())
    assert lines == ["partial line", "c"] and off == p.stat().st_size
    assert read_new(p, off, os.getuid()) == ([], off)
    p.write_text("new\n")  # replaced by a shorter file: read from the start
    assert read_new(p, off, os.getuid()) == (["new"], 4)
    assert read_new(tmp_path / "absent.jsonl", 3, os.getuid()) == ([], 3)
    lines, off = read_new(p, 0, os.getuid(), max_bytes=2)  # no complete line within the limit
    assert lines == [] and off == 0


def test_read_new_refuses_links_other_owners_and_non_files(tmp_path):
    real = tmp_path / "real.jsonl"
    real.write_text("x\n")
    link = tmp_path / "6.jsonl"
    link.symlink_to(real)
    with pytest.raises(ReportFileError, match="cannot open"):
        read_new(link, 0, os.getuid())
    with pytest.raises(ReportFileError, match="not by the job's user"):
        read_new(real, 0, os.getuid() + 1)
    fifo = tmp_path / "7.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ReportFileError, match="not a regular file"):
        read_new(fifo, 0, os.getuid())


# ---- attribution: worked examples ------------------------------------------------------------------
# Round 1 (started 1000, applied by 1002): job A alone on n1:0. Round 2 (1360, applied by 1362): B is
# started next to A (A kept). Round 3 (1720-1722): same. A round's decision holds from its start until
# the next round's apply ends.
ROUNDS = [(1, 1000.0, 1002.0), (2, 1360.0, 1362.0), (3, 1720.0, 1722.0)]
KA, KB = ProfileKey("DCGAN", "32", 1), ProfileKey("PointNet", "32", 1)
# Slurm started A at 1001 and B at 1370, 8 s after round 2's apply (its launch; in a round that
# migrates, the round's stops first): until 1370 A ran alone though round 2 had packed it.
HIST = History(ROUNDS, {(1, "A"): ("n1:0", ""), (2, "A"): ("n1:0", "B"), (3, "A"): ("n1:0", "B"),
                        (2, "B"): ("n1:0", "A"), (3, "B"): ("n1:0", "A")},
               {"A": [Run(1, "", "n1:0")], "B": [Run(2, "", "n1:0")]}, {"A": KA, "B": KB}, lambda n: "a100",
               {"A": 1001.0, "B": 1370.0})


def report(job: str, rnd: int, t0: float, t1: float) -> RawReport:
    return RawReport(job, rnd, t0, t1, 60)


def test_covering_rounds_include_the_apply_of_the_next_round():
    assert covering_rounds(ROUNDS, 1010, 1070) == [1]
    assert covering_rounds(ROUNDS, 1300, 1361) == [1, 2]  # round 2's apply is still running at 1361
    assert covering_rounds(ROUNDS, 1363, 1420) == [2]
    assert covering_rounds(ROUNDS, 1800, 1900) == [3]


def test_attribution_takes_partner_and_strategy_from_the_records():
    alone = attribute(report("A", 1, 1010, 1070), HIST)
    assert not isinstance(alone, str) and alone.partner is None and alone.job == Endpoint(KA)
    assert alone.steps_per_s == 1.0 and alone.gpu_type == "a100"
    packed = attribute(report("A", 1, 1400, 1460), HIST)
    assert not isinstance(packed, str) and packed.partner == Endpoint(KB)
    other = attribute(report("B", 2, 1400, 1460), HIST)
    assert not isinstance(other, str) and other.partner == Endpoint(KA)
    refusals = {
        report("A", 1, 1330, 1390): "partner changed",  # spans round 2's start of B
        report("A", 2, 1400, 1460): "did not start the job",  # A claims a run it did not have
        report("B", 2, 1300, 1400): "before its run",
        report("C", 1, 1010, 1070): "did not start the job",
        report("A", 1, 1363, 1423): "partner B was not started by Slurm",  # round 2 alone, B not yet up
    }
    for r, why in refusals.items():
        got = attribute(r, HIST)
        assert isinstance(got, str) and why in got, (r, got)
    ended = History(ROUNDS, HIST.placed, HIST.runs, HIST.keys, HIST.gpu_type, HIST.run_start, {"B": 1430.0})
    got = attribute(report("A", 1, 1400, 1460), ended)  # B finished at 1430: A ran alone after it
    assert isinstance(got, str) and "partner B ended within the window" in got
    got = attribute(report("A", 1, 1370, 1430), ended)
    assert not isinstance(got, str) and got.partner == Endpoint(KB)
    unknown = History(ROUNDS, HIST.placed, HIST.runs, HIST.keys, HIST.gpu_type, {"A": 1001.0})
    got = attribute(report("A", 1, 1400, 1460), unknown)  # B no longer (or not yet) running: no start known
    assert isinstance(got, str) and "partner B was not started" in got
    restarted = History(ROUNDS, HIST.placed, {**HIST.runs, "A": [Run(1, "", "n1:0"), Run(3, "", "n1:0")]},
                        HIST.keys, HIST.gpu_type, HIST.run_start)
    got = attribute(report("A", 1, 1700, 1760), restarted)
    assert isinstance(got, str) and "restarted" in got


# ---- the daemon's reading, folding and persistence ---------------------------------------------------
def _job(jid: int, meta: JobMeta) -> SlurmJob:
    return SlurmJob(jid, f"j{jid}", USER, SlurmJobState.PENDING, comment=meta.encode(), submit_time=900 + jid)


def _round(j: Journal, started: float, dec: RoundDecision, starts: dict[str, tuple[str, str]]) -> int:
    rid = j.begin_round(started, "tesserae-t", False)
    plan = plan_round(dec, {})
    j.record_decision(rid, dec, plan.targets, RoundCounts(), tuple(sorted(plan.targets)))
    intents = [Intent("start", job, {"gpus": g, "strategy": s}) for job, (g, s) in starts.items()]
    ids = j.record_intents(rid, intents, started)
    for aid in ids:
        j.finish_action(aid, "done", started + 1)
    j.update_round(rid, status="applied", finished_at=started + 2)
    return rid


@pytest.fixture
def world(tmp_path):
    """Jobs 21 (DCGAN/32), 22 (DCGAN/32), 26 (PointNet/32), 25 (no profile) with the rounds above."""
    j = Journal(Store.open(tmp_path / "state.db"))
    for jid, meta in {21: JobMeta(1, "DCGAN", "32"), 22: JobMeta(1, "DCGAN", "32"), 25: JobMeta(1, no_profile=True),
                      26: JobMeta(1, "PointNet", "32")}.items():
        mj = managed_job(_job(jid, meta))
        j.insert_job(mj.slurm, mj.meta, 950.0)
    alone = Placement.from_lists({"n1": [["21"], ["22"], ["25"], []]})
    _round(j, 1000.0, RoundDecision(alone, ("21", "22", "25"), (), (), (), (), ()),
           {"21": ("n1:0", ""), "22": ("n1:1", ""), "25": ("n1:2", "")})
    packed = Placement.from_lists({"n1": [["21", "26"], ["22"], ["25"], []]})
    pair = (PackedPair("21", "26", 0.5, 0.5),)
    _round(j, 1360.0, RoundDecision(packed, ("26",), (), (), ("21", "22", "25"), pair, ()), {"26": ("n1:0", "")})
    _round(j, 1720.0, RoundDecision(packed, (), (), (), ("21", "22", "25", "26"), pair, ()), {})
    for jid, start in {"21": 1001.0, "22": 1001.0, "25": 1001.0, "26": 1363.0}.items():  # Slurm's starts
        j.update_job(jid, JobUpdate(run_start=start))
    reports = tmp_path / "reports"
    reports.mkdir()
    files = {
        "21": [line("21", 1, 1010, 1070, 600), line("21", 1, 1330, 1390, 500), line("21", 1, 1400, 1460, 300)],
        "22": [line("22", 1, 1010, 1070, 600), line("22", 1, 1400, 1460, 600), line("22", 2, 1400, 1460, 600)],
        "25": [line("25", 1, 1010, 1070, 600)],
        "26": [line("26", 2, 1400, 1460, 240), "hello"],
        "99": [line("99", 1, 1010, 1070, 600)],  # a job the daemon does not know
    }
    for job, text in files.items():
        (reports / f"{job}.jsonl").write_text("\n".join(text) + "\n")
    (reports / "notes.txt").write_text("ignored\n")
    cfg = SiteConfig(scheduler=SchedulerSection(profile="a100"),
                       feedback=FeedbackSection(reports_dir=str(reports), report_every_s=60.0, alpha=0.5,
                                                min_reports=1))
    return j, cfg, reports, tmp_path / "state.db"


def test_collect_folds_what_checks_out_and_survives_a_restart(world):
    j, cfg, reports, _ = world
    fb = OnlineFeedback(cfg, j.store, PROFILE)
    got = fb.collect(NOW)
    assert got.folded == 5  # 21: alone + packed; 22: two alone; 26: packed
    assert set(got.refused) == {"21", "22", "25", "26"}
    assert "partner changed" in got.refused["21"] and "did not start" in got.refused["22"]
    assert "not in the profile" in got.refused["25"] and got.refused["26"] == "not JSON"
    assert got.suspicious == {"22": got.refused["22"], "26": "not JSON"}  # benign ones are no news
    assert fb.state.measured_speed("a100", DCGAN, None) == 10.0  # 10, 10, 10 steps/s alone
    assert fb.state.measured_speed("a100", DCGAN, POINTNET) == 5.0
    assert fb.state.measured_speed("a100", POINTNET, DCGAN) == 4.0

    again = OnlineFeedback(cfg, j.store, PROFILE)  # a restarted daemon
    assert again.state == fb.state and again.cursors == fb.cursors
    assert again.collect(NOW).folded == 0  # nothing is folded twice
    with (reports / "22.jsonl").open("a") as fh:
        fh.write(line("22", 1, 1800, 1860, 1200) + "\n")
    assert again.collect(NOW).folded == 1
    assert again.state.measured_speed("a100", DCGAN, None) == 15.0  # EWMA, alpha 0.5: (20 + 10) / 2
    j.update_job("22", JobUpdate(state="COMPLETED"))
    again.collect(NOW)
    assert not (reports / "22.jsonl").exists() and "22" not in again.cursors  # finished and read: removed


def _decide_with_feedback(world) -> None:
    """Fold the reports, check the folded table and the sources of a decision, record that round."""
    j, cfg, _, _ = world
    fb = OnlineFeedback(cfg, j.store, PROFILE)
    fb.collect(NOW)
    profile, table = fb.decision_profile()
    opt = profile.pair_options(DCGAN.key, POINTNET.key, "a100")[0]
    assert opt.a_speed == pytest.approx(0.5)  # 5 steps/s packed over 10 alone
    assert opt.b_speed == PROFILE.pair_options(DCGAN.key, POINTNET.key, "a100")[0].b_speed  # no PointNet reference
    assert table.source(make_entry("a100", DCGAN, POINTNET)) == "online"
    dec = RoundDecision(Placement.from_lists({"n1": [["21", "26"], ["22"], [], []]}), (), (), (), (),
                        (PackedPair("21", "26", 0.5, 0.5),), ())
    jobs = {"21": Job("21", 1, "DCGAN", "32"), "26": Job("26", 1, "PointNet", "32"), "22": Job("22", 1, "DCGAN", "32")}
    src = fb.sources(dec, jobs, _cluster())
    assert src["21"]["source"] == "measured" and src["21"]["reports"] == 1 and src["21"]["speed"] == pytest.approx(0.5)
    assert src["21"]["steps_per_s"] == 5.0
    assert src["26"]["source"] == "measured" and src["26"]["steps_per_s"] == 4.0
    assert src["22"]["source"] == "profiled" and src["22"]["reports"] == 3  # alone: the definition, reports shown
    rid = j.begin_round(NOW, "tesserae-t", False)
    j.record_decision(rid, dec, plan_round(dec, {}).targets, RoundCounts(), ("21", "22", "26"), src)
    j.update_round(rid, status="applied", finished_at=NOW + 1)


def test_the_folded_table_replaces_the_pair_and_explain_shows_the_source(world, capsys):
    _decide_with_feedback(world)
    db = world[3]
    assert main(["explain", "21", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "measured by online feedback [measured]" in out and "EWMA of 1 report(s)" in out
    assert main(["explain", "22", "--db", str(db)]) == 0
    assert "from the profile table [profiled]" in capsys.readouterr().out
    assert main(["explain", "21", "--db", str(db), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["speed_source"]["source"] == "measured" and body["speed_source"]["steps_per_s"] == 5.0


def test_min_reports_and_clamping():
    from tesserae_slurm.daemon.feedback.provenance import folded_profile
    from tesserae_slurm.estimators.online import OnlineState, ThroughputReport

    table = base_table(PROFILE, "a100")
    state = OnlineState(0.5).fold([ThroughputReport("a100", DCGAN, None, 10.0),
                                   ThroughputReport("a100", DCGAN, POINTNET, 30.0)])  # claims 3x its alone speed
    profile, folded = folded_profile(PROFILE, table, state, 2, 1.0)
    assert profile is PROFILE and folded.source(make_entry("a100", DCGAN, POINTNET)) == "measured"  # < 2 reports
    profile, folded = folded_profile(PROFILE, table, state, 1, 1.0)
    assert profile.pair_options(DCGAN.key, POINTNET.key, "a100")[0].a_speed == 1.0  # clamped


def test_provenance_labels_estimated_entries_and_fallbacks(tmp_path):
    from tesserae_slurm.estimators.online import OnlineState
    from tesserae_slurm.profiles import load_profile

    path = tmp_path / "site.csv"
    write_profile_csv(PROFILE, path)
    (tmp_path / "site.csv.provenance.json").write_text(json.dumps([
        {"gpu_type": "a100", "a": {"model": "DCGAN", "batch_size": "32", "num_gpus": 1},
         "source": "estimated:linear"}]))
    site = load_profile(str(path))
    table = base_table(site, str(path))
    dec = RoundDecision(Placement.from_lists({"n1": [["1"], ["2"], [], []], "n2": [["3"]] * 4, "n3": [["3"]] * 4}),
                        (), (), (), (), (), ())
    jobs = {"1": Job("1", 1, "DCGAN", "32"), "2": Job("2", 1, "resnet50", "64"), "3": Job("3", 8, "DCGAN", "32")}
    src = decision_sources(dec, jobs, site, table, OnlineState(), {"n1": "a100", "n2": "a100", "n3": "a100"})
    assert src["1"]["source"] == "estimated:linear" and src["2"]["source"] == "profiled"
    assert src["3"]["source"] == FALLBACK and "speed" not in src["3"]  # the table has DCGAN on 1, 2 and 4 GPUs


def _cluster() -> Cluster:
    return Cluster((Node("n1", 4, "a100"),))
