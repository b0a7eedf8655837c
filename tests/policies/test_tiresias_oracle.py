"""Tiresias' ranking against the straightforward first implementation (tests/oracles/tiresias.py)."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.tiresias import reference_rank

from policies.policy_helpers import inp, view
from tesserae_slurm.model import JobView
from tesserae_slurm.policies.tiresias import QueuedJob, TiresiasPolicy


@dataclass
class _Job:
    gpus: int
    served: float = 0.0
    running: bool = False


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.lists(st.booleans(), max_size=12)),
                min_size=1, max_size=12),
       st.sampled_from([0.0, 0.5, 2.0]), st.sampled_from(["gpu-time", "time"]))
def test_same_order_and_state_as_the_reference(rounds, knob, service):
    """Random rounds: arrivals, jobs running or not, service growing, jobs finishing."""
    policy = TiresiasPolicy(queue_limits=(500.0, 1500.0), promote_knob=knob, service=service)
    fast = slow = policy.initial_state()
    jobs: dict[str, _Job] = {}
    now, next_id = 0.0, 0
    for arrivals, finish, running in rounds:
        for _ in range(arrivals):
            jobs[f"j{next_id}"] = _Job(1 + next_id % 4)
            next_id += 1
        for jid in list(jobs)[:finish % 3]:
            if finish > 3:
                del jobs[jid]
        for (jid, j), r in zip(jobs.items(), running + [False] * len(jobs)):
            j.running = r
        views = [view(jid, j.gpus, served=j.served, running=j.running) for jid, j in jobs.items()]
        i = inp(views, now=now)
        ranking, fast = policy.rank(i, fast)
        order, slow = reference_rank(policy, i, slow)
        assert ranking.order == order
        assert dict(fast.jobs) == dict(slow.jobs)
        assert (fast.next_seq, fast.promotions, fast.demotions) == (slow.next_seq, slow.promotions, slow.demotions)
        for j in jobs.values():
            if j.running:
                j.served += 360.0
        now += 360.0


_ROUND = st.tuples(
    st.integers(0, 4),  # arrivals
    st.lists(st.integers(0, 30), max_size=3),  # jobs that finish (by position)
    st.lists(st.booleans(), max_size=20),  # running flags, in arrival order
    st.lists(st.sampled_from([0.0, 100.0, 360.0, 2000.0]), max_size=20),  # service each job gains
    st.sampled_from([0.0, 360.0, 720.0, 1000.0]),  # time to the next round (0: the same time again)
    st.sampled_from(["keep", "rebuilt", "shuffled"]),  # state as returned or rebuilt by hand; views reordered
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ROUND, min_size=1, max_size=15), st.sampled_from([0.0, 0.5, 2.0]),
       st.sampled_from(["gpu-time", "time"]), st.sampled_from([(500.0, 1500.0), (400.0,), ()]))
def test_same_rounds_as_the_reference(rounds, knob, service, limits):
    """Consecutive rounds: arrivals, finishes, running flags flipping, service crossing one or several
    limits (waiting jobs' too), promotion on and off; each implementation gets its own state back. A
    state rebuilt by hand (no layout, other key order) and views out of arrival order give the same."""
    policy = TiresiasPolicy(queue_limits=limits, promote_knob=knob, service=service)
    fast = slow = policy.initial_state()
    jobs: dict[str, _Job] = {}
    seen: dict[str, JobView] = {}
    now, next_id = 0.0, 0
    for arrivals, finish, running, gain, step, how in rounds:
        for _ in range(arrivals):
            jobs[f"j{next_id}"] = _Job(1 + next_id % 4)
            next_id += 1
        for k in finish:
            if jobs and k < 2 * len(jobs):
                jobs.pop(list(jobs)[k % len(jobs)])
        for (jid, j), r, g in zip(jobs.items(), running + [False] * len(jobs), gain + [0.0] * len(jobs)):
            j.running = r
            j.served += g
        # as the simulator does: a job whose view did not change passes the same JobView object again
        views = []
        for jid, j in jobs.items():
            v = seen.get(jid)
            if v is None or (v.executed_time, v.running) != (j.served, j.running):
                seen[jid] = v = view(jid, j.gpus, served=j.served, running=j.running)
            views.append(v)
        if how == "shuffled":
            views = views[1::2] + views[::2]
        elif how == "rebuilt":
            fast = dataclasses.replace(fast, jobs=MappingProxyType(dict(reversed(list(fast.jobs.items())))))
        i = inp(views, now=now)
        ranking, fast = policy.rank(i, fast)
        order, slow = reference_rank(policy, i, slow)
        assert ranking.order == order and not ranking.pairs
        assert dict(fast.jobs) == dict(slow.jobs)
        assert all(type(q) is QueuedJob for q in fast.jobs.values())
        assert (fast.next_seq, fast.last_now, fast.promotions, fast.demotions) == \
            (slow.next_seq, slow.last_now, slow.promotions, slow.demotions)
        now += step


@pytest.mark.parametrize("before", [((1e6,), "gpu-time"), ((1e6, 2e6), "gpu-time"), ((250.0, 1000.0), "time")])
def test_a_state_from_other_limits_is_checked_again(before):
    """Same JobView objects, but the state comes from a policy with other limits or service: every
    job's limit is checked again (the guard of the unchanged-view shortcut)."""
    views = [view("a", 2, served=600.0), view("b", 1, served=300.0, running=True), view("c", 4)]
    loose = TiresiasPolicy(queue_limits=before[0], service=before[1])
    _, state = loose.rank(inp(views, now=0.0), loose.initial_state())
    tight = TiresiasPolicy(queue_limits=(250.0, 1000.0), service="gpu-time")
    ranking, fast = tight.rank(inp(views, now=360.0), state)
    order, slow = reference_rank(tight, inp(views, now=360.0), state)
    assert ranking.order == order and dict(fast.jobs) == dict(slow.jobs) and fast.demotions == slow.demotions > 0


def test_state_survives_pickling_as_the_daemon_stores_it():
    """The daemon pickles the policy state between rounds: the same state comes back and ranks the same."""
    policy = TiresiasPolicy(queue_limits=(500.0,))
    views = [view("a", 2, served=300.0, running=True), view("b", 1, served=100.0), view("c", 1)]
    _, state = policy.rank(inp(views, now=0.0), policy.initial_state())
    back = pickle.loads(pickle.dumps(state))
    assert back == state and dict(back.jobs) == dict(state.jobs)
    later = inp([view("a", 2, served=660.0, running=True), *views[1:]], now=360.0)
    (r1, s1), (r2, s2) = policy.rank(later, state), policy.rank(later, back)
    assert r1 == r2 and s1 == s2 and s1.demotions == 1
