"""Gavel's packed LP through cvxpy/ECOS: a hand-solved case, the HiGHS model as an independent oracle,
the combination set Gavel builds, the capped child process, and the `gavel-cvxpy` bench column."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from policies.gavel_fakes import TableSpeeds, jv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesserae_slurm.bench.capped import run_capped
from tesserae_slurm.cli.main import main
from tesserae_slurm.model import Cluster, InputError
from tesserae_slurm.policies.base import SchedulingInput
from tesserae_slurm.policies.gavel_cvxpy import GavelCvxpyPolicy, build_gavel_lp, solve_las_cvxpy
from tesserae_slurm.policies.gavel_lp import solve_las_allocation


def gavel_feasible(alloc, views, capacity, tol=1e-6):
    """Gavel's constraints, checked with loops on the returned allocation."""
    gpus = {v.id: v.num_gpus for v in views}
    assert alloc.single.min(initial=0) >= -tol and alloc.pair_x.min(initial=0) >= -tol
    assert all(t <= 1 + tol for t in alloc.job_totals().values())
    for w, t in enumerate(alloc.gpu_types):
        used = sum(alloc.single[i, w] * gpus[j] for i, j in enumerate(alloc.job_ids))
        used += sum(row[w] * gpus[a] for (a, b), row in zip(alloc.pairs, alloc.pair_x))
        assert used <= capacity[t] + tol
    assert all(gpus[a] == gpus[b] for a, b in alloc.pairs)


def test_hand_solved_pair():
    # One GPU; A and B alone run at 1, packed at 0.9 and 0.3. With t packed and a for A alone, the
    # equal shares are a + 0.9t = (1 - t - a) + 0.3t, so a = 0.5 - 0.8t and the share 0.5 + 0.1t
    # grows until a = 0: t = 0.625, B alone 0.375, min share 0.5625 (unique).
    look = TableSpeeds(pair={("a", "b", "a100"): (0.9, 0.3)})
    res = solve_las_cvxpy([jv("A", model="a"), jv("B", model="b")], {"a100": 1}, look)
    assert res.solver == "ECOS" and res.cvxpy_status == "optimal"
    # where the time went, as the cvxpy baseline's bench reports it: three phases, each measured
    assert all(isinstance(s, float) and s >= 0 for s in (res.build_s, res.compile_s, res.solve_s))
    a = res.allocation
    assert a.objective == pytest.approx(0.5625, abs=1e-6)
    assert a.pairs == (("A", "B"),) and a.pair_x[0, 0] == pytest.approx(0.625, abs=1e-5)
    assert a.single[:, 0] == pytest.approx([0.0, 0.375], abs=1e-5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), caps=st.sampled_from([(1, 0), (2, 1), (4, 2), (3, 3)]))
def test_same_optimum_as_the_highs_model(seed, n, caps):
    rng = np.random.default_rng(seed)
    models, types = ["a", "b", "c"], ["a100", "v100"]
    iso = {(m, t): float(rng.uniform(0.3, 2.0)) for m in models for t in types}
    pair = {(x, y, t): (float(rng.uniform(0.1, 0.95)), float(rng.uniform(0.1, 0.95)))
            for x, y in itertools.combinations_with_replacement(models, 2) for t in types if rng.random() < 0.8}
    look = TableSpeeds(iso, pair)
    cap = {t: c for t, c in zip(types, caps) if c > 0}
    views = [jv(f"J{i}", int(rng.choice([1, 1, 2])) if min(c for c in caps if c) >= 2 else 1, str(rng.choice(models)),
                weight=float(rng.choice([1.0, 2.0, 0.5])), no_pack=bool(rng.random() < 0.15)) for i in range(n)]
    # every job fits every type here: Gavel and our model then have the same feasible set of shares
    highs = solve_las_allocation(views, cap, look)
    res = solve_las_cvxpy(views, cap, look)
    assert res.cvxpy_status == "optimal"
    assert res.allocation.objective == pytest.approx(highs.objective, rel=1e-5, abs=1e-6)
    gavel_feasible(res.allocation, views, cap)


def test_a_job_too_big_for_a_type_keeps_its_variable_there_as_in_gavel():
    # Gavel gives every job a variable on every type and lets only the capacity row limit it: a 2-GPU
    # job on one GPU gets x = 1/2 and share x * 2 / tprop = 1. Our HiGHS model drops the variable.
    res = solve_las_cvxpy([jv("Big", 2)], {"a100": 1}, TableSpeeds())
    assert res.allocation.single[0, 0] == pytest.approx(0.5, abs=1e-6)
    assert res.allocation.objective == pytest.approx(1.0, abs=1e-6)
    assert solve_las_allocation([jv("Big", 2)], {"a100": 1}, TableSpeeds()).status == "empty"


