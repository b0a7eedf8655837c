"""The placement stages against the straightforward references in tests/oracles/: the same plan
(consolidation's greedy rules), the same optimal value (packing, migration)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesserae_slurm.bench.synthetic import perturb_order, synthetic_jobs
from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.model import Cluster, Job, Node, Placement
from tesserae_slurm.placement.consolidate import Unit, place_units
from tesserae_slurm.placement.migrate import migrate
from tesserae_slurm.placement.pack import pack
from oracles.reference import (
    migration_cost_reference,
    pack_value_reference,
    place_units_reference,
)
from tesserae_slurm.profiles import load_profile

A100 = load_profile("a100")
GAVEL = load_profile("gavel")


@st.composite
def clusters(draw):
    parts = draw(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["a", "b"])),
                          min_size=1, max_size=4))
    nodes = []
    for count, size, t in parts:
        for _ in range(count):
            nodes.append(Node(f"n{len(nodes)}", size, t))
    return Cluster(tuple(draw(st.permutations(nodes))))


@settings(max_examples=200, deadline=None)
@given(clusters(), st.lists(st.tuples(st.sampled_from([1, 1, 1, 2, 2, 3, 4, 6, 8, 12, 16]), st.integers(-1, 15),
                                      st.sampled_from([None, ("a", "b"), ("b", "a"), ("b",)])), max_size=40))
def test_consolidation_matches_the_reference(cluster, specs):
    """Same plan for any order, with sticky homes (-1 = none) and per-job GPU-type preferences."""
    units = [Unit((Job(f"j{i}", n, "resnet50", "32"),), home if home < len(cluster.nodes) else -1, types)
             for i, (n, home, types) in enumerate(specs)]
    fast = place_units(cluster, units)
    assert fast == place_units_reference(cluster, units)
    # the plan's job -> GPUs map is handed in by place_units; it must equal the one computed from the GPUs
    assert dict(fast.placement.job_gpus()) == dict(Placement(fast.placement.nodes).job_gpus())
    # the cluster's empty free map is built once and copied: a second walk starts from a clean copy
    assert place_units(cluster, units) == fast


def _objective(pairs, placed, profile, gpu_type_of):
    by_id = {j.id: j for j in placed}
    return sum(p.placed_speed + p.partner_speed - profile.best_isolated(by_id[p.placed], gpu_type_of[p.placed])[0]
               for p in pairs)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 400), st.sampled_from(["on", "single"]),
       st.sampled_from(["timeslice", "mps"]), st.booleans(), st.sampled_from([1, 3, 50]))
def test_packing_reaches_the_reference_optimum(seed, n_jobs, mode, cross_user, below_one, users):
    """Also with two users' pairs scored time-sliced (the synthetic jobs belong to ``users`` users)."""
    rng = np.random.default_rng(seed)
    jobs = tuple(dataclasses.replace(j, user=f"u{int(j.user[1:]) % users}") for j in synthetic_jobs(n_jobs, rng))
    k = int(rng.integers(1, n_jobs))
    placed, pending = jobs[:k], jobs[k:]
    gpu_type_of = {j.id: "a100" for j in placed}
    ref_value, _ = pack_value_reference(placed, pending, A100, gpu_type_of, mode=mode, cross_user=cross_user,
                                        below_one=below_one)
    for limit in (None, 0):  # default solver choice, and the class-level transportation path forced
        res = pack(placed, pending, A100, gpu_type_of, mode=mode, cross_user=cross_user, below_one=below_one,
                   _assignment_limit=limit)
        assert _objective(res.pairs, placed, A100, gpu_type_of) == pytest.approx(ref_value, abs=1e-6)
        assert len({p.partner for p in res.pairs}) == len(res.pairs) == len({p.placed for p in res.pairs})


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12))
def test_migration_cost_matches_the_literal_algorithm(seed, nodes):
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_spec(f"{nodes}x4:a100")
    jobs = synthetic_jobs(int(rng.integers(1, 60)), rng)
    old = decide(RoundRequest(cluster, jobs), A100).placement
    new = decide(RoundRequest(cluster, perturb_order(jobs, rng, 0.5), config=EngineConfig()), A100).placement
    assert migrate(old, new).cost == pytest.approx(migration_cost_reference(old, new))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 300), st.sampled_from(["on", "single"]),
       st.sampled_from(["throughput", "paper-sum"]))
def test_packing_on_two_gpu_types_reaches_the_reference_optimum(seed, n_jobs, mode, objective):
    """The job-level assignment and the transportation LP (forced) reach the reference's optimum,
    every job in at most one pair of equal GPU counts; Gavel's job types on V100 and K80 nodes put
    two GPU types in one problem."""
    rng = np.random.default_rng(seed)
    profile = GAVEL if seed % 3 == 0 else A100
    if profile is GAVEL:
        kinds = [("ResNet-18", "32"), ("ResNet-50", "64"), ("Transformer", "128"), ("LM", "20"),
                 ("Recommendation", "1024")]
        jobs = [Job(f"g{i}", int(rng.choice([1, 1, 2, 4])), *kinds[int(rng.integers(len(kinds)))])
                for i in range(n_jobs)]
    else:
        jobs = synthetic_jobs(n_jobs, rng)
    k = int(rng.integers(1, n_jobs))
    placed, pending = jobs[:k], jobs[k:]
    types = ("v100", "k80") if profile is GAVEL else ("a100",)
    gpu_type_of = {j.id: types[i % len(types)] for i, j in enumerate(placed)}
    want, _ = pack_value_reference(placed, pending, profile, gpu_type_of, mode=mode, objective=objective)
    by_id = {j.id: j for j in jobs}
    for limit in (40_000, 0):
        got = pack(placed, pending, profile, gpu_type_of, mode=mode, objective=objective, _assignment_limit=limit)
        value = sum(p.placed_speed + p.partner_speed
                    - (profile.best_isolated(by_id[p.placed], gpu_type_of[p.placed])[0]
                       if objective == "throughput" else 0.0) for p in got.pairs)
        assert value == pytest.approx(want, abs=1e-6)
        assert len({p.partner for p in got.pairs}) == len(got.pairs) == len({p.placed for p in got.pairs})
        assert all(by_id[p.placed].num_gpus == by_id[p.partner].num_gpus for p in got.pairs)
