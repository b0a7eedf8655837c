"""Operators' node rules and site GPU limits in one round: both hold at once (they were built apart,
and meet in engine.decide, where the walk without the limited jobs must keep each job's own rule)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tesserae_slurm.bench.synthetic import perturb_order, synthetic_jobs
from tesserae_slurm.engine import EngineConfig, RoundRequest, decide
from tesserae_slurm.model import Cluster, PendingReason, Placement
from tesserae_slurm.model.gpu_limits import GpuLimits
from tesserae_slurm.placement.node_rules import NodeRule
from tesserae_slurm.profiles import load_profile
from tesserae_slurm.sim import invariants
from tesserae_slurm.sim.invariants import check_round

A100 = load_profile("a100")


def _nodes(d, job):
    return {node for node, _ in d.placement.job_gpus()[job]}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(4, 30), st.sampled_from(["2x4:a100", "4x4:a100", "3x8:a100"]),
       st.sampled_from(["on", "off"]), st.integers(1, 8))
# a running job its limit stopped kept its home in the keep-first walk: a job moved onto its GPU for nothing
@example(seed=4773, n=30, spec="2x4:a100", packing="off", user_cap=1)
# no keep-first walk settled the limits: j10 waited for a limit it was under (the paper's plan now)
@example(seed=2155, n=23, spec="4x4:a100", packing="on", user_cap=1)
# j9 ran, j21 ranked ahead displaced it (and j12), j18 ranked after took alice's last GPU: j9 waits for 'Limit',
# but the limit never kept it out of the walk, and the walk without it moves j12 no more
@example(seed=1046, n=28, spec="3x8:a100", packing="off", user_cap=6)
def test_rules_and_limits_hold_together_over_rounds(seed, n, spec, packing, user_cap):
    """Each round keeps the rules and the limits; without packing, the limits cost no move: where the run
    without the jobs the limit kept out of the walk (over it by the placed jobs ranked ahead, the gate's
    own criterion) runs the same jobs, the limited run migrates no more. Not every job waiting for
    'Limit' is one of them (see below)."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_spec(spec)
    names = list(cluster.shape[0])
    jobs = tuple(replace(j, user=str(rng.choice(["alice", "bob", "carol"]))) for j in synthetic_jobs(n, rng))
    limits = GpuLimits({"alice": user_cap}, {}, None)
    rules = {}
    for j in jobs:
        if rng.random() < 0.3:
            chosen = frozenset(rng.choice(names, size=int(rng.integers(1, len(names) + 1)), replace=False).tolist())
            rules[j.id] = NodeRule(chosen, bool(rng.random() < 0.5))
    current, order = None, jobs
    for _ in range(3):
        d = decide(RoundRequest(cluster, order, current, (), EngineConfig(packing=packing), rules, limits=limits),
                   A100)
        check_round(d, {j.id: j for j in order}, current or Placement.empty(cluster))
        invariants.check_limits(d, order, limits)
        for j, rule in rules.items():
            if j in d.placement.jobs():
                where = _nodes(d, j)
                assert (where.isdisjoint(rule.nodes) if rule.keep_off else where <= rule.nodes), (j, rule, where)
        if packing == "off":  # the stopped jobs left out, the rest is the walk under the rules alone
            limited = {p.job_id for p in d.pending if p.reason is PendingReason.LIMIT}
            # Left out are the jobs the limit kept out of the walk: over it by the placed jobs ranked ahead.
            # A job the walk left waiting for GPUs waits for 'Limit' too once jobs ranked after it fill its
            # user, but it was walked, and a running one's home shaped the walk: the rest walks it too.
            placed, ahead, stopped = d.placement.jobs(), 0, set()
            for j in order:
                if j.user == "alice" and j.id in placed:
                    ahead += j.num_gpus
                elif j.user == "alice" and ahead + j.num_gpus > user_cap:
                    stopped.add(j.id)
            assert stopped <= limited, (stopped, limited)
            rest = decide(RoundRequest(cluster, tuple(j for j in order if j.id not in stopped), current, (),
                                       EngineConfig(packing=packing), rules), A100)
            # Where both run the same jobs, the limits cost no move (new jobs of equal speed may take each
            # other's GPUs). They may run other jobs: moves that pay weigh a plan that moves running jobs
            # against the kept one, and a job the limit stops may free room in one candidate only.
            if rest.placement.jobs() == d.placement.jobs():
                assert d.migration_cost <= rest.migration_cost + 1e-9, (d.moves, rest.moves)
        current, order = d.placement, perturb_order(order, rng, 0.3)
