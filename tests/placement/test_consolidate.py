"""Consolidated placement (Listing 1): hand cases and properties checked against a replay oracle."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.model import Cluster, Job, PendingReason
from tesserae_slurm.placement.consolidate import place_consolidated


def jobs(*sizes: int) -> list[Job]:
    return [Job(f"j{i}", n, "resnet50", "32") for i, n in enumerate(sizes)]


def nodes_of(result, job_id):
    return {node for node, _ in result.placement.job_gpus()[job_id]}


@pytest.mark.parametrize(
    "spec,sizes,placed,pending",
    [
        # 2 nodes x 4: the 4-GPU job takes a whole node; best fit puts both 1-GPU jobs on the other node.
        ("2x4", (4, 1, 1), ("j0", "j1", "j2"), {}),
        # 8-GPU job takes two whole nodes; nothing else fits; the 1-GPU job is not reached (cluster full).
        ("2x4", (8, 1), ("j0",), {"j1": PendingReason.PRIORITY}),
        # 3 free GPUs spread 1+2 after j0(3) and j1(2) on 2x4? j0 on node1 (1 left), j1 on node2 (2 left):
        # a 3-GPU job has 3 free GPUs but no single node with 3 -> Consolidation; then a 1-GPU job backfills.
        ("2x4", (3, 2, 3, 1), ("j0", "j1", "j3"), {"j2": PendingReason.CONSOLIDATION}),
        # Not enough free GPUs at all -> Resources; backfill continues with a smaller job.
        ("1x4", (3, 2, 1), ("j0", "j2"), {"j1": PendingReason.RESOURCES}),
        # Larger than the whole cluster -> Unsatisfiable.
        ("1x4", (8, 1), ("j1",), {"j0": PendingReason.UNSATISFIABLE}),
        # 6 GPUs on 4-GPU nodes: one whole node plus 2 GPUs best-fit elsewhere (two nodes).
        ("3x4", (1, 6), ("j0", "j1"), {}),
    ],
    ids=["whole-node", "cluster-full", "fragmented", "resources", "too-large", "remainder"],
)
def test_hand_cases(spec, sizes, placed, pending):
    r = place_consolidated(Cluster.from_spec(spec), jobs(*sizes))
    assert r.placed == placed
    assert {p.job_id: p.reason for p in r.pending} == pending


def test_best_fit_keeps_a_node_idle():
    r = place_consolidated(Cluster.from_spec("2x4"), jobs(1, 1, 4))
    assert nodes_of(r, "j0") == nodes_of(r, "j1")  # both small jobs on one node ...
    assert r.placed == ("j0", "j1", "j2")  # ... so the 4-GPU job still finds an idle node


def test_one_gpu_type_per_job():
    c = Cluster.from_spec("1x4:v100,1x4:k80")
    r = place_consolidated(c, jobs(2, 4, 2))
    for j in r.placed:
        types = {c.node(n).gpu_type for n in nodes_of(r, j)}
        assert len(types) == 1


cluster_specs = st.sampled_from(["1x4", "2x4", "3x4", "2x2", "4x4", "2x8", "2x4:a,1x2:b"])
job_sizes = st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=0, max_size=14)


@settings(max_examples=150, deadline=None)
@given(cluster_specs, job_sizes)
def test_properties_against_replay(spec, sizes):
    cluster = Cluster.from_spec(spec)
    order = jobs(*sizes)
    r = place_consolidated(cluster, order)
    by_id = {j.id: j for j in order}
    gpus = r.placement.job_gpus()
    # every job exactly once, placed or pending, in policy order
    assert [j for j in r.placed] == [j.id for j in order if j.id in set(r.placed)]
    assert set(r.placed) | {p.job_id for p in r.pending} == set(by_id)
    assert not set(r.placed) & {p.job_id for p in r.pending}
    # no packing here: one job per GPU, each placed job gets exactly its GPU count
    for gs in r.placement.nodes.values():
        assert all(len(slot) <= 1 for slot in gs)
    for j in r.placed:
        assert len(gpus[j]) == by_id[j].num_gpus
        used = {n for n, _ in gpus[j]}
        # the node count itself: test_placed_jobs_use_the_fewest_nodes_possible_when_their_turn_came
        assert len({cluster.node(n).gpu_type for n in used}) == 1
    # replay oracle for the reasons: GPUs free when each job's turn came
    free = cluster.total_gpus
    for job in order:
        if job.id in r.placed:
            free -= job.num_gpus
            continue
        reason, detail = next((p.reason, p.detail) for p in r.pending if p.job_id == job.id)
        if reason is not PendingReason.PRIORITY:  # the free count when its turn came (a memo per count)
            assert detail == f"needs {job.num_gpus} GPUs; {free} free"
        if reason is PendingReason.PRIORITY:
            assert free == 0
        elif reason is PendingReason.RESOURCES:
            assert 0 < free < job.num_gpus
        elif reason is PendingReason.CONSOLIDATION:
            assert free >= job.num_gpus
        else:
            by_type: dict[str, int] = {}
            for n in cluster.nodes:
                by_type[n.gpu_type] = by_type.get(n.gpu_type, 0) + n.num_gpus
            assert job.num_gpus > max(by_type.values())


def _fewest_nodes(cluster: Cluster, free: dict[str, int], n: int) -> int:
    """Brute force: the fewest nodes of one GPU type whose free GPUs add up to ``n`` (0: none)."""
    for k in range(1, len(cluster.nodes) + 1):
        for group in itertools.combinations(cluster.nodes, k):
            if len({node.gpu_type for node in group}) == 1 and sum(free[node.name] for node in group) >= n:
                return k
    return 0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["3x4", "2x8,2x4", "1x8,2x4,3x2", "2x4:a,1x2:b,2x2:a", "1x6,2x4,1x2"]),
       st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12]), min_size=1, max_size=12))
def test_placed_jobs_use_the_fewest_nodes_possible_when_their_turn_came(spec, sizes):
    """Replay the walk: each placed job spans the minimum number of nodes that could hold it given
    the GPUs free at its turn (brute force over node subsets), on clusters of mixed node sizes."""
    cluster = Cluster.from_spec(spec)
    order = jobs(*sizes)
    r = place_consolidated(cluster, order)
    gpus = r.placement.job_gpus()
    free = {node.name: node.num_gpus for node in cluster.nodes}
    for job in order:
        if job.id not in gpus:
            continue
        used = {name for name, _ in gpus[job.id]}
        assert len(used) == _fewest_nodes(cluster, free, job.num_gpus), (job, free, gpus[job.id])
        for name, _ in gpus[job.id]:
            free[name] -= 1
