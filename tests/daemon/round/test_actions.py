"""From a decision to Slurm actions (pure): keep means no action; starts, preempts and migrations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.daemon.round.actions import plan_round, targets_of
from tesserae_slurm.harness.assignment import Assignment
from tesserae_slurm.model import PackedPair, Placement, RoundDecision


def decision(nodes: dict[str, list[list[str]]], packed: tuple[PackedPair, ...] = (),
             strategies: dict[str, str] | None = None) -> RoundDecision:
    return RoundDecision(Placement.from_lists(nodes), (), (), (), (), packed, (), strategies or {}, {})


def test_worked_example():
    d = decision({"n1": [["a", "b"], ["a", "b"], ["c"], []], "n2": [["d"], ["d"], [], []]},
                 packed=(PackedPair("a", "b", 0.7, 0.6, "10,14", None),), strategies={"a": "10,14"})
    actual = {"a": {"n1": (0, 1)}, "c": {"n2": (3,)}, "d": {"n1": (2, 3)}, "e": {"n2": (0,)}}
    plan = plan_round(d, actual, order=("e", "d", "c", "b", "a"))
    # a keeps its GPUs (its new partner changes nothing for it); b starts next to it; c and d move; e stops
    assert plan.kept == ("a",)
    assert [(x.kind, x.job_id) for x in plan.actions] == [
        ("preempt", "e"), ("migrate", "d"), ("migrate", "c"), ("start", "b")]
    assert [x.job_id for x in plan.stops] == ["e", "d", "c"] and [x.job_id for x in plan.starts] == ["d", "c", "b"]
    b = plan.targets["b"]
    assert (dict(b.gpus), b.partner) == ({"n1": (0, 1)}, "a")
    assert plan.targets["a"].strategy == "10,14"
    start_b = plan.actions[-1].assignment(round_id=5, mps_percentage=50)
    assert start_b == Assignment("b", 5, {"n1": (0, 1)}, partner="a", mps_percentage=50)
    alone = plan.actions[1].assignment(round_id=5, mps_percentage=50)
    assert alone.mps_percentage == 0 and alone.gpus == {"n2": (0, 1)}  # d moves to n2, alone


def test_multi_node_targets():
    t = targets_of(decision({"n1": [["x"]] * 4, "n2": [["x"]] * 4}))["x"]
    assert t.nodes == ("n1", "n2") and dict(t.gpus) == {"n1": (0, 1, 2, 3), "n2": (0, 1, 2, 3)}


NODES = ("n1", "n2", "n3")
JOBS = tuple("abcdefgh")


@st.composite
def placements(draw):  # type: ignore[no-untyped-def]
    """A random placement: each job on a random set of GPU slots, at most two jobs per GPU."""
    slots: dict[str, list[list[str]]] = {n: [[] for _ in range(4)] for n in NODES}
    for j in draw(st.lists(st.sampled_from(JOBS), unique=True, max_size=6)):
        free = [(n, g) for n in NODES for g in range(4) if len(slots[n][g]) < 2]
        for n, g in draw(st.lists(st.sampled_from(free), unique=True, min_size=1, max_size=3)) if free else []:
            slots[n][g].append(j)
    return slots


@settings(max_examples=200, deadline=None)
@given(placements(), placements())
def test_every_job_gets_exactly_the_action_its_gpu_sets_call_for(old, new):
    actual = targets_of(decision(old))
    plan = plan_round(decision(new), {j: t.gpus for j, t in actual.items()})
    target = plan.targets
    kinds = {a.job_id: a.kind for a in plan.actions}
    assert len(kinds) == len(plan.actions)  # at most one action per job
    for job in set(actual) | set(target):
        before, after = actual.get(job), target.get(job)
        if before is None:
            assert kinds[job] == "start"
        elif after is None:
            assert kinds[job] == "preempt"
        elif dict(before.gpus) == dict(after.gpus):
            assert job in plan.kept and job not in kinds  # no Slurm call for it
        else:
            assert kinds[job] == "migrate"
    # stops come first: GPUs are freed before anything is started on them
    order = [a.kind for a in plan.actions]
    assert order == sorted(order, key=lambda k: k == "start")
