"""The compiled consolidation walk (``placement/consolidate_jit.py``) against the Python walk and the
straightforward reference: the same plan, job map (same key order), placed order and pending
reasons, on one-type clusters of mixed node sizes with jobs larger than a node, pairs, and full
clusters (the rest waits for ``Priority``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, Job, Node
from tesserae_slurm.placement import consolidate_jit
from tesserae_slurm.placement.consolidate import Unit, place_consolidated, place_units
from tesserae_slurm.placement.reference import place_units_reference


def test_the_test_setup_installs_numba():
    assert consolidate_jit.available()


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
def test_compiled_walk_gives_the_python_walks_plan(round_):
    cluster, units = round_
    compiled = place_units(cluster, units, _jit=True)
    python = place_units(cluster, units, _jit=False)
    assert compiled == python == place_units_reference(cluster, units)
    assert list(compiled.placement.job_gpus().items()) == list(python.placement.job_gpus().items())
    if all(len(u.jobs) == 1 for u in units):  # the engine's entry for one unit per job, without Units
        order = [u.jobs[0] for u in units]
        assert place_consolidated(cluster, order, _jit=True) == compiled == place_consolidated(cluster, order, _jit=False)


def test_hints_the_walk_does_not_know_take_the_python_walk():
    """A sticky home or a second GPU type: the compiled walk is not used (it knows neither)."""
    cluster = Cluster((Node("a", 4, "a100"), Node("b", 4, "a100")))
    job = Job("x", 1, "resnet50", "32")
    homed = [Unit((job,), 1)]  # best fit would take node a; its home is b
    assert place_units(cluster, homed, _jit=True).placement.job_gpus()["x"] == (("b", 0),)
