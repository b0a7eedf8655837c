"""decide: the policy's order, the engine's placement in that order, the plan of Slurm actions, and the
decision as recorded where foreign jobs hold GPUs."""

from __future__ import annotations

from tesserae_slurm.daemon.round.decide import decide_round
from tesserae_slurm.site.partition import scheduling_profile
from tesserae_slurm.site.scheduler import engine_config, site_policy
from tesserae_slurm.slurm import SlurmJob, SlurmJobState as S
from tesserae_slurm.slurm.types import NodeGpus

from ..fake_slurm import managed
from .world import inputs_of


def _decide(world, snap, inp):
    policy = site_policy(world.cfg)
    return decide_round(policy, policy.initial_state(), inp, snap, scheduling_profile("a100"), world.cfg,
                        engine_config(world.cfg), {})


def test_fifo_places_in_arrival_order_consolidated_and_the_plan_starts_them(world) -> None:
    snap, inp = inputs_of(world, managed(1, 2, submit_time=1), managed(2, 4, submit_time=2),
                          managed(3, 4, submit_time=3))
    d = _decide(world, snap, inp)
    assert d.order == ("1", "2", "3")
    gpus = {j: sorted(d.decision.gpus_of(j)) for j in ("1", "2")}
    assert len({n for n, _ in gpus["1"]}) == len({n for n, _ in gpus["2"]}) == 1  # each on one node
    assert [p.job_id for p in d.decision.pending] == ["3"]  # 2 GPUs left for its 4: it waits
    assert [(a.kind, a.job_id) for a in d.plan.actions] == [("start", "1"), ("start", "2")]
    assert d.plan.targets["2"].gpus == dict([(gpus["2"][0][0], (0, 1, 2, 3))])
    assert d.decision_s >= d.rank_s >= 0.0


def test_where_a_foreign_job_holds_gpus_the_plan_and_the_record_use_slurms_indices(world) -> None:
    world.slurm.nodes = world.slurm.nodes[:1]
    foreign = SlurmJob(57, "f", "bob", S.RUNNING, partition="other", nodes=("node1",),
                       gpus=(NodeGpus("node1", (0, 1)),))
    snap, inp = inputs_of(world, foreign, managed(1, 2, submit_time=1), managed(2, 1, submit_time=2))
    d = _decide(world, snap, inp)
    assert d.plan.targets["1"].gpus == {"node1": (2, 3)}  # the engine's GPUs 0-1 are Slurm's 2-3
    assert [sorted(s) for s in d.decision.placement.nodes["node1"]] == [["foreign:57"], ["foreign:57"], ["1"], ["1"]]
    (waiting,) = d.decision.pending
    assert waiting.job_id == "2" and "GPUs held by jobs tesserae does not manage: node1: 2 GPUs held by job 57" \
        in waiting.detail


def test_an_operators_pin_places_the_job_on_the_nodes_it_names(world) -> None:
    from tesserae_slurm.placement.node_rules import NodeRule

    snap, inp = inputs_of(world, managed(1, 2, submit_time=1))
    policy = site_policy(world.cfg)
    d = decide_round(policy, policy.initial_state(), inp, snap, scheduling_profile("a100"), world.cfg,
                     engine_config(world.cfg), {"1": NodeRule(frozenset({"node2"}), text="pinned to node2")})
    assert dict(d.plan.targets["1"].gpus) == {"node2": (0, 1)}  # node1 would come first without the pin


def test_a_policy_that_ranks_by_speed_gets_the_clusters_speeds(tmp_path) -> None:
    from .world import make_world

    world = make_world(tmp_path, scheduler={"policy": "themis"})
    snap, inp = inputs_of(world, managed(1, 4, submit_time=1), managed(2, 4, submit_time=2),
                          managed(3, 4, submit_time=3))
    d = _decide(world, snap, inp)
    assert sorted(d.order) == ["1", "2", "3"] and len(d.plan.starts) == 2
