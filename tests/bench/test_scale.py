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


def _points():
    from tesserae_slurm.bench.scale import BaselineTime, ScalePoint

    pts = []
    for gpus in (64, 256, 1024, 10000):
        for jobs in (256, 1024, 8192, 50000):
            base = {} if jobs > 1024 else {
                "gavel": BaselineTime("gavel", jobs * 10.0, False),
                "pop": BaselineTime("pop", None, True) if jobs == 1024 else BaselineTime("pop", jobs * 1.0, False)}
            pts.append(ScalePoint(gpus, jobs, 7, jobs / 50, jobs / 40, {"scheduling": jobs / 200, "placement": 0.3,
                                  "packing": 1.0, "migration": 0.5}, 1.0, 10, 2, 1, base))
    return pts


def test_performance_plot_log_axes_outside_legends_distinct_colours_and_a_labelled_cap(tmp_path):
    import itertools

    import matplotlib
    from matplotlib.colors import to_rgba
    from PIL import Image

    from tesserae_slurm.bench.report import figure, plot

    matplotlib.use("Agg")
    fig = figure(_points(), 300.0)
    ax, bx = fig.axes
    assert [a.get_xscale() for a in (ax, bx)] == ["log", "log"] and [a.get_yscale() for a in (ax, bx)] == ["log"] * 2
    assert "64, 256, 1024, 10000 GPUs" in fig.get_label() and "Gavel and POP" in fig.get_label()
    # one colour per cluster size on the left, none reused by the stages on the right
    size_colours = {to_rgba(line.get_color()) for line in ax.get_lines() if line.get_linestyle() == "-"}
    assert len(size_colours) == 4
    stage_colours = {to_rgba(line.get_color()) for line in bx.get_lines()}
    assert not size_colours & stage_colours
    # markers tell the methods apart; the capped POP point is not drawn at a made-up height
    assert {line.get_marker() for line in ax.get_lines()} - {"None"} == {"o", "x", "s"}
    cap = [line for line in ax.get_lines() if set(line.get_ydata()) == {300_000.0}]
    assert cap and any("cap 300 s" in t.get_text() for t in ax.texts)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [bx.get_legend()]
    assert len(legends) == 3
    for leg, axis in itertools.product(legends, (ax, bx)):  # no legend sits on the data
        assert not leg.get_window_extent(renderer).overlaps(axis.get_window_extent(renderer))
    path = tmp_path / "p.png"
    assert plot(_points(), path, 300.0)
    assert Image.open(path).text["Title"].startswith("Decision time per round vs active jobs")


def test_bench_decision_leaves_the_warm_up_out(monkeypatch):
    """The first call compiles (numba): here it is made 0.3 s slower, and the statistics must not see it."""
    import time

    from tesserae_slurm.bench import decision

    real, calls = decision.decide, []

    def first_call_slow(request, profile, **kw):
        if request.current is not None:
            calls.append(1)
            if len(calls) == 1:
                time.sleep(0.3)
        return real(request, profile, **kw)

    monkeypatch.setattr(decision, "decide", first_call_slow)
    b = decision.bench_decision(16, 32, repeats=2)
    assert len(calls) == 3 and b.warmup == 1 and b.repeats == 2
    assert b.p90_ms < 300
    calls.clear()
    b = decision.bench_decision(16, 32, repeats=2, warmup=0)
    assert b.p90_ms >= 300  # without the warm-up the compile lands in the statistics
