"""The applier against the in-memory Slurm (tests/daemon/fake_slurm.py): the order of the protocol's calls.

Every call the Applier makes is recorded together with what the state database said at that moment,
so the tests check the protocol's order itself: intent recorded before any Slurm call, place before
release, no release after a failed place, and the stop phase's signal -> wait -> requeue-hold.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from tesserae_slurm.daemon.round.actions import Action, StopItem, Target
from tesserae_slurm.daemon.round.stop_start import RELAUNCH_GAP_S, Applier, ApplyResult
from tesserae_slurm.daemon.service.calls import RecordingBackend
from tesserae_slurm.daemon.state.journal import Journal
from tesserae_slurm.daemon.state.store import JobRow, Store
from tesserae_slurm.site.load import config_from_mapping
from tesserae_slurm.slurm import SlurmCommandError, SlurmJob, SlurmJobState

from ..fake_slurm import FakeSlurm, managed


class Script:
    """Records, at each Slurm call, the action statuses the database held at that moment, and moves each
    scripted job to its next state at each listing (the last state stays)."""

    def __init__(self, slurm: FakeSlurm, store: Store, states: dict[str, list[SlurmJobState]]) -> None:
        self.slurm, self.store, self.states = slurm, store, states
        self.calls: list[tuple[str, tuple[str, ...], dict[str, str]]] = []

    def __call__(self, method: str, ids: tuple[str, ...]) -> None:
        self.calls.append((method, ids, {f"{a.kind}:{a.job_id}": a.status for a in self.store.actions()}))
        if method != "list_jobs_brief":
            return
        for j, seq in self.states.items():
            state = seq.pop(0) if len(seq) > 1 else seq[0]
            job = self.slurm.jobs[j]
            if job.state is not state:
                held = state is SlurmJobState.PENDING
                self.slurm.jobs[j] = replace(job, state=state, reason="job requeued in held state" if held else "",
                                             priority=0 if held else job.priority)


def _setup(tmp_path: Path, states: dict[str, list[SlurmJobState]], fail: set[tuple[str, str]] = frozenset(),
           grace: float = 0.2) -> tuple[Applier, Script, Journal]:
    store = Store.open(tmp_path / "state.db")
    with store.session() as s:
        for j in ("1", "2", "3"):
            s.add(JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="RUNNING", gpus="n1:0"))
    cfg = config_from_mapping({"preemption": {"grace_seconds": grace}, "state": {"database": str(tmp_path / "x")}},
                              check_policy=False)
    slurm = FakeSlurm([managed(int(j), state=seq[0]) for j, seq in states.items()] +
                      [managed(int(j)) for j in ("1", "2", "3") if j not in states], fail=fail)
    script = Script(slurm, store, states)
    slurm.on_call = script
    journal = Journal(store)
    round_id = journal.begin_round(0.0, "fifo", False)
    assert round_id == 1
    return Applier(slurm, journal, cfg, threading.Event(), poll_s=0.01), script, journal


def _start(job: str, gpu: int) -> Action:
    return Action("start", job, target=Target({"n1": (gpu,)}))


def test_start_records_intent_first_places_before_release_and_never_releases_a_failed_place(tmp_path: Path) -> None:
    applier, backend, journal = _setup(tmp_path, {}, fail={("place", "2")})
    result = ApplyResult()
    applier.start_jobs(1, [_start("1", 0), _start("2", 1), _start("3", 2)], {}, result)
    calls = [(m, ids) for m, ids, _ in backend.calls]
    for method, _ids, seen in backend.calls:  # every Slurm call saw all three intents already recorded
        assert {k: v for k, v in seen.items() if k.startswith("start:")} == {
            "start:1": "intent", "start:2": "intent", "start:3": "intent"}, method
    for j in ("1", "3"):
        assert calls.index(("place", (j,))) < calls.index(("release", ("1", "3")))
        assert backend.slurm.jobs[j].admin_comment.startswith("tesserae-assign:")  # the assignment rides on the place
    assert not any(m == "release" and "2" in ids for m, ids in calls)
    assert result.started == {"1", "3"} and "2" in result.failed
    statuses = {a.job_id: a.status for a in journal.store.actions()}
    assert statuses == {"1": "done", "2": "failed", "3": "done"}
    assert journal.store.job("2").state == "PENDING"


def test_stop_phase_signals_waits_then_requeue_holds_incomplete(tmp_path: Path) -> None:
    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running] * 6 + [SlurmJobState.PENDING]})
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)}, result)
    methods = [m for m, _, _ in backend.calls]
    assert methods[0] == "signal" and backend.calls[0][2] == {"preempt:1": "intent"}
    first_requeue = methods.index("requeue_hold")
    assert "list_jobs_brief" in methods[1:first_requeue]  # the grace period was waited out before the requeue-hold
    assert methods.count("requeue_hold") == 1 and methods.count("signal") == 1
    assert result.stopped == {"1"} and journal.store.job("1").state == "PENDING"
    from tesserae_slurm.slurm import commands
    # the backend's requeue-hold is Slurm's race-free form: an ended job stays ended
    assert commands.scontrol_requeuehold_incomplete([1]) == ["scontrol", "requeuehold", "Incomplete", "1"]


def test_a_job_that_ends_in_the_grace_period_is_recorded_as_ended(tmp_path: Path) -> None:
    running, done = SlurmJobState.RUNNING, SlurmJobState.COMPLETED
    applier, backend, journal = _setup(tmp_path, {"1": [running, done]}, grace=5.0)
    backend.slurm.jobs["1"] = replace(backend.slurm.jobs["1"], start_time=100.0, end_time=160.0)
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)}, result)
    assert result.ended == {"1": "COMPLETED"} and result.stopped == set()
    row = journal.store.job("1")
    # ended: no assignment, and the row keeps where it last ran (squeue's NODELIST of an ended job)
    assert row.state == "COMPLETED" and row.assignment == "" and "not requeued" in row.reason
    assert row.gpus == "n1:0"
    # its last run counted once and kept, so `tesserae jobs` shows its TIME as for a job that ends unstopped
    from tesserae_slurm.daemon.operators.readers import since_last_start

    assert (row.run_start, row.executed_time, row.finished_at) == (100.0, 60.0, 160.0)
    assert since_last_start(row, 500.0) == 60.0


def test_sigterm_in_the_grace_period_leaves_the_preemption_to_the_next_start(tmp_path: Path) -> None:
    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running]}, grace=60.0)
    threading.Timer(0.2, applier.stop.set).start()
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)}, result)
    assert "requeue_hold" not in [m for m, _, _ in backend.calls]
    assert journal.store.job("1").state == "PREEMPTING" and "daemon stopping" in result.skipped["1"]


def _ticking(start: float = 0.0, step: float = 1.0):  # noqa: ANN202 - a clock
    """A clock that moves ``step`` seconds at each look: waits end after a few polls, not in wall time."""
    t = [start]

    def clock() -> float:
        t[0] += step
        return t[0]
    return clock


def test_a_job_still_running_after_the_requeue_hold_is_carried_over_with_its_gpus(tmp_path: Path) -> None:
    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running]})  # Slurm never lists it pending
    applier.clock = _ticking()
    backend.slurm.requeue_hold = lambda job_id: backend.slurm._call("requeue_hold", [job_id])  # type: ignore
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)}, result)
    why = "still running after requeue-hold: carried over to the next round (its GPUs stay booked)"
    assert result.carried == {"1": why} and not result.stopped
    (a,) = journal.store.actions()
    assert (a.status, a.error) == ("skipped", why)
    assert journal.store.job("1").state == "PREEMPTING" and journal.store.job("1").gpus == "n1:0"


def test_a_job_that_leaves_squeue_after_the_requeue_hold_is_stopped(tmp_path: Path) -> None:
    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running]})

    def requeue_and_vanish(job_ids: list[int]) -> None:  # MinJobAge passed before the next look
        for j in backend.slurm._call("requeue_hold", job_ids):
            del backend.slurm.jobs[j]
    backend.slurm.requeue_hold = requeue_and_vanish  # type: ignore[method-assign]
    backend.states.clear()
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)}, result)
    assert result.stopped == {"1"} and not result.carried
    assert journal.store.job("1").state == "PENDING" and journal.store.job("1").preemptions == 1


def test_a_stop_goes_on_when_slurm_cannot_list_the_jobs_and_says_so(tmp_path: Path, caplog) -> None:
    import logging

    from tesserae_slurm.slurm import SlurmUnavailable

    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running]})
    applier.clock = _ticking()

    def unreachable(method: str, ids: tuple[str, ...]) -> None:
        if method == "list_jobs_brief":
            raise SlurmUnavailable("squeue: timed out")
    backend.slurm.on_call = unreachable
    result = ApplyResult()
    with caplog.at_level(logging.WARNING, logger="tesserae_slurm.daemon.round.stop_start"):
        applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)}, result)
    assert [m for m, _ids in backend.slurm.calls if m != "list_jobs_brief"] == ["signal", "requeue_hold"]
    assert result.stopped == {"1"}  # the requeue-hold went through; no listing says otherwise
    assert set(r.getMessage() for r in caplog.records) == {"cannot list jobs while applying: squeue: timed out"}


def test_a_released_job_not_started_yet_is_held_again_not_signalled(tmp_path: Path) -> None:
    applier, backend, journal = _setup(tmp_path, {})
    pending = backend.slurm.jobs["1"] = replace(managed(1, held=False), priority=1)
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": pending}, result)
    assert [m for m, _ids, _seen in backend.calls if m != "list_jobs_brief"] == ["hold"]
    assert result.stopped == {"1"} and journal.store.job("1").state == "PENDING"


def test_a_signal_slurm_cannot_deliver_is_logged_and_the_stop_goes_on(tmp_path: Path, caplog) -> None:
    import logging

    from tesserae_slurm.slurm import SlurmUnavailable

    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running, SlurmJobState.PENDING],
                                                  "2": [running, SlurmJobState.PENDING]})

    def signal(job_ids: list[int], sig: str = "USR1", batch_only: bool = True) -> dict[int, str]:
        backend.slurm._call("signal", job_ids)
        if len(job_ids) > 1:  # an error naming no job: scancel may have signalled none
            raise SlurmCommandError("scancel: slurm_load_jobs error: Access/permission denied", returncode=1,
                                    stderr="slurm_load_jobs error: Access/permission denied")
        if job_ids == [1]:
            raise SlurmUnavailable("scancel: timed out")
        raise SlurmCommandError("scancel: Job has already finished", returncode=1, stderr="")
    backend.slurm.signal = signal  # type: ignore[method-assign]
    result = ApplyResult()
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.stop_start"):
        applier.stop_jobs(1, [StopItem("preempt", j, {"n1": (0,)}) for j in "12"],
                          {j: SlurmJob(int(j), "t", "u", running) for j in "12"}, result)
    writes = [(m, ids) for m, ids, _seen in backend.calls if m != "list_jobs_brief"]
    assert writes == [("signal", ("1", "2")), ("signal", ("1",)), ("signal", ("2",)), ("requeue_hold", ("1", "2"))]
    messages = [r.getMessage() for r in caplog.records]
    assert ("batched signal failed (scancel: slurm_load_jobs error: Access/permission denied); "
            "signalling one by one") in messages
    assert "could not signal job(s) 1: scancel: timed out" in messages
    assert "signal to job 2 refused (scancel: Job has already finished): it has ended" in messages
    assert result.stopped == {"1", "2"}


def test_a_migration_counts_as_one_and_restarts_after_slurms_credential_gap(tmp_path: Path, caplog) -> None:
    import logging

    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running, SlurmJobState.PENDING]})
    slept: list[float] = []
    applier.clock, applier.sleep = (lambda: 500.0), slept.append
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("migrate", "1", {"n1": (0,)}, {"n1": (1,)})],
                      {"1": SlurmJob(1, "t", "u", running)}, result)
    row = journal.store.job("1")
    assert (row.state, row.migrations, row.preemptions, row.reason) == ("PENDING", 1, 0, "migrating (round 1)")
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.stop_start"):
        applier.start_jobs(1, [Action("migrate", "1", target=Target({"n1": (1,)}))], {}, result)
    assert slept == [RELAUNCH_GAP_S] and result.started == {"1"}
    assert ("round 1: waiting 2.0s before relaunching requeued jobs (Slurm credential revocation)"
            in [r.getMessage() for r in caplog.records])
    assert [(a.kind, a.status) for a in journal.store.actions()] == [("migrate", "done"), ("migrate-start", "done")]


def test_a_start_that_fails_is_finished_with_its_error_and_the_job_waits(tmp_path: Path) -> None:
    applier, backend, journal = _setup(tmp_path, {}, fail={("release", "1")})
    applier.clock = lambda: 700.0
    result = ApplyResult()
    applier.start_jobs(1, [_start("1", 0)], {}, result)
    (a,) = journal.store.actions()
    assert (a.status, a.error, a.finished_at) == ("failed", "release 1: refused", 700.0)
    row = journal.store.job("1")
    assert (row.state, row.reason, row.gpus, row.assignment) == ("PENDING", "start failed: release 1: refused", "", "")


def test_a_packed_start_over_two_nodes_records_both_nodes_and_the_sites_mps_share(tmp_path: Path) -> None:
    """The row names every node of the target (Slurm's node list for the job) and the assignment the
    launcher reads carries ``mps.thread_percentage`` for a packed job (0 for one alone)."""
    from tesserae_slurm.harness.assignment import Assignment

    applier, backend, journal = _setup(tmp_path, {})
    applier.cfg = config_from_mapping({"mps": {"thread_percentage": 40}, "state": {"database": str(tmp_path / "x")}},
                                      check_policy=False)
    result = ApplyResult()
    applier.start_jobs(1, [Action("start", "1", target=Target({"n1": (0, 1), "n2": (0, 1)}, partner="2")),
                           Action("start", "3", target=Target({"n1": (2,)}))], {}, result)
    one, three = journal.store.job("1"), journal.store.job("3")
    assert one.nodes == "n1,n2" and one.packed_with == "2"
    assert Assignment.decode(one.assignment).mps_percentage == 40
    assert Assignment.decode(three.assignment).mps_percentage == 0


def test_a_stop_left_to_the_next_start_is_finished_as_skipped_at_that_moment(tmp_path: Path) -> None:
    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running]}, grace=60.0)
    applier.clock = lambda: 1234.0
    applier.stop.set()
    applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", "u", running)},
                      ApplyResult())
    (stop,) = [a for a in journal.store.actions() if a.kind == "preempt"]
    assert (stop.status, stop.finished_at) == ("skipped", 1234.0)


def test_a_checkpointed_stop_logs_how_long_after_the_signal_it_came(tmp_path: Path, caplog) -> None:
    import getpass
    import logging

    from tesserae_slurm.harness.stop_record import StopRecord

    running = SlurmJobState.RUNNING
    applier, backend, journal = _setup(tmp_path, {"1": [running, running, SlurmJobState.PENDING]}, grace=60.0)
    records = tmp_path / "stops"
    records.mkdir()
    applier.cfg = config_from_mapping({"preemption": {"grace_seconds": 60.0, "stop_records_dir": str(records)},
                                       "state": {"database": str(tmp_path / "x")}}, check_policy=False)
    applier.clock = _ticking(100.0, 0.5)
    me = getpass.getuser()  # the record must belong to the job's user
    backend.slurm.jobs["1"] = replace(backend.slurm.jobs["1"], user=me)
    assert StopRecord(str(records), "1", 0).write(0)
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.stop_start"):
        applier.stop_jobs(1, [StopItem("preempt", "1", {"n1": (0,)})], {"1": SlurmJob(1, "t", me, running)},
                          ApplyResult())
    assert any(m.startswith("job 1 checkpointed ") and m.endswith("s after the signal: requeue-held now")
               for m in (r.getMessage() for r in caplog.records)), [r.getMessage() for r in caplog.records]


def test_a_batched_stop_asks_slurm_once_per_verb_and_records_a_job_that_ended_before_its_signal(
        tmp_path: Path, caplog) -> None:
    import logging

    running, pending, done = SlurmJobState.RUNNING, SlurmJobState.PENDING, SlurmJobState.COMPLETED
    # job 2 ended after the round looked and before the signal: scancel refuses it, the others get theirs
    applier, backend, journal = _setup(tmp_path, {"1": [running, running, pending], "2": [done],
                                                  "3": [running, pending]})
    result = ApplyResult()
    with caplog.at_level(logging.INFO, logger="tesserae_slurm.daemon.round.stop_start"):
        applier.stop_jobs(1, [StopItem("preempt", j, {"n1": (0,)}) for j in "123"],
                          {j: SlurmJob(int(j), "t", "u", running) for j in "123"}, result)
    writes = [(m, ids) for m, ids, _seen in backend.calls if m != "list_jobs_brief"]
    assert writes == [("signal", ("1", "2", "3")), ("requeue_hold", ("1", "2", "3"))]
    assert [j for j, _sig in backend.slurm.signals] == ["1", "3"]
    # every look during the stop asked for the stopping jobs alone, never the whole queue
    looks = [ids for m, ids, _seen in backend.calls if m == "list_jobs_brief"]
    assert looks and all(set(ids) <= {"1", "2", "3"} for ids in looks)
    assert "signal to job 2 refused (Invalid job id specified): it has ended" in [r.getMessage() for r in caplog.records]
    assert result.stopped == {"1", "3"} and result.ended == {"2": "COMPLETED"} and not result.failed
    assert journal.store.job("2").state == "COMPLETED" and "not requeued" in journal.store.job("2").reason
    assert [journal.store.job(j).state for j in "13"] == ["PENDING", "PENDING"]


def test_a_batched_requeue_hold_slurm_refuses_falls_back_to_one_call_per_job(tmp_path: Path) -> None:
    running, pending = SlurmJobState.RUNNING, SlurmJobState.PENDING
    applier, backend, journal = _setup(tmp_path, {j: [running, pending] for j in "123"},
                                       fail={("requeue_hold", "2")})
    result = ApplyResult()
    applier.stop_jobs(1, [StopItem("preempt", j, {"n1": (0,)}) for j in "123"],
                      {j: SlurmJob(int(j), "t", "u", running) for j in "123"}, result)
    writes = [(m, ids) for m, ids, _seen in backend.calls if m != "list_jobs_brief"]
    assert writes == [("signal", ("1", "2", "3")), ("requeue_hold", ("1", "2", "3")),
                      ("requeue_hold", ("1",)), ("requeue_hold", ("2",)), ("requeue_hold", ("3",))]
    assert result.stopped == {"1", "3"} and set(result.failed) == {"2"}
    statuses = {a.job_id: a.status for a in journal.store.actions()}
    assert statuses == {"1": "done", "2": "failed", "3": "done"}


class SlowPlaces(FakeSlurm):
    """Each place takes a moment and notes how many were in flight with it; a SIGTERM may come in the middle."""

    def __init__(self, *args, stop_after: str = "", stop: threading.Event | None = None, **kw) -> None:
        super().__init__(*args, **kw)
        self.lock, self.now_placing, self.most = threading.Lock(), 0, 0
        self.stop_after, self.stop = stop_after, stop

    def place(self, job_id, nodes, extra_updates=None) -> None:
        with self.lock:
            self.now_placing += 1
            self.most = max(self.most, self.now_placing)
        try:
            time.sleep(0.02)
            super().place(job_id, nodes, extra_updates)
            if str(job_id) == self.stop_after and self.stop is not None:
                self.stop.set()
        finally:
            with self.lock:
                self.now_placing -= 1


def _many(tmp_path: Path, parallel: int, ids: list[str], **slurm_kw) -> tuple[Applier, SlowPlaces, Journal]:
    store = Store.open(tmp_path / "state.db")
    with store.session() as s:
        for j in ids:
            s.add(JobRow(job_id=j, num_gpus=1, submit_time=0.0, state="PENDING"))
    cfg = config_from_mapping({"slurm": {"parallel_starts": parallel}, "state": {"database": str(tmp_path / "x")}},
                              check_policy=False)
    stop = threading.Event()
    slurm = SlowPlaces([managed(int(j)) for j in ids], stop=stop, **slurm_kw)
    journal = Journal(store)
    journal.begin_round(0.0, "fifo", False)
    return Applier(RecordingBackend(slurm), journal, cfg, stop, poll_s=0.01), slurm, journal


def test_starts_place_a_few_at_once_then_release_in_the_policys_order_with_every_call_recorded(
        tmp_path: Path) -> None:
    ids = [str(j) for j in range(101, 113)]
    applier, slurm, journal = _many(tmp_path, 4, ids, fail={("place", "105"), ("place", "110")})
    ranked = [ids[k] for k in (11, 0, 5, 3, 9, 1, 4, 2, 6, 8, 7, 10)]  # the policy's order, not the ids'
    result = ApplyResult()
    applier.start_jobs(1, [Action("start", j, target=Target({f"n{j}": (0,)})) for j in ranked], {}, result)

    assert 1 < slurm.most <= 4
    ok = [j for j in ranked if j not in ("105", "110")]
    assert [(m, ids) for m, ids in slurm.writes() if m == "release"] == [("release", tuple(ok))]
    assert {m for m, _ in slurm.writes()} == {"place", "release"}
    assert all(slurm.jobs[j].required_nodes == (f"n{j}",) for j in ok)
    assert result.started == set(ok) and set(result.failed) == {"105", "110"}
    assert result.failed["105"] == "place 105: refused"
    # the audit trail and the counters saw every call, the failed ones too
    records = applier.backend.drain()  # type: ignore[attr-defined]
    assert sorted((r.method, r.job_ids, r.ok) for r in records) == sorted(
        [("place", (j,), j not in ("105", "110")) for j in ranked] + [("release", tuple(ok), True)])
    assert applier.backend.calls["place"] == 12 and applier.backend.errors["place"] == 2  # type: ignore[attr-defined]
    statuses = {a.job_id: a.status for a in journal.store.actions()}
    assert statuses == {j: "failed" if j in ("105", "110") else "done" for j in ranked}
    assert journal.store.job("105").state == "PENDING" and journal.store.job("101").state == "STARTING"


def test_sigterm_among_parallel_starts_releases_what_was_placed_and_leaves_the_rest(tmp_path: Path) -> None:
    ids = [str(j) for j in range(201, 221)]
    applier, slurm, journal = _many(tmp_path, 2, ids, stop_after="202")
    result = ApplyResult()
    applier.start_jobs(1, [Action("start", j, target=Target({"n1": (int(j) % 8,)})) for j in ids], {}, result)

    placed = [j for j in ids if slurm.jobs[j].required_nodes]
    assert "201" in placed and "202" in placed and len(placed) < len(ids)
    (release,) = [i for m, i in slurm.writes() if m == "release"]
    assert release == tuple(placed)  # what was placed is released (in order), nothing else
    assert result.started == set(placed)
    assert set(result.skipped) == set(ids) - set(placed)
    assert all(why == "daemon stopping" for why in result.skipped.values())
    assert {a.job_id for a in journal.store.actions() if a.status == "skipped"} == set(ids) - set(placed)
