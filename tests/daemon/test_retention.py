"""Retention (daemon/state/retention.py): which rounds and jobs go, in batches bounded by time, and what stays."""

from __future__ import annotations

import pytest

from tesserae_slurm.site.config import RetentionSection
from tesserae_slurm.site.load import config_from_mapping
from tesserae_slurm.daemon.state.retention import DAY, Pruned, prune
from tesserae_slurm.daemon.state.store import ActionRow, EventRow, JobRow, PlacementRow, RoundRow, SlurmCallRow, Store
from tesserae_slurm.model import InputError

NOW = 1_800_000_000.0


def _fill(store: Store, n_rounds: int, first_start: float, step: float, intent_round: int | None = None) -> None:
    with store.session() as s:
        for r in range(1, n_rounds + 1):
            s.add(RoundRow(round_id=r, started_at=first_start + r * step, policy="p", status="applied"))
            s.flush()
            s.add(PlacementRow(round_id=r, job_id=f"j{r}", gpus="n1:0"))
            s.add(ActionRow(round_id=r, seq=0, job_id=f"j{r}", kind="start", created_at=first_start,
                            status="intent" if r == intent_round else "done"))
            s.add(SlurmCallRow(round_id=r, time=first_start, method="release", job_ids=f"j{r}"))
            s.add(EventRow(time=first_start, kind="round", round_id=r, message="x"))


def _count(store: Store, table) -> int:
    from sqlalchemy import func, select
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(table))


def test_max_rounds_keeps_the_newest_with_everything_they_reference(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 30, NOW - 1000, 1.0)
    done = prune(store, RetentionSection(max_rounds=10, batch=7), NOW)
    assert done.done and done.rounds == 20 and done.batches == 3  # 7 + 7 + 6
    assert [r.round_id for r in store.rounds(limit=100)] == list(range(30, 20, -1))
    for table in (PlacementRow, ActionRow, SlurmCallRow, EventRow):
        assert _count(store, table) == 10, table
    assert store.actions(round_id=21)[0].job_id == "j21" and store.placements(25)[0].job_id == "j25"
    assert prune(store, RetentionSection(max_rounds=10), NOW).rounds == 0  # nothing more


def test_age_limit_and_an_unfinished_round_stays(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 10, NOW - 10 * DAY, DAY, intent_round=2)  # round r started r days after NOW - 10 days
    done = prune(store, RetentionSection(rounds_days=4.5), NOW)
    # rounds 1..5 are older than 4.5 days; round 2 still has an intent for reconciliation to settle
    assert sorted(r.round_id for r in store.rounds(limit=100)) == [2, 6, 7, 8, 9, 10] and done.rounds == 4


def test_nothing_is_pruned_by_default(tmp_path):
    # rounds and jobs that every limit would take: decades old, and jobs that ended decades ago
    store = Store.open(tmp_path / "state.db")
    _fill(store, 5, 0.0, 1.0)
    with store.session() as s:
        for jid, state in (("done", "COMPLETED"), ("failed", "FAILED"), ("lost", "LOST")):
            s.add(JobRow(job_id=jid, num_gpus=1, submit_time=0.0, state=state, finished_at=10.0))
            s.add(EventRow(time=10.0, kind="job", job_id=jid, message="x"))
    done = prune(store, RetentionSection(), NOW)
    assert done.done and (done.rounds, done.jobs) == (0, 0)
    assert len(store.rounds(limit=100)) == 5 and sorted(j.job_id for j in store.jobs()) == ["done", "failed", "lost"]
    for table, rows in ((PlacementRow, 5), (ActionRow, 5), (SlurmCallRow, 5), (EventRow, 8)):
        assert _count(store, table) == rows, table
    # and the same rows go once a limit is set: the default, not the data, kept them
    assert prune(store, RetentionSection(rounds_days=1, jobs_days=1), NOW).jobs == 3


