"""guard: jobs started or released by hand are stopped and held, user holds become administrator holds
recorded as the daemon's own, and a failure is the round's to report. Against real Slurm:
tests/daemon/test_bypass_live.py."""

from __future__ import annotations

from dataclasses import replace

from tesserae_slurm.daemon.round.actions import StopItem
from tesserae_slurm.daemon.round.stop_start import ApplyResult
from tesserae_slurm.daemon.round.guard import load_holds
from tesserae_slurm.daemon.round.observe import build_snapshot
from tesserae_slurm.daemon.round.reconcile import Followups, reconcile
from tesserae_slurm.daemon.state.store import JobRow
from tesserae_slurm.slurm import SlurmJobState as S

from ..fake_slurm import managed


def _snap(world):
    return build_snapshot(1000.0, tuple(world.slurm.jobs.values()), world.slurm.nodes, world.cfg)


def test_secure_evicts_holds_and_turns_user_holds_into_the_daemons_admin_holds(world) -> None:
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING), "2": managed(2, held=False), "3": managed(3)}
    for j in "123":
        world.journal.insert_job(world.slurm.jobs[j], None, 0.0)
    rid = world.begin_round()
    result = ApplyResult()
    world.guard().secure(rid, _snap(world), Followups(evict=["1"], hold=["2"]), result)
    assert world.slurm.writes() == [("evict", ("1",)), ("admin_hold", ("1",)), ("admin_hold", ("2",)),
                                    ("admin_hold", ("3",))]
    assert all(world.slurm.jobs[j].admin_held for j in "123") and not result.failed
    assert load_holds(world.store) == {"1", "2", "3"}
    kinds = [(a.kind, a.job_id, a.status) for a in world.store.actions(rid)]
    assert kinds == [("evict", "1", "done"), ("hold", "1", "done"), ("hold", "2", "done"), ("secure", "3", "done")]


def test_own_holds_are_dropped_once_slurm_no_longer_shows_them(world) -> None:
    world.slurm.jobs = {"1": managed(1), "2": managed(2)}
    guard = world.guard()
    guard.hold(None, ["1", "2"], "hold", ApplyResult())
    assert guard.own_holds(_snap(world)) == {"1", "2"}
    world.slurm.release([1])  # released (by an operator or the daemon's start): no longer the daemon's hold
    assert guard.own_holds(_snap(world)) == {"2"} and load_holds(world.store) == {"2"}
    assert world.store.actions() == []  # between rounds (no round id): no action rows


def test_enforce_finishes_carried_over_preemptions_and_reports_what_failed(world) -> None:
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING), "2": managed(2, held=False)}
    world.slurm.fail = {("admin_hold", "2")}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="PREEMPTING", gpus="node1:0"))
        s.add(JobRow(job_id="2", num_gpus=1, submit_time=0.0, state="PENDING"))
    rid = world.begin_round()
    failed = world.guard().enforce(rid, _snap(world), Followups([StopItem("requeue", "1", {"node1": (0,)})], ["2"]),
                                   world.applier())
    assert failed == "job 2: admin_hold 2: refused"
    assert world.slurm.methods() == ["admin_hold", "signal", "requeue_hold"]
    assert world.store.job("1").state == "PENDING" and world.slurm.jobs["1"].held


def _admin_held(job_id: int):  # noqa: ANN202 - a SlurmJob
    """A job an administrator holds (`scontrol hold` as root: JobHeldAdmin)."""
    return replace(managed(job_id), reason="JobHeldAdmin", state_reason="JobHeldAdmin")


def test_secure_leaves_an_administrators_hold_alone_and_never_records_it_as_the_daemons(world) -> None:
    world.slurm.jobs = {"1": _admin_held(1), "2": managed(2)}
    rid = world.begin_round()
    world.guard().secure(rid, _snap(world), Followups(), ApplyResult())
    assert world.slurm.writes() == [("admin_hold", ("2",))]  # only the user hold becomes the daemon's
    assert load_holds(world.store) == {"2"}
    assert [(a.kind, a.job_id) for a in world.store.actions(rid)] == [("secure", "2")]


