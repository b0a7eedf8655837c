"""Two users' jobs in the simulator: the truth time-slices their pairs, the engine scores them as asked."""

from __future__ import annotations

import dataclasses

import pytest

from tesserae_slurm.profiles import load_profile
from tesserae_slurm.profiles.keys import TIMESLICE_SHARE
from tesserae_slurm.sim.compare import RunSpec, run_one
from tesserae_slurm.sim.traces import generate_tesserae
from tesserae_slurm.sim.traces.generate import with_users
from tesserae_slurm.sim.traces.record import TraceJob

A100 = load_profile("a100")


def _trace(users):
    return tuple(TraceJob(str(i), 0.0, 1, 3600.0, "resnet50", "64", user=u) for i, u in enumerate(users))


def _run(trace, cross_user, cluster="1x1:a100"):
    return run_one(RunSpec(trace, "t", cluster, "tesserae-t", check_invariants=True, cross_user=cross_user))


def test_two_users_pair_runs_time_sliced_when_the_engine_forms_it():
    # scored as one user's pair (0.61 each), it forms; in truth it time-slices at the fallback 0.45
    res = _run(_trace(["ann", "bob"]), "mps")
    assert [j.finish_time for j in res.jobs] == pytest.approx([3600 / TIMESLICE_SHARE] * 2)
    assert all(j.rounds_packed > 0 for j in res.jobs)
    assert res.settings["cross_user"] == "mps"


def test_scored_time_sliced_the_pair_is_not_formed():
    res = _run(_trace(["ann", "bob"]), "timeslice")
    assert all(j.rounds_packed == 0 for j in res.jobs)
    assert sorted(j.finish_time for j in res.jobs) == [3600.0, 7200.0]
    never = _run(_trace(["ann", "bob"]), "never")
    assert [j.finish_time for j in never.jobs] == [j.finish_time for j in res.jobs]
    assert never.settings["cross_user"] == "never"


def test_one_users_pair_runs_under_mps_whatever_the_setting():
    for cross_user in ("timeslice", "mps", "never"):
        res = _run(_trace(["ann", "ann"]), cross_user)
        assert [j.finish_time for j in res.jobs] == pytest.approx([3600 / 0.61] * 2)
        assert "cross_user" not in res.settings  # one user: the record keeps its single-user shape


def test_several_users_scored_truthfully_do_no_worse_than_scored_as_one_user():
    """On a shared cluster (12 users), scoring two users' pairs with MPS speeds forms pairs that run
    time-sliced, below one job's throughput: more GPU time for the same work."""
    trace = tuple(with_users(generate_tesserae(60, 80, 3), 12, 3))
    lie, truth = _run(trace, "mps", "2x4:a100"), _run(trace, "timeslice", "2x4:a100")
    assert truth.avg_jct < lie.avg_jct
    assert sum(j.packed_s for j in truth.jobs) < sum(j.packed_s for j in lie.jobs)


def test_with_users_keeps_the_jobs_and_draws_users_deterministically():
    base = generate_tesserae(50, 80, 1)
    a, b = with_users(base, 4, 1), with_users(base, 4, 1)
    assert a == b and {j.user for j in a} <= {f"user{k}" for k in range(4)} and len({j.user for j in a}) > 1
    assert [dataclasses.replace(j, user="") for j in a] == list(base)
