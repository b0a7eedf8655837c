"""Jobs the daemon does not manage on its nodes (pure): they keep exactly their own GPUs, and say so."""

from __future__ import annotations

from tesserae_slurm.site.config import SiteConfig
from tesserae_slurm.daemon.round.inputs import current_placement
from tesserae_slurm.daemon.round.observe import build_snapshot, in_slurm_indices
from tesserae_slurm.daemon.round.actions import plan_round
from tesserae_slurm.model import Placement, RoundDecision
from tesserae_slurm.slurm import SlurmJob, SlurmJobState as S, SlurmNode
from tesserae_slurm.slurm.types import NodeGpus

NODES = (SlurmNode("node1", "idle", gpus=4), SlurmNode("node2", "mixed", gpus=4))


def foreign(job_id: int, node: str, idx: tuple[int, ...], partition: str = "other", gres: int = 0) -> SlurmJob:
    return SlurmJob(job_id, "f", "bob", S.RUNNING, partition=partition, nodes=(node,),
                    gpus=(NodeGpus(node, idx),) if idx else (), gpus_per_node=gres)


def test_a_foreign_job_takes_its_own_gpus_only_and_is_named():
    snap = build_snapshot(0.0, [foreign(57, "node2", (0, 1))], NODES, SiteConfig())
    assert snap.excluded == {}
    assert [(n.name, n.num_gpus) for n in snap.cluster.nodes] == [("node1", 4), ("node2", 2)]
    assert snap.gpu_index == {"node2": (2, 3)}
    assert snap.held_by_others == ("node2: 2 GPUs held by job 57 (user bob, not managed)",)


def test_a_node_whose_gpus_are_all_foreign_is_left_out_with_the_jobs_named():
    jobs = [foreign(57, "node2", (0, 1, 2)), foreign(58, "node2", (3,), partition="tesserae")]
    snap = build_snapshot(0.0, jobs, NODES, SiteConfig())
    assert [n.name for n in snap.cluster.nodes] == ["node1"]
    assert snap.excluded["node2"] == ("3 GPUs held by job 57 (user bob, not managed); "
                                      "1 GPU held by job 58 (user bob, not managed)")


def test_jobs_without_gpus_or_on_other_nodes_block_nothing():
    jobs = [foreign(60, "node2", ()), foreign(61, "node9", (0,))]
    snap = build_snapshot(0.0, jobs, NODES, SiteConfig())
    assert [n.num_gpus for n in snap.cluster.nodes] == [4, 4] and not snap.held_by_others
    # GPUs asked for but indices unreadable: the whole node, rather than a double booking
    snap = build_snapshot(0.0, [foreign(62, "node1", (), gres=2)], NODES, SiteConfig())
    assert [n.name for n in snap.cluster.nodes] == ["node2"] and "job 62" in snap.excluded["node1"]


def test_engine_indices_map_to_the_free_slurm_gpus_both_ways():
    index = {"node2": (2, 3)}
    snap = build_snapshot(0.0, [foreign(57, "node2", (0, 1))], NODES, SiteConfig())
    # a managed job on node2 GPU 3 is the engine's GPU 1; one on a foreign-held GPU is not placed at all
    current, problems = current_placement(snap.cluster, {"a": {"node2": (3,)}, "b": {"node2": (0,)}}, index)
    assert not problems and current.job_gpus() == {"a": (("node2", 1),)}
    decision = RoundDecision(Placement.from_lists({"node1": [[], [], [], []], "node2": [["c"], ["a"]]}),
                             (), (), (), (), (), (), {}, {})
    plan = plan_round(decision, {"a": {"node2": (3,)}, "b": {"node2": (0,)}}, gpu_index=index)
    assert dict(plan.targets["c"].gpus) == {"node2": (2,)} and plan.kept == ("a",)
    assert [(x.kind, x.job_id) for x in plan.actions] == [("preempt", "b"), ("start", "c")]


def test_the_recorded_placement_is_in_slurm_indices_with_the_foreign_gpus_marked():
    snap = build_snapshot(0.0, [foreign(57, "node2", (0, 2))], NODES, SiteConfig())
    engine = Placement.from_lists({"node1": [["a"], [], [], []], "node2": [["c"], ["d"]]})
    shown = in_slurm_indices(engine, snap)
    assert [sorted(s) for s in shown.nodes["node2"]] == [["foreign:57"], ["c"], ["foreign:57"], ["d"]]
    assert shown.nodes["node1"] == engine.nodes["node1"]
