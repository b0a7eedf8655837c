"""Starts between rounds on the in-memory Slurm (round/start_between.py): a job that fits free GPUs starts
where the round would put it (the round itself, on an identical world, is the oracle), recorded as a
round of kind ``start``; a job ranked ahead keeps the GPUs the decision gave it; stops, moves and packing
onto running jobs wait for the round; the poll starts a pass only when a job came or went. On a real
Slurm: test_start_between_live.py."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from tesserae_slurm.daemon.loop import Daemon
from tesserae_slurm.daemon.round.actions import Action, RoundPlan, Target
from tesserae_slurm.daemon.round.start_between import Watch, free_starts
from tesserae_slurm.slurm import SlurmJob
from tesserae_slurm.slurm import SlurmJobState as S

from ..fake_slurm import FakeSlurm, managed
from .world import make_world


def _daemon(tmp_path: Path, *jobs: SlurmJob, **sections: object) -> tuple[Daemon, FakeSlurm]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    world = make_world(tmp_path, **sections)
    world.slurm.jobs = {str(j.job_id): j for j in jobs}
    d = Daemon(world.cfg, world.slurm, world.store, sleep=lambda _s: None)
    d.start()
    return d, world.slurm


def _round_and_run(d: Daemon, slurm: FakeSlurm) -> None:
    """A round, and Slurm starts what it released."""
    result = d.run_round()
    assert result.status == "applied" and result.plan is not None, result
    for a in result.plan.starts:
        assert a.target is not None
        slurm.run(a.job_id, sorted(a.target.gpus))


def _gpus(d: Daemon, job: str) -> str:
    row = d.journal.store.job(job)
    assert row is not None
    return row.gpus


def test_watch_sees_new_jobs_and_jobs_gone_and_nothing_else() -> None:
    w = Watch()
    assert w.news([("1", "R"), ("2", "PD")]) == "new job(s) 1,2"
    assert w.news([("1", "R"), ("2", "PD")]) == ""
    assert w.news([("1", "R"), ("2", "R")]) == ""  # a start is no news
    assert w.news([("2", "R"), ("3", "PD")]) == "new job(s) 3; job(s) 1 gone"
    assert w.news([("2", "CD"), ("3", "PD")]) == "job(s) 2 gone"  # ended, still listed
    assert w.news([("3", "PD")]) == ""


def test_free_starts_takes_free_gpus_only_and_packed_pairs_whole() -> None:
    def start(job: str, gpus: dict[str, tuple[int, ...]], partner: str = "") -> Action:
        return Action("start", job, target=Target(gpus, partner))
    a, b = start("1", {"n1": (0,)}), start("2", {"n1": (1,)})
    c, d = start("3", {"n2": (0, 1)}, "4"), start("4", {"n2": (0, 1)}, "3")
    e = start("5", {"n2": (2,)}, "9")  # packed onto job 9, running: the round's
    f, g = start("6", {"n2": (3,)}, "7"), start("7", {"n2": (3,)}, "6")
    moved = Action("migrate", "8", target=Target({"n1": (2,)}), previous={"n1": (3,)})
    plan = RoundPlan({}, (moved, a, b, c, d, e, f, g), ())
    busy = {("n1", 1): {"11"}, ("n1", 3): {"8"}, ("n2", 3): {"12"}}
    assert [x.job_id for x in free_starts(plan, busy)] == ["1", "3", "4"]
    assert [x.job_id for x in free_starts(plan, {})] == ["1", "2", "3", "4", "6", "7"]


def test_a_job_submitted_between_rounds_starts_where_the_round_would_put_it(tmp_path: Path) -> None:
    """Job 1 runs on one GPU; job 2 (2 GPUs) arrives. The pass starts it where a round, on the same
    world, puts it: best fit, beside job 1; and records the start as a round of kind ``start``."""
    results = {}
    for how in ("pass", "round"):
        d, slurm = _daemon(tmp_path / how, managed(1, 1, submit_time=1), scheduler={"policy": "tesserae-t"})
        _round_and_run(d, slurm)
        slurm.jobs["2"] = managed(2, 2, submit_time=5)
        slurm.calls.clear()
        result = d.start_between() if how == "pass" else d.run_round()
        assert result is not None and result.status == "applied", result
        results[how] = (_gpus(d, "2"), _gpus(d, "1"))
        if how == "pass":
            assert slurm.writes() == [("admin_hold", ("2",)),  # the guard: only an operator may release it
                                      ("place", ("2",)), ("release", ("2",))]
            row = d.journal.store.round(result.round_id)
            assert row is not None and (row.kind, row.status, row.started) == ("start", "applied", 1)
            decision = json.loads(row.decision_json)
            assert decision["started"] == ["2"] and decision["kept"] == ["1"]
            assert decision["preempted"] == decision["migrated"] == [] and "2" in decision["order"]
            assert [(a.kind, a.job_id, a.status) for a in d.journal.store.actions(result.round_id)] == \
                [("start", "2", "done")]
            assert d.journal.store.job("1").rounds_run == 1  # a pass is no round
            assert d.metrics.start_passes == {"applied": 1} and d.metrics.rounds == {"applied": 1}
            _explains_the_start(d, result.round_id)
    assert results["pass"] == results["round"]
    assert results["pass"][0].split(":")[0] == results["pass"][1].split(":")[0]  # consolidated beside job 1


def _explains_the_start(d: Daemon, pass_id: int) -> None:
    """`tesserae explain`, `rounds` and `round show` tell the pass from a round."""
    from tesserae_slurm.cli.admin.explain import _text
    from tesserae_slurm.daemon.operators.readers import ROUND_COLUMNS, explain, job_views, round_details

    store = d.journal.store
    (row,) = job_views(store, ids=["2"])
    e = explain(store, row)
    assert e["last_round"]["round"] == pass_id and e["last_round"]["kind"] == "start"
    assert [(m["kind"], m["round"], m["between_rounds"]) for m in e["history"]] == [("start", pass_id, True)]
    text = _text(e)
    assert f"started between rounds (round {pass_id}, kind start): on {row.gpus}" in text
    assert "start (between rounds)" in text
    pass_row = store.round(pass_id)
    assert pass_row is not None and round_details(store, pass_row)["kind"] == "start"
    assert next(c for c in ROUND_COLUMNS if c.key == "kind").get(pass_row) == "start"


def test_a_job_ranked_ahead_keeps_the_gpus_the_decision_gave_it(tmp_path: Path) -> None:
    """Tiresias by wall time, demoting after 50 s. Job 1 (2 GPUs) has run 100 s (demoted), job 2 (4
    GPUs) 5 s (not). Job 3 (4 GPUs) and job 4 (2 GPUs) arrive: the order is 2, 3, 4, 1, so the decision
    gives job 1's node to job 3 (preempting job 1) and nothing to job 4. Job 1's node has two free
    GPUs, which job 4 fits: a pass must not start it there; the round then starts job 3 on that node."""
    tiresias = {"policy": "tiresias", "policy_options": {"queue_limits": [50], "service": "time"}}
    d, slurm = _daemon(tmp_path, managed(1, 2, submit_time=1), managed(2, 4, submit_time=2), scheduler=tiresias)
    _round_and_run(d, slurm)
    now = time.time()
    for job, ran in (("1", 100), ("2", 5)):
        slurm.jobs[job] = replace(slurm.jobs[job], start_time=int(now - ran))
    assert d.run_round().status == "applied"  # job 1 demoted; both kept
    node_of_1 = _gpus(d, "1").split(":")[0]
    slurm.jobs.update({"3": managed(3, 4, submit_time=10), "4": managed(4, 2, submit_time=11)})
    slurm.calls.clear()
    assert d.start_between() is None  # nothing starts: job 3 waits for job 1's GPUs, job 4 gets none
    assert slurm.writes() == [("admin_hold", ("3", "4"))]  # the guard's, as every look
    result = d.run_round()
    assert result.plan is not None and [a.job_id for a in result.plan.starts] == ["3"]
    assert _gpus(d, "3") == f"{node_of_1}:0-3" and d.journal.store.job("4").state == "PENDING"


def test_packing_onto_a_running_job_and_moves_wait_for_the_round(tmp_path: Path) -> None:
    """Eight 1-GPU jobs fill the eight GPUs; a ninth arrives and the decision packs it onto one of them
    (moving others to make the pairs): between rounds nothing starts or moves; the round does both."""
    d, slurm = _daemon(tmp_path, *(managed(j, 1, submit_time=j) for j in range(1, 9)),
                       scheduler={"policy": "tesserae-t"})
    _round_and_run(d, slurm)
    slurm.jobs["9"] = managed(9, 1, submit_time=20)
    slurm.calls.clear()
    assert d.start_between() is None and slurm.writes() == [("admin_hold", ("9",))]
    result = d.run_round()
    assert result.plan is not None and [a.job_id for a in result.plan.actions if a.kind == "start"] == ["9"]
    assert result.plan.targets["9"].partner in {str(j) for j in range(1, 9)}


def test_the_poll_starts_a_pass_only_when_a_job_came_or_went(tmp_path: Path) -> None:
    d, slurm = _daemon(tmp_path, managed(1, 4, submit_time=1))
    _round_and_run(d, slurm)
    slurm.calls.clear()
    d.poll_between()
    assert slurm.methods(reads=True) == ["job_states", "poll_jobs"]  # nothing new: no pass (22.05: no light look)
    slurm.jobs["2"] = managed(2, 4, submit_time=5)
    d.poll_between()
    assert slurm.writes() == [("admin_hold", ("2",)), ("place", ("2",)),
                              ("release", ("2",))]
    slurm.run("2", ("node2",))
    slurm.calls.clear()
    d.poll_between()
    assert slurm.methods(reads=True) == ["job_states", "poll_jobs"]
    slurm.finish("1")  # it ended: GPUs free, but nobody waits: a pass that starts nothing records nothing
    rounds = len(d.journal.store.rounds())
    d.poll_between()
    assert "list_jobs" in slurm.methods(reads=True) and slurm.writes() == []
    assert len(d.journal.store.rounds()) == rounds
    assert slurm.jobs["1"].state is S.COMPLETED


def test_a_guard_check_between_two_polls_does_not_hide_a_new_job(tmp_path: Path) -> None:
    """The guard check observes Slurm too (and secures the new job's hold); the job is still news for the
    next poll, which starts it."""
    d, slurm = _daemon(tmp_path, managed(1, 4, submit_time=1))
    _round_and_run(d, slurm)
    d.poll_between()
    slurm.jobs["2"] = managed(2, 4, submit_time=5)
    d.guard_check()
    assert slurm.jobs["2"].admin_held
    slurm.calls.clear()
    d.poll_between()
    assert ("release", ("2",)) in slurm.writes()


def test_where_slurm_has_the_light_listing_the_partition_is_listed_only_when_a_job_moved(tmp_path: Path) -> None:
    """24.11 and later: `squeue --only-job-state` (every job, no partition) every poll; the partition's
    listing only when some job came or went; a pass only when that was one of the partition's."""
    d, slurm = _daemon(tmp_path, managed(1, 4, submit_time=1))
    slurm.light_states = True
    _round_and_run(d, slurm)
    d.poll_between()  # the first light look has nothing to compare with
    slurm.calls.clear()
    d.poll_between()
    assert slurm.methods(reads=True) == ["job_states"]
    slurm.jobs["7"] = managed(7, 1, partition="other")  # another partition's job
    d.poll_between()
    assert slurm.methods(reads=True) == ["job_states", "job_states", "poll_jobs"] and slurm.writes() == []
    slurm.jobs["2"] = managed(2, 4, submit_time=5)
    d.poll_between()
    assert ("release", ("2",)) in slurm.writes()


def test_a_pass_that_could_not_look_leaves_the_news_for_the_next_poll(tmp_path: Path) -> None:
    from tesserae_slurm.slurm import SlurmUnavailable

    d, slurm = _daemon(tmp_path, managed(1, 4, submit_time=1))
    slurm.light_states = True
    _round_and_run(d, slurm)
    d.poll_between()
    slurm.jobs["2"] = managed(2, 4, submit_time=5)

    def down(partition: str | None = None) -> tuple:
        raise SlurmUnavailable("slurm_load_jobs error: Unable to contact slurm controller")
    slurm.list_jobs = down  # type: ignore[method-assign]
    d.poll_between()  # the light look saw job 2 come; the pass could not observe
    del slurm.list_jobs
    slurm.calls.clear()
    d.poll_between()
    assert ("release", ("2",)) in slurm.writes()
