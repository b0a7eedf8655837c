"""`tesserae bench physical` without Slurm: the mean of the real runs against the prediction, and the ratios."""

from __future__ import annotations

import pytest

from tesserae_slurm.bench.physical import fidelity, render_fidelity, render_gains
from tesserae_slurm.devcluster.replay import RunSummary


def _s(label: str, jct_h: float, span_h: float) -> RunSummary:
    return RunSummary(label, 10, 10, 10, jct_h * 3600, jct_h * 3600, span_h * 3600, 2.0, 1.0, 0, 0)


def test_fidelity_is_the_mean_of_the_real_runs_against_the_prediction():
    runs = {"daemon:tesserae-t": [(_s("t", 2.0, 7.0), _s("t", 2.1, 7.2)), (_s("t", 2.2, 7.4), _s("t", 2.1, 7.2))],
            "daemon:tiresias": [(_s("r", 3.0, 8.0), _s("r", 2.85, 8.4))]}
    t, r = fidelity(runs)
    assert (t.runs, t.completed) == (2, "20/20")
    assert t.real_jct_s == pytest.approx(2.1 * 3600) and t.jct_dev == pytest.approx(0.0, abs=1e-9)
    assert t.real_makespan_s == pytest.approx(7.2 * 3600) and t.real_jct_sd_s == pytest.approx(0.1414 * 3600, rel=1e-3)
    assert r.jct_dev == pytest.approx(5.0) and r.makespan_dev == pytest.approx(5.0) and r.real_jct_sd_s == 0.0
    table = render_fidelity([t, r])
    assert "| daemon:tesserae-t | 2 | 20/20 | 2.10 ± 0.14 | 2.10 | 0.0 % | 0.35 % |" in table
    assert "| daemon:tiresias | 1 | 10/10 | 3.00 | 2.85 | 5.0 % | 3.36 % | 8.00 | 8.40 | 5.0 % | 2.05 % |" in table
    gains = render_gains([t, r], "daemon:tesserae-t")
    assert "| daemon:tiresias | 1.43x | 1.36x | 1.62x | 1.11x | 1.17x | 1.15x |" in gains
    assert render_gains([t, r], "daemon:fifo") == ""


def test_from_dir_predicts_the_saved_runs_again(tmp_path):
    """A miniature report (4 jobs of the paper's trace on 1 x 4 GPUs, made-up real ends) read back: the
    same jobs, measures and settings, predicted again; a report of another trace is refused."""
    import json

    from tesserae_slurm.bench.physical import render_physical, runs_from_report
    from tesserae_slurm.devcluster.replay import JobMeasure, plan_replay, predict
    from tesserae_slurm.devcluster.runs import Settings
    from tesserae_slurm.model import InputError
    from tesserae_slurm.profiles import load_profile
    from tesserae_slurm.sim.trace_source import resolve_trace

    profile = load_profile("a100")
    trace, name = resolve_trace("gen:tesserae:120:80:0", models="a100")
    plan = plan_replay(trace, name, profile, scale=60, nodes=1, gpus_per_node=4, jobs=4)
    measures = [JobMeasure(j.name, j.trace_id, str(i + 1), j.gpus, j.work_s, 1000.0 + j.arrival_s,
                           1001.0 + j.arrival_s, 1000.0 + j.arrival_s + 1.5 * j.work_s / 60, "COMPLETED", 1,
                           j.work_s, ()) for i, j in enumerate(plan.jobs)]
    runs = {label: [(measures, predict(plan, mode, policy, profile), Settings(policy=policy or "tesserae-t"))]
            for label, mode, policy in (("daemon:tesserae-t", "daemon", "tesserae-t"), ("plain", "plain", ""))}
    text, data, ok = render_physical(plan, list(runs), runs, tmp_path, profile)
    assert ok and "The bare round model" in text
    _, part, _ = render_physical(plan, list(runs), {"daemon:tesserae-t": [], "plain": runs["plain"]}, tmp_path,
                                 profile, 3)
    assert list(part["repeats"][0]["runs"]) == ["plain"]  # the report of the runs done so far
    assert part["repeats_asked"] == 3 and [f["runs"] for f in part["fidelity"]] == [1]
    # a series of three cut during its second round of runs: each label reports the runs it has
    cut = {"daemon:tesserae-t": runs["daemon:tesserae-t"] * 2, "plain": runs["plain"]}
    text2, part2, _ = render_physical(plan, list(cut), cut, tmp_path, profile, 3)
    assert [list(r["runs"]) for r in part2["repeats"]] == [["daemon:tesserae-t", "plain"], ["daemon:tesserae-t"]]
    assert [(f["label"], f["runs"]) for f in part2["fidelity"]] == [("daemon:tesserae-t", 2), ("plain", 1)]
    (tmp_path / "report.json").write_text(json.dumps(part2))
    modes, again, back, asked = runs_from_report(tmp_path, "a100", 0)
    assert asked == 3 and {label: len(rs) for label, rs in back.items()} == {"daemon:tesserae-t": 2, "plain": 1}
    (tmp_path / "report.json").write_text(json.dumps(data))
    modes, again, back, asked = runs_from_report(tmp_path, "a100", 0)
    assert [m for m, _ in modes] == ["daemon:tesserae-t", "plain"] and again == plan and asked == 1
    for label, [(m, res, s)] in back.items():
        assert m == measures and s == runs[label][0][2]
        assert [j.finish_time for j in res.jobs] == [j.finish_time for j in runs[label][0][1].jobs]
    data["repeats"][0]["jobs"][0]["time_limit_min"] += 1  # not the plan this trace and seed give
    (tmp_path / "report.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="rebuild other jobs"):
        runs_from_report(tmp_path, "a100", 0)
    with pytest.raises(InputError, match="no readable report.json"):
        runs_from_report(tmp_path / "none", "a100", 0)
