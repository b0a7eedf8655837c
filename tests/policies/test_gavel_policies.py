"""The Gavel baselines as registry policies: options, Ranking invariants, the engine accepting their pairs."""

from __future__ import annotations

import numpy as np
import pytest
from policies.gavel_fakes import TableSpeeds, jv, sched_input

from tesserae_slurm.bench.synthetic import synthetic_jobs
from tesserae_slurm.engine import RoundRequest, decide
from tesserae_slurm.model import Cluster, InputError, JobView
from tesserae_slurm.policies.base import Policy, SchedulingInput
from tesserae_slurm.policies.gavel import GavelFtfPriorityPolicy, GavelLasPolicy
from tesserae_slurm.policies.registry import make_policy
from tesserae_slurm.profiles import DEFAULT_PROFILE, load_profile
from tesserae_slurm.presets import get_config


class ProfileSpeeds:
    """ThroughputLookup over the shipped A100 profile (the engine's own lookups)."""

    def __init__(self, profile):
        self.profile = profile

    def isolated(self, job, gpu_type):
        return self.profile.best_isolated(job, gpu_type)[0]

    def packed(self, a, b, gpu_type):
        p = self.profile.best_pair(a, b, gpu_type)
        return None if p is None else (p.a_speed, p.b_speed)


@pytest.mark.parametrize("name", ["gavel", "gavel-ftf", "ftf-lp", "pop"])
def test_registry_builds_each_policy(name):
    policy = make_policy(name)
    assert isinstance(policy, Policy) and policy.name == name


@pytest.mark.parametrize("name, options", [
    ("gavel", {"packing": "yes"}), ("gavel", {"reset_interval_s": -1}), ("gavel", {"time_limit_s": 0}),
    ("gavel", {"lp_method": "simplex"}), ("gavel", {"bogus": 1}), ("gavel-ftf", {"rel_tol": 2.0}),
    ("ftf-lp", {"packing": True}), ("pop", {"k": 0}), ("pop", {"k": 1.5}), ("pop", {"objective": "srtf"}),
])
def test_bad_options_are_input_errors(name, options):
    with pytest.raises(InputError):
        make_policy(name, **options)


def check_ranking(ranking, views):
    ids = [v.id for v in views]
    assert sorted(ranking.order) == sorted(ids) and len(set(ranking.order)) == len(ids)
    gpus = {v.id: v.num_gpus for v in views}
    members = [m for p in ranking.pairs for m in p]
    assert len(members) == len(set(members))
    for a, b in ranking.pairs:
        assert gpus[a] == gpus[b] and a != b


def rounds_through_engine(config_name, n_jobs=40, n_rounds=6, seed=1, cluster="6x4"):
    """Run a config's policy and engine config for a few rounds on the A100 profile."""
    profile = load_profile(DEFAULT_PROFILE)
    lookup = ProfileSpeeds(profile)
    cfg = get_config(config_name)
    policy = make_policy(cfg.policy, **dict(cfg.policy_options))
    cl = Cluster.from_spec(cluster)
    jobs = synthetic_jobs(n_jobs, np.random.default_rng(seed))
    by_id = {j.id: j for j in jobs}
    executed = {j.id: 0.0 for j in jobs}
    state, current, out = policy.initial_state(), None, []
    for r in range(n_rounds):
        views = tuple(JobView(j, 0.0, executed_time=executed[j.id], total_work=20000.0,
                              remaining_work=20000.0 - executed[j.id]) for j in jobs)
        ranking, state = policy.rank(SchedulingInput(r * 360.0, 360.0, views, cl, lookup, seed=7), state)
        check_ranking(ranking, views)
        decision = decide(RoundRequest(cl, tuple(by_id[j] for j in ranking.order), current, ranking.pairs,
                                       cfg.engine), profile)
        current = decision.placement
        for j in current.jobs():
            executed[j] += 360.0
        out.append((ranking, decision, state))
    return out


@pytest.mark.parametrize("config", ["gavel", "gavel-ftf", "pop"])
def test_engine_places_the_policy_pairs(config):
    for ranking, decision, state in rounds_through_engine(config):
        chosen = {tuple(sorted(p)) for p in ranking.pairs}
        packed = {tuple(sorted((p.placed, p.partner))) for p in decision.packed}
        assert packed == chosen  # the engine packs nothing of its own and drops no chosen pair
        assert state.last_status == "optimal"
    assert any(r.pairs for r, _, _ in rounds_through_engine(config))


def test_tesserae_ftf_lets_the_engine_pack():
    results = rounds_through_engine("tesserae-ftf")
    assert all(r.pairs == () for r, _, _ in results)
    assert any(d.packed for _, d, _ in results)


@pytest.mark.parametrize("config", ["gavel", "pop", "tesserae-ftf"])
def test_same_inputs_same_rankings(config):
    a = [r for r, _, _ in rounds_through_engine(config, n_rounds=3)]
    b = [r for r, _, _ in rounds_through_engine(config, n_rounds=3)]
    assert a == b


def test_gavel_style_order_puts_larger_chosen_jobs_first():
    policy = GavelLasPolicy(packing=False)
    views = [jv("A"), jv("B", 2), jv("C", 4), jv("D")]
    ranking, state = policy.rank(sched_input(views, "2x4"), policy.initial_state())
    chosen = [m for e, _ in state.rounds.scheduled for m in e]
    assert ranking.order[: len(chosen)] == ("C", "B", "A", "D")


def test_priority_order_keeps_the_selection_order():
    # ftf-lp: no pairs, chosen jobs in the order Gavel's greedy picked them (priority), rest after
    # right after a reset every job has run the same (round/2), so priority follows X
    policy = GavelFtfPriorityPolicy(rel_tol=1e-9)
    views = [jv("A", remaining=100.0, submit=0.0), jv("B", remaining=100.0, submit=100.0),
             jv("C", remaining=5000.0, submit=100.0)]
    ranking, state = policy.rank(sched_input(views, "1x1", now=100.0), policy.initial_state())
    assert ranking.pairs == ()
    x = {e[0]: v[0] for e, v in state.rounds.allocation.items()}
    assert x["A"] > x["B"] > 0  # A has waited longer for the same work: it is owed more
    assert list(ranking.order) == sorted(x, key=lambda j: -x[j])
    assert state.rounds.scheduled == ((("A",), 0),)


def test_time_limit_hits_are_counted_and_logged(caplog):
    look = TableSpeeds(pair={("m", "m", "a100"): (0.7, 0.7)})
    views = [jv(f"j{i}") for i in range(120)]
    policy = GavelLasPolicy(time_limit_s=1e-9)
    with caplog.at_level("WARNING"):
        ranking, state = policy.rank(sched_input(views, "8x4", look), policy.initial_state())
    assert state.time_limit_hits == 1 and state.last_status == "time_limit"
    assert "time limit" in caplog.text
    check_ranking(ranking, views)