def test_a_job_an_administrator_holds_after_the_daemon_let_go_is_the_administrators(world) -> None:
    world.slurm.jobs = {"1": managed(1)}
    guard = world.guard()
    guard.hold(None, ["1"], "hold", ApplyResult())
    assert guard.own_holds(_snap(world)) == {"1"}
    world.slurm.release([1])  # an operator lets it go
    assert guard.own_holds(_snap(world)) == set()  # seen not admin-held once: no longer the daemon's hold
    world.slurm.admin_hold([1])  # then an administrator holds it: that hold is theirs, and the round leaves it
    own = guard.own_holds(_snap(world))
    assert own == set()
    reconcile(world.journal, _snap(world), own, world.cfg.slurm.start_timeout_s, None)
    assert world.store.job("1").reason.startswith("held by an administrator")


def test_user_holds_are_secured_in_job_id_order(world) -> None:
    world.slurm.jobs = {j: managed(int(j)) for j in ("10", "9", "100")}
    rid = world.begin_round()
    world.guard().secure(rid, _snap(world), Followups(), ApplyResult())
    assert world.slurm.writes() == [("admin_hold", ("9", "10", "100"))]
    assert [a.job_id for a in world.store.actions(rid)] == ["9", "10", "100"]


def test_an_eviction_records_the_job_pending_before_slurm_is_asked(world) -> None:
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING)}
    with world.store.session() as s:
        s.add(JobRow(job_id="1", num_gpus=1, submit_time=0.0, state="RUNNING", gpus="node1:0"))
    seen: list[tuple[str, str, list[str]]] = []
    world.slurm.on_call = lambda method, ids: seen.append(
        (method, world.store.job("1").state, [a.status for a in world.store.actions(job_id="1")]))
    rid = world.begin_round()
    world.guard().secure(rid, _snap(world), Followups(evict=["1"]), ApplyResult())
    assert seen == [("evict", "PENDING", ["intent"]), ("admin_hold", "PENDING", ["done", "intent"])]


def test_between_rounds_the_guard_evicts_and_holds_without_action_rows(world) -> None:
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING), "2": managed(2)}
    result = ApplyResult()
    world.guard().secure(None, _snap(world), Followups(evict=["1"]), result)
    assert world.slurm.writes() == [("evict", ("1",)), ("admin_hold", ("1",)), ("admin_hold", ("2",))]
    assert not result.failed and world.store.actions() == [] and load_holds(world.store) == {"1", "2"}


def test_a_failed_eviction_is_the_rounds_failure_and_a_failed_hold_waits_for_the_next_look(world) -> None:
    # 1's eviction fails: the round must not decide on it. 4 is evicted but its hold fails (it may race the
    # requeue), and 3's user hold cannot be made an administrator's: both are retried at the next look, and
    # are recorded as the daemon's holds before the call, so a hold that did go through is never taken for
    # an administrator's.
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING), "2": managed(2, held=False), "3": managed(3),
                        "4": managed(4, state=S.RUNNING)}
    world.slurm.fail = {("evict", "1"), ("admin_hold", "4"), ("admin_hold", "3")}
    for j in "1234":
        world.journal.insert_job(world.slurm.jobs[j], None, 0.0)
    rid = world.begin_round()
    result = ApplyResult()
    world.guard().secure(rid, _snap(world), Followups(evict=["1", "4"], hold=["2"]), result)
    assert result.failed == {"1": "evict 1: refused"}
    assert [(a.kind, a.job_id, a.status, a.error, a.finished_at) for a in world.store.actions(rid)] == [
        ("evict", "1", "failed", "evict 1: refused", 1000.0), ("evict", "4", "done", "", 1000.0),
        ("hold", "4", "failed", "admin_hold 4: refused", 1000.0), ("hold", "2", "done", "", 1000.0),
        ("secure", "3", "failed", "admin_hold 3: refused", 1000.0)]
    assert load_holds(world.store) == {"2", "3", "4"}


def test_enforce_records_its_actions_in_the_round_and_names_every_failure(world) -> None:
    world.slurm.jobs = {"1": managed(1, state=S.RUNNING), "2": managed(2, held=False)}
    world.slurm.fail = {("evict", "1"), ("admin_hold", "2")}
    rid = world.begin_round()
    failed = world.guard().enforce(rid, _snap(world), Followups(evict=["1"], hold=["2"]), world.applier())
    assert failed == "job 1: evict 1: refused; job 2: admin_hold 2: refused"
    assert [(a.round_id, a.kind, a.job_id) for a in world.store.actions()] == [(rid, "evict", "1"), (rid, "hold", "2")]
