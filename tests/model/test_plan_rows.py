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
from tesserae_slurm.sim.rounds import _busy_gpu_seconds, _without


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


@settings(max_examples=200, deadline=None)
@given(tables(), st.data())
def test_the_shells_table_surgery_equals_the_sets(case, data):
    """``_without`` (finished jobs leave), ``_busy_gpu_seconds`` (GPU by GPU, in order) and the
    engine's ``_with_partners`` (on a table: the form consolidation builds) give on a table what they
    give on the same plan as sets."""
    rows, ref = case
    gone = set(data.draw(st.lists(st.sampled_from(rows.ids), unique=True))) if rows.ids else set()
    a = _without(Placement.from_rows(rows), gone)
    want = Placement({n: tuple(slot - gone for slot in gpus) for n, gpus in ref.nodes.items()})
    assert a == want and dict(a.job_gpus()) == dict(want.job_gpus())
    assert list(a.job_gpus()) == [j for j in rows.ids if j not in gone]  # the table's order, kept
    held = {j: data.draw(st.sampled_from([0.5, 100.25, 359.0, 360.0, 400.0])) for j in gone}
    outcomes = {j: Outcome(1.0, h, 0.0) for j, h in held.items()}
    d = RoundDecision(Placement.from_rows(rows), (), (), (), (), (), (), {}, {}, 0.0, StageTimings())
    expected = 0.0  # GPU by GPU: a GPU is busy for the longest-held job on it (a full round if any stays)
    for gpus in ref.nodes.values():
        for slot in gpus:
            if slot:
                expected += 360.0 if slot - gone else max(min(held[j], 360.0) for j in slot)
    assert _busy_gpu_seconds(d, outcomes, 360.0, gone) == pytest.approx(expected)
    if all(len(s) < 2 for g in ref.nodes.values() for s in g):  # partners join lone jobs only
        chosen = data.draw(st.lists(st.sampled_from(rows.ids), unique=True)) if rows.ids else []
        pairs = [PackedPair(j, f"p{j}", 1.0, 1.0) for j in chosen]
        x = _with_partners(Placement.from_rows(rows), pairs)
        want = Placement({node: tuple(slot | {f"p{j}" for j in slot if j in chosen} for slot in gpus)
                          for node, gpus in ref.nodes.items()})
        assert x == want
        assert all(x.job_gpus()[f"p{j}"] == x.job_gpus()[j] for j in chosen)
