"""Plans held as tables (``PlanRows``): every query answers as the per-GPU sets of the same plan
do, the sets built from the table are the plan's, and a plan turns into a table and back unchanged.
The oracle is a Placement built from the same cells independently of the table code."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.engine import _with_partners
from tesserae_slurm.model import Cluster, InputError, Node, PackedPair, Placement, PlanRows
from tesserae_slurm.model.decision import RoundDecision, StageTimings
from tesserae_slurm.sim.progress import Outcome
from tesserae_slurm.sim.rounds import busy_gpu_seconds, without


@st.composite
def tables(draw):
    """Nodes of 1-6 GPUs with names out of order (a job across nodes sorts its GPUs by name), jobs
    of 1-8 GPUs, at most two per GPU, each in either column; returns the table and its cells."""
    sizes = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=6)))
    names = tuple(f"n{(7 * i) % 13}" for i in range(len(sizes)))
    at = [(i, u) for i, s in enumerate(sizes) for u in range(s)]
    cells: dict[tuple[int, int], list[str]] = {r: [] for r in at}
    for j in range(draw(st.integers(0, 12))):
        free = [r for r in draw(st.permutations(at)) if len(cells[r]) < 2][:draw(st.sampled_from([1, 1, 2, 4, 8, 3]))]
        for r in free:
            cells[r].append(f"j{j}")
    present = sorted({j for c in cells.values() for j in c}, key=lambda j: int(j[1:]))
    ids = tuple(draw(st.permutations(present)))
    number = {j: k for k, j in enumerate(ids)}
    table = np.full((sum(sizes), 2), -1, dtype=np.int64)
    for row, r in enumerate(at):
        for col, j in zip(draw(st.permutations([0, 1]))[:len(cells[r])], cells[r]):
            table[row, col] = number[j]
    plan = Placement.from_lists({names[i]: [cells[(i, u)] for u in range(s)] for i, s in enumerate(sizes)})
    return PlanRows(names, sizes, ids, table), plan


@settings(max_examples=300, deadline=None)
@given(tables())
def test_a_table_answers_as_its_sets(case):
    rows, ref = case
    p = Placement.from_rows(rows)
    assert p.rows() is rows
    assert p.jobs() == ref.jobs() and p.busy_gpus() == ref.busy_gpus()
    assert list(p.job_gpus()) == list(rows.ids)  # keys by job number
    assert dict(p.job_gpus()) == dict(ref.job_gpus())
    assert list(p.job_nodes().items()) == [(j, p.job_gpus()[j][0][0]) for j in rows.ids]
    assert dict(Placement.from_rows(rows).job_nodes()) == {j: g[0][0] for j, g in ref.job_gpus().items()}
    assert p == ref and Placement.from_rows(rows).nodes == ref.nodes  # the sets, built from the table
    assert list(p.nodes) == list(rows.names)
    assert pickle.loads(pickle.dumps(p)) == ref


@settings(max_examples=200, deadline=None)
@given(tables())
def test_a_plan_turns_into_a_table_and_back(case):
    rows, ref = case
    again = ref.as_rows(rows.names, rows.sizes)
    assert again is not None and again.ids == tuple(ref.job_gpus())
    back = Placement.from_rows(again)
    assert back == ref and list(back.job_gpus().items()) == list(ref.job_gpus().items())
    assert ref.as_rows(rows.names[::-1], rows.sizes[::-1]) is None or rows.names[::-1] == rows.names
    assert ref.as_rows(rows.names, rows.sizes[:-1] + (rows.sizes[-1] + 1,)) is None
    p = Placement.from_rows(rows)
    assert p.as_rows(rows.names, rows.sizes) is rows


def test_check_fits_reads_a_tables_shape():
    cluster = Cluster((Node("a", 2, "a100"), Node("b", 4, "a100")))
    table = np.full((6, 2), -1, dtype=np.int64)
    table[0, 0] = 0
    Placement.from_rows(PlanRows(("a", "b"), (2, 4), ("j",), table)).check_fits(cluster)
    with pytest.raises(InputError, match="lists 4 GPUs"):
        Placement.from_rows(PlanRows(("a", "b"), (4, 2), ("j",), table)).check_fits(cluster)


def test_a_pickle_of_the_former_dataclass_still_loads():
    """Placements pickled before plans could be tables carried ``{"nodes", "_memo"}`` as state."""
    p = object.__new__(Placement)
    p.__setstate__({"nodes": {"n": (frozenset({"a"}),)}, "_memo": {"job_gpus": {}}})
    assert p == Placement.from_lists({"n": [["a"]]}) and dict(p.job_gpus()) == {"a": (("n", 0),)}


@settings(max_examples=200, deadline=None)
@given(tables(), st.data())
def test_the_shells_table_surgery_equals_the_sets(case, data):
    """``without`` (finished jobs leave), ``busy_gpu_seconds`` (GPU by GPU, in order) and the
    engine's ``_with_partners`` give on a table what they give on the same plan as sets."""
    rows, ref = case
    built = Placement.built(ref.nodes, {j: ref.job_gpus()[j] for j in rows.ids})  # same keys order
    gone = set(data.draw(st.lists(st.sampled_from(rows.ids), unique=True))) if rows.ids else set()
    a, b = without(Placement.from_rows(rows), gone), without(built, gone)
    assert a == b and list(a.job_gpus().items()) == list(b.job_gpus().items())
    held = {j: data.draw(st.sampled_from([0.5, 100.25, 359.0, 360.0, 400.0])) for j in gone}
    outcomes = {j: Outcome(1.0, h, 0.0) for j, h in held.items()}
    for plan in (Placement.from_rows(rows), built):
        d = RoundDecision(plan, (), (), (), (), (), (), {}, {}, 0.0, StageTimings())
        assert busy_gpu_seconds(d, outcomes, 360.0, gone) == \
            busy_gpu_seconds(RoundDecision(ref, (), (), (), (), (), (), {}, {}, 0.0, StageTimings()), outcomes, 360.0, gone)
    if all(len(s) < 2 for g in ref.nodes.values() for s in g):  # partners join lone jobs only
        chosen = data.draw(st.lists(st.sampled_from(rows.ids), unique=True)) if rows.ids else []
        pairs = [PackedPair(j, f"p{j}", 1.0, 1.0) for j in chosen]
        x, y = _with_partners(Placement.from_rows(rows), pairs), _with_partners(built, pairs)
        assert x == y and list(x.job_gpus().items()) == list(y.job_gpus().items())
