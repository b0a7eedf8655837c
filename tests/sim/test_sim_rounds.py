"""The round bookkeeping's plan surgery: ``without`` drops finished jobs and hands the next round
a job -> GPUs map it did not recount; it must equal a recount, keys in the same order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Placement
from tesserae_slurm.sim.rounds import without


@st.composite
def plans(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    refs = [(f"n{i}", u) for i, s in enumerate(sizes) for u in range(s)]
    cells: dict[tuple[str, int], list[str]] = {r: [] for r in refs}
    for j in range(draw(st.integers(0, 8))):
        where = draw(st.permutations(refs))
        for r in [r for r in where if len(cells[r]) < 2][:draw(st.integers(1, 4))]:
            cells[r].append(f"j{j}")
    return Placement.from_lists({f"n{i}": [cells[(f"n{i}", u)] for u in range(s)] for i, s in enumerate(sizes)})


@settings(max_examples=150, deadline=None)
@given(plans(), st.sets(st.sampled_from([f"j{j}" for j in range(10)])))
def test_without_equals_a_recount(plan, gone):
    plan.job_gpus()  # memoized on the plan, as the simulator's decisions are
    left = without(plan, set(gone))
    recount = Placement(left.nodes)
    assert left == recount
    kept, counted = left.job_gpus(), recount.job_gpus()
    assert dict(kept) == dict(counted)
    position = {n: i for i, n in enumerate(left.nodes)}
    first = lambda j: min((position[n], u) for n, u in counted[j])  # noqa: E731 - two jobs may share it
    assert [first(j) for j in kept] == [first(j) for j in counted]
    assert left.jobs() == plan.jobs() - set(gone)
