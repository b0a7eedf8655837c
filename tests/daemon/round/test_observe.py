"""observe: one listing of every job and one of the partition's nodes become the round's Snapshot; nodes
operators drained are left out like nodes Slurm reports down. (Foreign jobs: tests/daemon/test_foreign.py.)"""

from __future__ import annotations

from tesserae_slurm.daemon.round.observe import observe
from tesserae_slurm.slurm import SlurmJob, SlurmJobState as S
from tesserae_slurm.slurm.types import NodeGpus

from ..fake_slurm import managed, node


def test_one_listing_of_each_and_managed_jobs_by_id(world) -> None:
    world.slurm.jobs = {"7": managed(7), "8": SlurmJob(8, "x", "bob", S.PENDING, partition="tesserae"),
                        "9": managed(9, partition="other")}
    snap = observe(world.slurm, world.cfg, 5.0, {})
    assert world.slurm.methods(reads=True) == ["list_jobs", "list_nodes"]
    assert snap.time == 5.0 and list(snap.jobs) == ["7"]  # untagged or in another partition: not managed
    assert snap.jobs["7"].meta is not None and snap.jobs["7"].meta.model == "DCGAN"
    assert [(n.name, n.num_gpus) for n in snap.cluster.nodes] == [("node1", 4), ("node2", 4)]


def test_a_drained_node_is_left_out_with_the_reason_and_a_down_one_keeps_slurms(world) -> None:
    world.slurm.nodes = (node("node1"), node("node2"), node("node3", state="down"))
    snap = observe(world.slurm, world.cfg, 0.0, {"node2": "drained for tesserae by root", "node9": "gone"})
    assert [n.name for n in snap.cluster.nodes] == ["node1"]
    assert snap.excluded == {"node2": "drained for tesserae by root", "node3": "node down"}


def test_draining_keeps_the_gpus_foreign_jobs_hold_out_of_the_other_nodes(world) -> None:
    foreign = SlurmJob(57, "f", "bob", S.RUNNING, partition="other", nodes=("node1",), gpus=(NodeGpus("node1", (0,)),))
    world.slurm.jobs = {"57": foreign}
    snap = observe(world.slurm, world.cfg, 0.0, {"node2": "drained"})
    assert [(n.name, n.num_gpus) for n in snap.cluster.nodes] == [("node1", 3)]
    assert snap.gpu_index == {"node1": (1, 2, 3)}
