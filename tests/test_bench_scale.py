"""`tesserae bench scale --smoke`: the issue-6 benchmark runs end to end at a tiny size (CI smoke)."""

from __future__ import annotations

import json

from tesserae_slurm.bench.report import slope
from tesserae_slurm.cli.main import main


def test_scale_smoke_writes_json_plot_and_report(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["bench", "scale", "--smoke", "--json", str(out), "--plot", str(tmp_path / "p.png"),
                 "--report", str(tmp_path / "perf.md")])
    assert code == 0
    data = json.loads(out.read_text())
    assert [(p["gpus"], p["jobs"]) for p in data["points"]] == [(16, 32), (16, 64)]
    for p in data["points"]:
        assert set(p["stages"]) == {"scheduling", "placement", "packing", "migration"}
        assert p["median_ms"] >= sum(p["stages"].values()) * 0.5  # the total covers the stages
        assert p["baselines"]["gavel"]["ms"] > 0 and p["baselines"]["pop"]["ms"] > 0
    assert (tmp_path / "p.png").stat().st_size > 1000
    text = (tmp_path / "perf.md").read_text()
    assert "## 16 GPUs" in text and "Gavel / Tesserae" in text and "p.png" in text
    assert "GAVEL/TESSERAE" in capsys.readouterr().out


def test_bad_arguments(capsys):
    assert main(["bench", "scale", "--smoke", "--baselines", "cplex"]) == 2
    assert "unknown baseline" in capsys.readouterr().err


def test_slope_recovers_known_exponents():
    xs = [256, 512, 1024, 2048]
    assert abs(slope(xs, [3 * x for x in xs]) - 1.0) < 1e-9
    assert abs(slope(xs, [x * x for x in xs]) - 2.0) < 1e-9
    assert slope([1], [1]) is None


def test_report_re_renders_from_json_without_running(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["bench", "scale", "--smoke", "--baselines", "none", "--json", str(out)]) == 0
    capsys.readouterr()
    md = tmp_path / "perf.md"
    assert main(["bench", "scale", "--from-json", str(out), "--report", str(md)]) == 0
    assert "--smoke" in md.read_text() and "## 16 GPUs" in md.read_text()
    bad = tmp_path / "bad.json"
    bad.write_text('{"points": [{"gpus": 1}]}')
    assert main(["bench", "scale", "--from-json", str(bad)]) == 2


def test_a_baseline_skipped_by_size_claims_no_time(tmp_path, capsys):
    """Above --baseline-max-jobs a baseline is not run: the table says so and gives no ratio, while a
    baseline that really hit the cap reads "> cap" with a lower bound on the ratio."""
    from tesserae_slurm.bench.report import ratio_text
    from tesserae_slurm.bench.scale import BaselineTime, ScalePoint

    out = tmp_path / "r.json"
    assert main(["bench", "scale", "--smoke", "--baseline-max-jobs", "32", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    skipped = data["points"][1]["baselines"]["gavel"]
    assert skipped["ms"] is None and skipped["note"] == "not run above 32 jobs"
    assert "not run above 32 jobs" in printed and "> 60000" not in printed
    point = ScalePoint(gpus=16, jobs=64, repeats=1, median_ms=2.0, p90_ms=2.0, stages={}, peak_mib=0.0, placed=0,
                       packed_pairs=0, migrations=0)
    assert ratio_text(BaselineTime("gavel", None, False, "not run above 32 jobs"), point, 60.0) == ""
    # JSON from before the distinction marked skipped baselines as capped: still no claim
    assert ratio_text(BaselineTime("gavel", None, True, "not run above 32 jobs"), point, 60.0) == ""
    assert ratio_text(BaselineTime("gavel", None, True, "hit the 60 s cap"), point, 60.0) == "> 30,000x"
