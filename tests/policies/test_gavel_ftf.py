"""Gavel's finish-time-fairness allocation: the worked example, a grid oracle, weights, C_j bookkeeping."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from policies.gavel_fakes import TableSpeeds, jv, sched_input

from tesserae_slurm.model import InputError
from tesserae_slurm.policies.gavel import GavelFtfPolicy, remaining_estimate
from tesserae_slurm.policies.gavel_ftf import FtfTerms, solve_ftf
from tesserae_slurm.policies.gavel_lp import build_problem


def terms(elapsed, remaining, cumulative=None):
    n = len(elapsed)
    return FtfTerms(np.array(elapsed, float), np.array(remaining, float),
                    np.array(cumulative if cumulative is not None else [0.0] * n, float))


def test_worked_example_equalizes_rho():
    # policies.md §6: 1 GPU; A, B at speed 1 with 100 s of work left; A arrived 100 s ago, B now.
    # I = 1/2 for both, so the ideal time is 200; equal rho needs x_A = (sqrt5 - 1) / 2.
    prob = build_problem([jv("A"), jv("B")], {"a100": 1}, TableSpeeds(), packing=False)
    res = solve_ftf(prob, terms([100, 0], [100, 100]), rel_tol=1e-10)
    golden = (math.sqrt(5) - 1) / 2
    assert res.allocation.single[:, 0] == pytest.approx([golden, 1 - golden], abs=1e-6)
    assert res.allocation.objective == pytest.approx(1.309017, abs=1e-5)
    assert res.isolated == pytest.approx([0.5, 0.5])
    assert res.allocation.status == "optimal"


def rho_by_hand(views, look, n_gpus, t, rem, cum, single, pairs=()):
    """rho per job with plain loops: isolated share min(1, N / (m s)) on one GPU type ('a100')."""
    m = len(views)
    out = []
    for i, v in enumerate(views):
        speed = look.isolated(v.job, "a100")
        x_iso = min(1.0, n_gpus / (m * v.num_gpus)) if v.num_gpus <= n_gpus else 0.0
        iso = speed * x_iso
        tput = single[i] * speed
        for (a, b), x in pairs:
            if v.id in (a, b):
                other = next(o for o in views if o.id == (b if v.id == a else a))
                tput += x * look.packed(v.job, other.job, "a100")[0]
        r = rem[i] * v.priority_weight
        out.append((t[i] + r / tput) / (cum[i] + r / iso) if tput > 0 else math.inf)
    return out


def grid_min_max_rho(views, look, n_gpus, t, rem, cum, packing, steps):
    combos = [(i,) for i in range(len(views))]
    if packing:
        for i, j in itertools.combinations(range(len(views)), 2):
            got = look.packed(views[i].job, views[j].job, "a100")
            if got is not None and min(got) > 0:
                combos.append((i, j))
    best = math.inf
    grid = np.linspace(0, 1, steps + 1)
    for pt in itertools.product(grid, repeat=len(combos)):
        if sum(x * views[c[0]].num_gpus for x, c in zip(pt, combos)) > n_gpus + 1e-12:
            continue
        if any(sum(x for x, c in zip(pt, combos) if i in c) > 1 + 1e-12 for i in range(len(views))):
            continue
        single = [sum(x for x, c in zip(pt, combos) if c == (i,)) for i in range(len(views))]
        pairs = [((views[c[0]].id, views[c[1]].id), x) for x, c in zip(pt, combos) if len(c) == 2]
        best = min(best, max(rho_by_hand(views, look, n_gpus, t, rem, cum, single, pairs)))
    return best


@pytest.mark.parametrize("packing", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_min_max_rho_against_a_grid_oracle(seed, packing):
    rng = np.random.default_rng(100 + seed)
    look = TableSpeeds({("a", "a100"): float(rng.uniform(0.5, 1.5)), ("b", "a100"): 1.0},
                       {("a", "b", "a100"): (float(rng.uniform(0.3, 0.9)), float(rng.uniform(0.3, 0.9)))})
    views = [jv("A", 1, "a", weight=float(rng.choice([1.0, 2.0]))), jv("B", 1, "b"), jv("C", 1, "a")]
    t = rng.uniform(0, 500, 3).round()
    rem = rng.uniform(50, 500, 3).round()
    cum = rng.uniform(0, 200, 3).round()
    prob = build_problem(views, {"a100": 2}, look, packing)
    res = solve_ftf(prob, terms(t, rem, cum), rel_tol=1e-9)
    alloc = res.allocation
    pairs = [(p, float(row[0])) for p, row in zip(alloc.pairs, alloc.pair_x)]
    assert max(alloc.job_totals().values()) <= 1 + 1e-7
    used = alloc.single[:, 0].sum() + sum(x for _, x in pairs)
    assert used <= 2 + 1e-7
    claimed = max(rho_by_hand(views, look, 2, t, rem, cum, alloc.single[:, 0], pairs))
    assert alloc.objective == pytest.approx(claimed, rel=1e-7)
    oracle = grid_min_max_rho(views, look, 2, t, rem, cum, packing, 10 if not packing else 4)
    assert alloc.objective <= oracle * (1 + 1e-7)  # at least as good as every grid point


def test_weight_scales_remaining_work():
    prob_w = build_problem([jv("A", weight=2.0), jv("B")], {"a100": 1}, TableSpeeds(), packing=False)
    prob_1 = build_problem([jv("A"), jv("B")], {"a100": 1}, TableSpeeds(), packing=False)
    a = solve_ftf(prob_w, terms([100, 0], [100, 100]), rel_tol=1e-10)
    b = solve_ftf(prob_1, terms([100, 0], [200, 100]), rel_tol=1e-10)
    assert a.allocation.single[:, 0] == pytest.approx(b.allocation.single[:, 0], abs=1e-6)
    assert a.isolated == pytest.approx([0.25, 0.5])  # I / w


def test_jobs_without_work_or_without_a_fit_do_not_constrain():
    views = [jv("A"), jv("Done"), jv("Huge", 8)]
    prob = build_problem(views, {"a100": 2}, TableSpeeds(), packing=False)
    res = solve_ftf(prob, terms([0, 0, 0], [100, 0, 100]), rel_tol=1e-9)
    # A alone decides rho: with x_A = 1 it finishes in 100 s vs ideal 100 / (2/3) = 150 s
    assert res.allocation.objective == pytest.approx(100 / 150, rel=1e-6)
    assert res.allocation.single[2, 0] == 0.0


def test_bad_terms():
    prob = build_problem([jv("A")], {"a100": 1}, TableSpeeds(), packing=False)
    with pytest.raises(InputError, match="ftf: remaining must be 1 finite values >= 0"):
        solve_ftf(prob, terms([0], [-1]))
    with pytest.raises(InputError, match="ftf: elapsed must be 1 "):
        solve_ftf(prob, terms([0, 1], [1, 1]))
    with pytest.raises(InputError, match="ftf: cumulative_isolated must be 1 "):
        solve_ftf(prob, terms([0], [1], [math.nan]))
    with pytest.raises(InputError):
        solve_ftf(prob, terms([0], [1]), rel_tol=0.0)


def test_remaining_estimate_fallbacks():
    assert remaining_estimate(jv("A", remaining=50.0), 360) == 50.0
    v = jv("B", executed=100.0)
    assert remaining_estimate(v, 360) == 360.0  # unknown duration: as long as it ran, at least a round
    assert remaining_estimate(v._replace(total_work=1000.0), 360) == 900.0


def test_policy_guesses_unknown_durations_as_run_so_far_at_least_a_round():
    """Without the shell's remaining or total work the policy solves with the usual guess: as much
    again as the job has run, at least one round (remaining_estimate, the oracle checked above)."""
    pol = GavelFtfPolicy(packing=False, rel_tol=1e-9)
    views = [jv("A", executed=1000.0), jv("B", executed=100.0), jv("C")]
    _, state = pol.rank(sched_input(views, "1x2", round_s=300.0), pol.initial_state())
    assert {j: m.remaining for j, m in state.ftf.items()} == {"A": 1000.0, "B": 300.0, "C": 300.0}


def test_policy_accumulates_isolated_time_between_solves():
    # every arrival triggers a re-solve (reset interval 0); C_j grows by (R_prev - R_now) / I_prev
    pol = GavelFtfPolicy(packing=False, reset_interval_s=0.0, rel_tol=1e-9)
    state = pol.initial_state()
    _, state = pol.rank(sched_input([jv("A", remaining=1000.0), jv("B", remaining=1000.0)], "1x2"), state)
    assert state.ftf["A"].isolated == pytest.approx(1.0)  # 2 GPUs / 2 jobs, capped at 1
    assert state.ftf["A"].cumulative_isolated == 0.0
    views = [jv("A", executed=360.0, remaining=640.0), jv("B", executed=360.0, remaining=640.0),
             jv("C", submit=360.0, remaining=1000.0)]
    _, state = pol.rank(sched_input(views, "1x2", now=360.0), state)
    assert state.solves == 2
    assert state.ftf["A"].cumulative_isolated == pytest.approx(360.0)  # (1000 - 640) / 1.0
    assert state.ftf["C"].cumulative_isolated == 0.0
    assert state.ftf["A"].isolated == pytest.approx(2 / 3)
