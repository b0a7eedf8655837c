"""The shell's fast JobView builders (tuple.__new__) equal the named tuple's constructor, field for field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import JobView, Placement, RoundDecision
from tesserae_slurm.sim.progress import Outcome
from tesserae_slurm.sim.rounds import LiveJob, view_of, job_of
from tesserae_slurm.sim.traces.record import TraceJob

floats = st.floats(0, 1e9, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(floats, st.floats(1, 1e9), floats, floats, floats, st.integers(0, 10**6), st.booleans(), st.floats(0.1, 10))
def test_view_equals_the_constructor(submit, duration, attained, executed, remaining, rounds, running, priority):
    t = TraceJob("j1", submit, 2, duration, "resnet50", "32", priority=priority)
    s = LiveJob(t, job_of(t), remaining=remaining, attained=attained, executed=executed, rounds_run=rounds)
    want = JobView(s.job, t.submit_time, s.attained, s.executed, s.rounds_run, running, t.duration, s.remaining,
                   t.priority, site_priority=t.priority)  # the trace's priority is also the site's order
    got = view_of(s, running)
    assert type(got) is JobView and got == want
    assert [getattr(got, f) for f in JobView._fields] == [getattr(want, f) for f in JobView._fields]
    assert got.id == "j1" and got.num_gpus == 2