def test_combinations_are_gavel_s():
    look = TableSpeeds(pair={("a", "a", "a100"): (0.5, 0.5)})
    views = [jv("A1", 1, "a"), jv("A2", 1, "a"), jv("B", 1, "b"), jv("C2", 2, "c"), jv("D2", 2, "c"),
             jv("N", 1, "a", no_pack=True), jv("Z", 1, "zero")]
    look.iso[("zero", "a100")] = 0.0
    lp = build_gavel_lp(views, Cluster.from_spec("1x4"), look)
    combos = {(lp.job_ids[a], lp.job_ids[b] if b >= 0 else None) for a, b in zip(lp.combo_a, lp.combo_b)}
    # every job that can run somewhere alone; every same-size pair, packable or not (A1-B cannot pack:
    # zero throughputs, as in Gavel's table); never across sizes, never the no-pack job, never Z (speed 0)
    singles = {("A1", None), ("A2", None), ("B", None), ("C2", None), ("D2", None), ("N", None)}
    assert combos == singles | {("A1", "A2"), ("A1", "B"), ("A2", "B"), ("C2", "D2")}
    assert list(lp.combo_a) == sorted(lp.combo_a)  # Gavel's sorted job-id pairs
    # relevant_combinations: each included job's rows are exactly the combinations containing it
    for j, jid in enumerate(lp.job_ids):
        rows = set(lp.entry_combo[lp.entry_job == j])
        assert rows == {c for c in range(lp.num_combos) if j in (lp.combo_a[c], lp.combo_b[c])}
    assert not lp.included[lp.job_ids.index("Z")]


def test_policy_ranks_every_job_and_refuses_a_time_limit():
    look = TableSpeeds(pair={("a", "a", "a100"): (0.6, 0.6)})
    views = tuple(jv(f"J{i}", 1, "a") for i in range(5))
    got = []
    pol = GavelCvxpyPolicy(on_solve=got.append)
    ranking, state = pol.rank(SchedulingInput(0.0, 360.0, views, Cluster.from_spec("1x2"), look), pol.initial_state())
    assert sorted(ranking.order) == sorted(v.id for v in views) and state.solves == 1
    assert got[0].allocation.objective == pytest.approx(
        solve_las_allocation(views, Cluster.from_spec("1x2"), look).objective, rel=1e-5)
    with pytest.raises(InputError):
        GavelCvxpyPolicy(time_limit_s=5.0)


def test_capped_child_is_killed_at_the_cap_and_reports_results_otherwise():
    slow = run_capped("builtins:float", "time:sleep", 60, cap_s=0.5)  # sleeps 60 s; killed at 0.5 s
    assert slow.capped and slow.ms is None and slow.ready_rss_mib > 0
    ok = run_capped("builtins:float", "math:sqrt", 16, cap_s=30)
    assert not ok.capped and ok.result == 4.0 and ok.ms >= 0 and ok.peak_rss_mib >= ok.ready_rss_mib
    bad = run_capped("builtins:float", "math:sqrt", -1, cap_s=30)
    assert bad.ms is None and not bad.capped and "ValueError" in bad.error


def test_bench_scale_column(tmp_path, capsys):
    out, md = tmp_path / "r.json", tmp_path / "perf.md"
    assert main(["bench", "scale", "--smoke", "--jobs", "24", "--baselines", "gavel,gavel-cvxpy",
                 "--json", str(out), "--report", str(md)]) == 0
    base = json.loads(out.read_text())["points"][0]["baselines"]
    assert base["gavel-cvxpy"]["ms"] > 0 and base["gavel-cvxpy"]["peak_mib"] > 0
    assert "ECOS (optimal)" in base["gavel-cvxpy"]["note"]
    text = md.read_text()
    assert "Gavel LP (cvxpy)" in text and "Gavel / Tesserae (cvxpy)" in text
    assert "CVXPY/TESSERAE" in capsys.readouterr().out


def test_without_cvxpy_the_column_says_not_installed(tmp_path, monkeypatch, capsys):
    import tesserae_slurm.policies.gavel_cvxpy as mod

    monkeypatch.setattr(mod, "cvxpy_available", lambda: False)
    out, md = tmp_path / "r.json", tmp_path / "perf.md"
    assert main(["bench", "scale", "--smoke", "--jobs", "16", "--baselines", "gavel-cvxpy",
                 "--json", str(out), "--report", str(md)]) == 0
    assert json.loads(out.read_text())["points"][0]["baselines"]["gavel-cvxpy"]["note"] == "not installed"
    assert "| not installed |" in md.read_text()
    assert "not installed" in capsys.readouterr().out


def test_json_from_before_the_cvxpy_column_still_renders(tmp_path):
    old = {"machine": {}, "cap_s": 60.0, "command": "tesserae bench scale --smoke", "points": [
        {"gpus": 16, "jobs": 32, "repeats": 1, "median_ms": 2.0, "p90_ms": 2.0,
         "stages": {"scheduling": 0.1, "placement": 0.5, "packing": 1.0, "migration": 0.4}, "peak_mib": 0.1,
         "placed": 10, "packed_pairs": 2, "migrations": 1,
         "baselines": {"gavel": {"name": "gavel", "ms": 20.0, "capped": False, "note": ""},
                       "pop": {"name": "pop", "ms": None, "capped": True, "note": "hit the 60 s cap"}}}]}
    src, md = tmp_path / "old.json", tmp_path / "perf.md"
    src.write_text(json.dumps(old))
    assert main(["bench", "scale", "--from-json", str(src), "--report", str(md)]) == 0
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 32 |"))
    assert row.endswith("| 20 |  | > 60000 | 10x |  |")