def test_batches_stop_at_the_budget_and_at_the_next_round(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 50, NOW - 1000, 1.0)
    ticks = iter(range(1000))
    clock = lambda: float(next(ticks))  # noqa: E731 - one second per look at the clock
    done = prune(store, RetentionSection(max_rounds=1, batch=5, budget_s=3.0), NOW, clock=clock)
    assert not done.done and done.batches == 2 and done.rounds == 10  # looked at t=1, 2 (< 3): two batches
    done = prune(store, RetentionSection(max_rounds=1, batch=5, budget_s=100.0), NOW, until=0.0,
                 clock=lambda: 5.0)
    assert not done.done and done.rounds == 0  # the next round is due: not one batch
    assert len(store.rounds(limit=100)) == 40


def test_ended_jobs_leave_after_jobs_days_running_and_recent_ones_stay(tmp_path):
    store = Store.open(tmp_path / "state.db")
    with store.session() as s:
        for jid, state, fin in (("old", "COMPLETED", NOW - 10 * DAY), ("recent", "FAILED", NOW - DAY),
                                ("run", "RUNNING", None), ("lost", "LOST", NOW - 8 * DAY)):
            s.add(JobRow(job_id=jid, num_gpus=1, submit_time=0.0, state=state, finished_at=fin))
            s.add(EventRow(time=NOW - 9 * DAY, kind="job", job_id=jid, message="x"))
    done = prune(store, RetentionSection(jobs_days=7), NOW)
    assert done.jobs == 2 and sorted(j.job_id for j in store.jobs()) == ["recent", "run"]
    assert sorted(e.job_id for e in store.events(limit=10)) == ["recent", "run"]


def test_a_pruned_job_leaves_its_round_events_to_their_round_and_keeps_its_recent_ones(tmp_path):
    # a job's events inside a round are the round's history: they go when the round goes, never with the job
    store = Store.open(tmp_path / "state.db")
    with store.session() as s:
        s.add(RoundRow(round_id=1, started_at=NOW - 10 * DAY, policy="p", status="applied"))
        s.add(JobRow(job_id="old", num_gpus=1, submit_time=0.0, state="COMPLETED", finished_at=NOW - 10 * DAY))
        s.flush()
        s.add(EventRow(time=NOW - 10 * DAY, kind="skipped", job_id="old", round_id=1, message="in round 1"))
        s.add(EventRow(time=NOW - 9 * DAY, kind="reconcile", job_id="old", message="before the cut"))
        s.add(EventRow(time=NOW - DAY, kind="reconcile", job_id="old", message="after the cut"))
    assert prune(store, RetentionSection(jobs_days=7), NOW) == Pruned(rounds=0, jobs=1, batches=1, done=True)
    assert store.job("old") is None
    assert sorted(e.message for e in store.events(limit=10)) == ["after the cut", "in round 1"]
    assert prune(store, RetentionSection(rounds_days=7), NOW).rounds == 1
    assert [e.message for e in store.events(limit=10)] == ["after the cut"]


def _ended_jobs(store: Store, n: int, finished: float) -> None:
    with store.session() as s:
        for j in range(n):
            s.add(JobRow(job_id=f"j{j}", num_gpus=1, submit_time=0.0, state="COMPLETED", finished_at=finished))


def test_ended_jobs_leave_in_batches_counted_with_the_rounds_and_a_budget_cuts_them_short(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 4, NOW - 1000, 1.0)
    _ended_jobs(store, 7, NOW - 10 * DAY)
    done = prune(store, RetentionSection(max_rounds=1, jobs_days=7, batch=3), NOW)
    assert done == Pruned(rounds=3, jobs=7, batches=1 + 3, done=True)  # rounds: 3; jobs: 3 + 3 + 1
    _ended_jobs(store, 7, NOW - 10 * DAY)
    ticks = iter(range(1000))
    done = prune(store, RetentionSection(jobs_days=7, batch=3, budget_s=3.0), NOW, clock=lambda: float(next(ticks)))
    assert done == Pruned(rounds=0, jobs=3, batches=1, done=False)  # t=1: no round to prune; t=2: one batch
    assert len(store.jobs()) == 4


