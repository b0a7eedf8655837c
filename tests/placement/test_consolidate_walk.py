"""The compiled consolidation walk (``placement/consolidate_walk.py``) against the straightforward
reference (tests/oracles/): the same plan, placed order and pending reasons, on one-type clusters
of mixed node sizes with jobs larger than a node, pairs, and full clusters (the rest waits for
``Priority``); test_against_oracles.py adds homes and GPU types."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, Job, Node
from oracles.reference import place_units_reference
from tesserae_slurm.placement.consolidate import Unit, place_consolidated, place_units


@st.composite
def plain_rounds(draw):
    sizes = draw(st.lists(st.sampled_from([1, 2, 4, 4, 8]), min_size=1, max_size=13))
    # names whose text order is not node order: a job's GPUs on several nodes are listed in text order
    cluster = Cluster(tuple(Node(f"n{(7 * i) % 13}", g, "a100") for i, g in enumerate(sizes)))
    pairs = st.booleans() if draw(st.booleans()) else st.just(False)  # no pair at all: the per-array build
    specs = draw(st.lists(st.tuples(st.sampled_from([1, 1, 1, 2, 3, 4, 4, 6, 8, 12, 16, 32]), pairs,
                                    st.sampled_from([None, ("a100",)])), max_size=60))
    units = []
    for i, (n, pair, types) in enumerate(specs):
        jobs = (Job(f"j{i}", n, "resnet50", "32"),) + ((Job(f"p{i}", n, "resnet50", "32"),) if pair else ())
        units.append(Unit(jobs, -1, types))
    return cluster, units


@settings(max_examples=300, deadline=None)
@given(plain_rounds())
def test_compiled_walk_gives_the_reference_plan(round_):
    cluster, units = round_
    compiled = place_units(cluster, units)
    want = place_units_reference(cluster, units)
    assert compiled == want
    assert list(compiled.placement.job_gpus()) == list(want.placed)  # keys in placed order
    if all(len(u.jobs) == 1 for u in units):  # the engine's entry for one unit per job, without Units
        order = [u.jobs[0] for u in units]
        assert place_consolidated(cluster, order) == compiled


def test_a_sticky_home_comes_before_best_fit():
    cluster = Cluster((Node("a", 4, "a100"), Node("b", 4, "a100")))
    job = Job("x", 1, "resnet50", "32")
    homed = [Unit((job,), 1)]  # best fit would take node a; its home is b
    assert place_units(cluster, homed).placement.job_gpus()["x"] == (("b", 0),)
