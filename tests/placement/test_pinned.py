"""Pinned placement (placement/pinned.py): running jobs keep their GPUs, new ones go onto what is free,
and a job that waits says why the way Slurm's select/cons_tres would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, Job, PendingReason, Placement
from tesserae_slurm.placement.pinned import place_beside

MIXED = Cluster.from_spec("1x4:a100,1x4:v100")


def job(jid: str, gpus: int) -> Job:
    return Job(jid, gpus, "resnet50", "64")


def _running(x_gpus: int, y_gpus: int) -> Placement:
    """X on the a100 node's first GPUs, Y on the v100 node's."""
    names = [n.name for n in MIXED.nodes]
    return Placement({names[0]: tuple(frozenset({"X"}) if i < x_gpus else frozenset() for i in range(4)),
                      names[1]: tuple(frozenset({"Y"}) if i < y_gpus else frozenset() for i in range(4))})


def test_running_jobs_keep_their_gpus_and_new_ones_take_the_free_ones():
    current = _running(2, 2)
    res = place_beside(MIXED, current, [job("X", 2), job("Y", 2), job("Z", 2)])
    assert res.placed == ("X", "Y", "Z") and res.pending == ()
    gpus = res.placement.job_gpus()
    assert gpus["X"] == current.job_gpus()["X"] and gpus["Y"] == current.job_gpus()["Y"]
    assert not set(gpus["Z"]) & (set(gpus["X"]) | set(gpus["Y"]))


def test_a_job_with_exactly_enough_free_gpus_of_two_types_waits_for_consolidation():
    # 2 a100 and 2 v100 free: 4 GPUs, as many as Z asks, but a job runs on one GPU type
    res = place_beside(MIXED, _running(2, 2), [job("X", 2), job("Y", 2), job("Z", 4)])
    assert [(p.job_id, p.reason, p.detail) for p in res.pending] == [
        ("Z", PendingReason.CONSOLIDATION, "needs 4 GPUs; 4 free")]


def test_a_job_with_too_few_free_gpus_waits_for_resources_and_one_too_big_is_unsatisfiable():
    res = place_beside(MIXED, _running(2, 3), [job("X", 2), job("Y", 3), job("Z", 4), job("W", 8)])
    assert [(p.job_id, p.reason, p.detail) for p in res.pending] == [
        ("Z", PendingReason.RESOURCES, "needs 4 GPUs; 3 free"),
        ("W", PendingReason.UNSATISFIABLE, "needs 8 GPUs; 3 free")]


def test_a_node_with_one_free_gpu_takes_a_one_gpu_job_and_a_waiting_job_does_not_stop_the_walk():
    res = place_beside(MIXED, _running(3, 2), [job("X", 3), job("Y", 2), job("Z", 4), job("A", 1), job("B", 2)])
    assert res.placed == ("X", "Y", "A", "B") and [p.job_id for p in res.pending] == ["Z"]
    nodes = {j: {node for node, _ in g} for j, g in res.placement.job_gpus().items()}
    assert nodes["A"] == {MIXED.nodes[0].name} and nodes["B"] == {MIXED.nodes[1].name}


def test_an_empty_cluster_without_a_current_plan_places_in_order():
    res = place_beside(MIXED, None, [job("A", 4), job("B", 4), job("C", 1)])
    assert res.placed == ("A", "B") and [(p.job_id, p.reason) for p in res.pending] == [
        ("C", PendingReason.RESOURCES)]


def test_a_job_larger_than_every_gpu_type_is_unsatisfiable_on_three_types():
    # 8 a100, 4 v100, 4 k80: 10 GPUs exceed the largest type (8) though the cluster has 16
    cluster = Cluster.from_spec("2x4:a100,1x4:v100,1x4:k80")
    res = place_beside(cluster, None, [job("big", 10), job("eight", 8)])
    assert res.placed == ("eight",)
    assert [(p.job_id, p.reason) for p in res.pending] == [("big", PendingReason.UNSATISFIABLE)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 5), max_size=7), st.integers(0, 4), st.integers(0, 4))
def test_each_new_job_takes_exactly_its_gpus_on_one_node_and_waits_only_when_no_node_has_them(sizes, x, y):
    """Invariants of the walk on one node per GPU type: a placed job holds exactly the GPUs it asks
    for, all on one node, none held by another job; a job waits only when, at its turn, no node has
    that many free."""
    current = _running(x, y)
    jobs = [job(j, n) for j, n in (("X", x), ("Y", y)) if n]
    jobs += [job(f"j{i}", n) for i, n in enumerate(sizes)]
    res = place_beside(MIXED, current if x or y else None, jobs)
    gpus = res.placement.job_gpus()
    assert sorted(gpus) == sorted(res.placed) and len(res.placed) + len(res.pending) == len(jobs)
    held = [g for refs in gpus.values() for g in refs]
    assert len(held) == len(set(held))
    free = {n.name: n.num_gpus for n in MIXED.nodes}
    waiting = {p.job_id for p in res.pending}
    for j in jobs:
        if j.id in waiting:
            assert max(free.values()) < j.num_gpus, (j, free)
            continue
        assert len(gpus[j.id]) == j.num_gpus and len({node for node, _ in gpus[j.id]}) == 1
        free[gpus[j.id][0][0]] -= j.num_gpus