def test_a_budget_cut_in_the_rounds_leaves_the_jobs_for_the_next_pause(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 20, NOW - 1000, 1.0)
    _ended_jobs(store, 2, NOW - 10 * DAY)
    ticks = iter(range(1000))
    done = prune(store, RetentionSection(max_rounds=1, jobs_days=7, batch=5, budget_s=3.0), NOW,
                 clock=lambda: float(next(ticks)))
    assert done == Pruned(rounds=10, jobs=0, batches=2, done=False)
    assert len(store.jobs()) == 2


def test_the_next_round_bounds_a_pause_only_when_it_comes_before_the_budget_ends(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 20, NOW - 1000, 1.0)
    ticks = iter(range(1000))
    done = prune(store, RetentionSection(max_rounds=1, batch=5, budget_s=3.0), NOW, until=100.0,
                 clock=lambda: float(next(ticks)))
    assert done == Pruned(rounds=10, jobs=0, batches=2, done=False)  # the budget ends first (t=3)


def test_an_age_limit_under_a_day_counts(tmp_path):
    store = Store.open(tmp_path / "state.db")
    _fill(store, 4, NOW - DAY, 0.25 * DAY)  # rounds started 18, 12, 6 and 0 hours ago
    assert prune(store, RetentionSection(rounds_days=0.4), NOW).rounds == 2  # older than 9.6 hours
    assert [r.round_id for r in store.rounds(limit=10)] == [4, 3]


def test_a_round_or_a_job_exactly_at_the_age_limit_stays_and_a_finished_job_back_in_the_queue_stays(tmp_path):
    store = Store.open(tmp_path / "state.db")
    cut = NOW - 7 * DAY
    with store.session() as s:
        s.add(RoundRow(round_id=1, started_at=cut - 1, policy="p", status="applied"))
        s.add(RoundRow(round_id=2, started_at=cut, policy="p", status="applied"))
        for jid, state, fin in (("older", "COMPLETED", cut - 1), ("at", "COMPLETED", cut),
                                ("requeued", "PENDING", cut - DAY)):  # finished, then requeued by hand
            s.add(JobRow(job_id=jid, num_gpus=1, submit_time=0.0, state=state, finished_at=fin))
        s.add(EventRow(time=cut, kind="reconcile", job_id="older", message="at the cut"))
    done = prune(store, RetentionSection(rounds_days=7, jobs_days=7), NOW)
    assert (done.rounds, done.jobs) == (1, 1)
    assert [r.round_id for r in store.rounds()] == [2] and sorted(j.job_id for j in store.jobs()) == ["at", "requeued"]
    assert [e.message for e in store.events()] == ["at the cut"]


def test_config_section():
    cfg = config_from_mapping({"retention": {"rounds_days": 30, "max_rounds": 100000, "jobs_days": 90}},
                              check_policy=False)
    assert cfg.retention == RetentionSection(rounds_days=30.0, max_rounds=100000, jobs_days=90.0)
    for bad in ({"max_rounds": -1}, {"batch": 0}, {"budget_s": 0}, {"keep": 3}, {"rounds_days": "30d"}):
        with pytest.raises(InputError, match="retention"):
            config_from_mapping({"retention": bad}, check_policy=False)


@pytest.mark.slurm_live
def test_the_running_daemon_prunes_between_rounds(env) -> None:  # noqa: ANN001
    from .test_service import Background

    env.write_config(scheduler={"round_seconds": 0.5}, retention={"max_rounds": 3, "batch": 1})
    daemon = Background(env)
    try:
        daemon.wait_log(r"round 8 applied", timeout=90)
        daemon.wait_log(r"retention: pruned [1-9]\d* rounds")
    finally:
        assert daemon.stop() == 0, daemon.text()[-2000:]
    ids = [r.round_id for r in env.store().rounds(limit=100)]
    assert len(ids) <= 4 and min(ids) >= 5, ids  # the newest 3 (+ the one that ran after the last pause)
