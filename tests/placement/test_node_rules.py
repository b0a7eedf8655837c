"""Operators' node rules (`tesserae pin|keep-off`) in the engine: placement, packing and migration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.reference import place_units_reference
from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.placement.node_rules import NodeRule, NodeRules
from tesserae_slurm.model import Cluster, Job, Node, PendingReason, Placement
from tesserae_slurm.placement.consolidate import Unit, place_units
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim.invariants import check_round

A100 = load_profile("a100")


def run(cluster, jobs, current=None, rules=None, **cfg):
    d = decide(RoundRequest(cluster, tuple(jobs), current, (), EngineConfig(**cfg), rules or {}), A100)
    check_round(d, {j.id: j for j in jobs}, current or Placement.empty(cluster))
    return d


def pin(*nodes, text=""):
    return NodeRule(frozenset(nodes), False, text)


def keep_off(*nodes, text=""):
    return NodeRule(frozenset(nodes), True, text)


def nodes_of(d, job):
    return {node for node, _ in d.gpus_of(job)}


def test_a_pinned_job_goes_to_its_node_not_the_best_fit():
    cluster = Cluster.from_spec("3x4:a100")  # node1..node3
    jobs = [Job("a", 2, "resnet50", "32"), Job("b", 2, "resnet50", "32", no_pack=True)]
    assert nodes_of(run(cluster, jobs), "b") == {"node1"}  # best fit: beside a
    d = run(cluster, jobs, rules={"b": pin("node3")})
    assert nodes_of(d, "a") == {"node1"} and nodes_of(d, "b") == {"node3"}


def test_a_pinned_job_is_consolidated_within_its_nodes_or_waits_with_the_reason():
    cluster = Cluster.from_spec("4x4:a100")
    big = Job("big", 8, "resnet50", "32")
    d = run(cluster, [big], rules={"big": pin("node2", "node4")})
    assert nodes_of(d, "big") == {"node2", "node4"}
    # one of its nodes is half taken: 8 GPUs do not fit on node2 + node4 although 14 are free elsewhere
    small = Job("small", 2, "resnet50", "32", no_pack=True)
    other = Job("other", 8, "resnet50", "32")  # no rule: that big failed on its nodes says nothing of others
    d = run(cluster, [small, big, other],
            rules={"small": pin("node2"), "big": pin("node2", "node4", text="pinned to X")})
    assert nodes_of(d, "small") == {"node2"} and nodes_of(d, "other") == {"node1", "node3"}
    assert d.pending == ((("big", PendingReason.NODES, "pinned to X; needs 8 GPUs; 14 free in the cluster")),)
    # a 6-GPU job pinned to two 4-GPU nodes spreads over them (it fits in no node it may use)
    d = run(Cluster((Node("n1", 4, "a100"), Node("n2", 4, "a100"), Node("n3", 8, "a100"))),
            [Job("six", 6, "resnet50", "32")], rules={"six": pin("n1", "n2")})
    assert nodes_of(d, "six") == {"n1", "n2"}


def test_a_job_kept_off_nodes_never_lands_there_and_a_running_one_is_moved():
    cluster = Cluster.from_spec("2x4:a100")
    jobs = [Job("a", 2, "resnet50", "32", no_pack=True), Job("b", 2, "resnet50", "32", no_pack=True)]
    first = run(cluster, jobs)
    assert nodes_of(first, "a") == nodes_of(first, "b") == {"node1"}
    d = run(cluster, jobs, first.placement, rules={"b": keep_off("node1")})
    assert nodes_of(d, "b") == {"node2"} and d.migrated == ("b",) and nodes_of(d, "a") == {"node1"}
    # the move's reason names the rule, not a job it made room for
    assert [(m.job, m.action, m.cause, m.for_jobs) for m in d.moves] == [("b", "migrate", "rule", ())]
    assert d.moves[0].detail == "an operator's node rule keeps it off its GPUs; cost 60 GPU-s"
    # kept off every node: it waits (a preemption, since it ran) with the rule as its reason
    d = run(cluster, jobs, first.placement, rules={"b": keep_off("node1", "node2")})
    assert d.preempted == ("b",) and d.pending[0][:2] == ("b", PendingReason.NODES)
    assert [(m.job, m.action, m.cause, m.speed_after) for m in d.moves] == [("b", "preempt", "rule", 0.0)]


def test_migration_keeps_a_running_job_where_its_rule_already_holds():
    """Relabeling stays free among nodes every rule treats alike: a job pinned to node[2-3] that runs
    on node3 is not moved to node2 just because the logical plan (best fit) chose node2."""
    cluster = Cluster.from_spec("3x4:a100")
    a = Job("a", 4, "resnet50", "32")
    running = Placement.from_lists({"node1": [[]] * 4, "node2": [[]] * 4, "node3": [["a"]] * 4})
    d = run(cluster, [a], running, rules={"a": pin("node2", "node3")})
    assert nodes_of(d, "a") == {"node3"} and d.migrated == () and d.kept == ("a",)
    d = run(cluster, [a], running, rules={"a": pin("node1")})
    assert nodes_of(d, "a") == {"node1"} and d.migrated == ("a",)


def test_packing_puts_a_job_only_on_a_partner_whose_nodes_it_may_use():
    cluster = Cluster.from_spec("2x2:a100")
    jobs = [Job("a", 2, "resnet50", "32"), Job("b", 2, "resnet50", "32"), Job("c", 2, "PointNet", "32")]
    free = run(cluster, jobs)
    assert [p.partner for p in free.packed] == ["c"]
    for node in ("node1", "node2"):
        d = run(cluster, jobs, rules={"c": pin(node)})
        host = d.packed[0].placed
        assert [p.partner for p in d.packed] == ["c"] and nodes_of(d, host) == nodes_of(d, "c") == {node}
    d = run(cluster, jobs, rules={"c": keep_off("node1", "node2")})
    assert d.packed == () and [p.job_id for p in d.pending] == ["c"]  # no GPU left when its turn came


def test_a_partner_taken_under_one_rule_is_not_offered_under_the_next():
    cluster = Cluster.from_spec("3x2:a100")
    jobs = [Job(x, 2, "resnet50", "32") for x in "abx"] + [Job("c", 2, "PointNet", "32"), Job("d", 2, "PointNet", "32")]
    d = run(cluster, jobs, rules={"c": pin("node1"), "d": pin("node1", "node2")})
    assert {(p.placed, p.partner) for p in d.packed} == {("a", "c"), ("b", "d")}
    assert nodes_of(d, "c") == {"node1"} and nodes_of(d, "d") == {"node2"}


def test_a_policy_pair_uses_only_nodes_both_its_jobs_may_use():
    cluster = Cluster.from_spec("3x2:a100")
    jobs = (Job("a", 2, "resnet50", "32"), Job("c", 2, "PointNet", "32"))
    rules = {"a": keep_off("node1"), "c": keep_off("node2")}
    d = decide(RoundRequest(cluster, jobs, None, (("a", "c"),), EngineConfig(), rules), A100)
    assert nodes_of(d, "a") == nodes_of(d, "c") == {"node3"}


# ---- against the reference walk, and the rules over whole rounds ------------------------------------
@st.composite
def clusters(draw):
    parts = draw(st.lists(st.tuples(st.integers(1, 3), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["a", "b"])),
                          min_size=1, max_size=3))
    nodes = []
    for count, size, t in parts:
        for _ in range(count):
            nodes.append(Node(f"n{len(nodes)}", size, t))
    return Cluster(tuple(draw(st.permutations(nodes))))


@settings(max_examples=200, deadline=None)
@given(clusters(), st.lists(st.tuples(st.sampled_from([1, 1, 2, 3, 4, 6, 8, 12]), st.integers(-1, 8),
                                      st.sampled_from([None, ("a", "b"), ("b",)]),
                                      st.one_of(st.none(), st.sets(st.integers(0, 8), max_size=5))),
                            max_size=24))
def test_consolidation_with_rules_matches_the_reference(cluster, specs):
    """The walk with node rules equals the reference walk over each unit's allowed nodes only."""
    nn = len(cluster.nodes)
    names = cluster.shape[0]
    index = {n.name: i for i, n in enumerate(cluster.nodes)}
    order = [index[name] for name in names]  # the walk's node order is the shape's
    units, rule, masks, allowed = [], [], [], []
    for i, (n, home, types, nodes) in enumerate(specs):
        units.append(Unit((Job(f"j{i}", n, "resnet50", "32"),), home if home < nn else -1, types))
        if nodes is None:
            rule.append(-1)
            allowed.append(None)
            continue
        mask = np.array([k in nodes for k in range(nn)])  # over the shape's node order
        rule.append(len(masks))
        masks.append(mask)
        allowed.append((frozenset(index[names[k]] for k in range(nn) if mask[k]), f"rule {len(masks) - 1}"))
    assert order == list(range(nn))  # Cluster keeps its nodes in shape order
    rules = NodeRules(np.array(rule, dtype=np.int64), np.array(masks, dtype=np.bool_).reshape(len(masks), nn),
                      tuple(f"rule {k}" for k in range(len(masks))))
    if not masks:
        rules = rules._replace(allowed=np.zeros((1, nn), dtype=np.bool_))
    assert place_units(cluster, units, rules) == place_units_reference(cluster, units, allowed)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["1x8:a100", "3x4:a100", "2x2:k80,2x4:v100"]),
       st.sampled_from(["tesserae", "flat", "gavel"]), st.sampled_from(["best-fit", "sticky"]))
