"""The shell's fast JobView builders (tuple.__new__) equal the named tuple's constructor, field for field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import JobView, Placement, RoundDecision
from tesserae_slurm.sim.progress import Outcome
from tesserae_slurm.sim.rounds import _account, _Live, _view, job_of
from tesserae_slurm.sim.traces.record import TraceJob

floats = st.floats(0, 1e9, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(floats, st.floats(1, 1e9), floats, floats, floats, st.integers(0, 10**6), st.booleans(), st.floats(0.1, 10))
def test_view_equals_the_constructor(submit, duration, attained, executed, remaining, rounds, running, priority):
    t = TraceJob("j1", submit, 2, duration, "resnet50", "32", priority=priority)
    s = _Live(t, job_of(t), remaining=remaining, attained=attained, executed=executed, rounds_run=rounds)
    want = JobView(s.job, t.submit_time, s.attained, s.executed, s.rounds_run, running, t.duration, s.remaining,
                   t.priority)
    got = _view(s, running)
    assert type(got) is JobView and got == want
    assert [getattr(got, f) for f in JobView._fields] == [getattr(want, f) for f in JobView._fields]
    assert got.id == "j1" and got.num_gpus == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(1, 1e6), st.floats(0, 500), st.booleans()), min_size=1, max_size=6))
def test_accounting_refreshes_the_views_of_jobs_that_ran_on(jobs):
    """``_account`` refreshes, in its own pass, the view of every job that ran and did not finish, as
    ``_view(s, True)`` after the round; a finished job's view is left to the shell (it leaves)."""
    live, outcomes, views = {}, {}, {}
    for i, (duration, work, finishes) in enumerate(jobs):
        t = TraceJob(f"j{i}", 0.0, 1 + i % 3, duration, "resnet50", "32")
        live[t.job_id] = _Live(t, job_of(t), remaining=duration)
        views[t.job_id] = _view(live[t.job_id], False)
        outcomes[t.job_id] = Outcome(min(work, duration), 100.0 if finishes else None, 0.0)
    d = RoundDecision(Placement({}), (), (), (), (), (), ())
    assert _account(d, live, outcomes, 720.0, 360.0, views) == {j for j, o in outcomes.items() if o.finish is not None}
    for jid, o in outcomes.items():
        if o.finish is None:
            assert views[jid] == _view(live[jid], True) and views[jid].running
        else:
            assert not views[jid].running  # untouched