def test_rules_hold_after_packing_and_migration_over_rounds(seed, spec, migration, placement):
    """Every placed job with a rule sits on allowed nodes only, round after round, as rules come and go."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_spec(spec)
    names = list(cluster.shape[0])
    models = [("resnet50", "32"), ("PointNet", "32"), ("DCGAN", "64"), ("vgg19", "32")]
    jobs = [Job(f"j{i}", int(rng.choice([1, 1, 2, 4])), *models[int(rng.integers(len(models)))]) for i in range(10)]
    current = None
    profile = load_profile("gavel") if "v100" in spec else A100
    if profile is not A100:
        jobs = [Job(j.id, j.num_gpus, "ResNet-18", "64") for j in jobs]
    for _ in range(4):
        rules = {}
        for j in jobs:
            if rng.random() < 0.4:
                chosen = frozenset(rng.choice(names, size=int(rng.integers(1, len(names) + 1)), replace=False).tolist())
                rules[j.id] = NodeRule(chosen, bool(rng.random() < 0.5))
        order = [jobs[k] for k in rng.permutation(len(jobs))]
        config = EngineConfig(migration=migration, placement=placement)
        d = decide(RoundRequest(cluster, tuple(order), current, (), config, rules), profile)
        check_round(d, {j.id: j for j in jobs}, current or Placement.empty(cluster))
        for j, rule in rules.items():
            if j in d.placement.jobs():
                where = nodes_of(d, j)
                assert (where.isdisjoint(rule.nodes) if rule.keep_off else where <= rule.nodes), (j, rule, where)
        current = d.placement


def test_no_rules_is_the_same_decision():
    cluster = Cluster.from_spec("3x4:a100")
    jobs = [Job(f"j{i}", n, m, "32") for i, (n, m) in enumerate([(2, "resnet50"), (4, "PointNet"), (2, "PointNet"),
                                                                 (1, "resnet50"), (8, "resnet50")])]
    a = run(cluster, jobs)
    b = run(cluster, jobs, rules={"nobody": pin("node1")})  # a rule for a job that is not active
    assert a.placement == b.placement and a.packed == b.packed and a.pending == b.pending


@pytest.mark.parametrize("keep", [False, True])
def test_a_rule_naming_no_node_of_the_cluster(keep):
    cluster = Cluster.from_spec("1x4:a100")
    d = run(cluster, [Job("a", 1, "resnet50", "32")], rules={"a": NodeRule(frozenset({"elsewhere"}), keep)})
    assert (d.pending == ()) if keep else (d.pending[0][:2] == ("a", PendingReason.NODES))


def test_a_job_its_rule_keeps_off_every_free_gpu_does_not_hide_a_stranded_job():
    """Moves that pay: w (4 GPUs) waits with 4 free GPUs spread over two nodes, so the paper's plan,
    which moves r and s to node1, is weighed against the kept one and pays. z, ranked first and kept off
    both nodes, would run in no plan; counted as stranded (the free GPUs of nodes it may not use), it
    was the job the paper's plan had to place, and w waited."""
    cluster = Cluster.from_spec("2x4:a100")
    jobs = [Job(i, g, "resnet50", "32") for i, g in (("z", 1), ("p", 1), ("q", 1), ("r", 1), ("s", 1), ("w", 4))]
    e = frozenset()
    current = Placement({"node1": (frozenset({"p"}), e, frozenset({"q"}), e),
                         "node2": (frozenset({"r"}), e, frozenset({"s"}), e)})
    d = run(cluster, jobs, current, {"z": keep_off("node1", "node2")}, packing="off")
    assert d.started == ("w",) and set(d.migrated) == {"r", "s"}
    assert [(p.job_id, p.reason) for p in d.pending] == [("z", PendingReason.NODES)]
