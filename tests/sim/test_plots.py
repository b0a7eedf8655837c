"""The compare report's plots: what each is titled, its axes, and that the decision plot matches the table."""

from __future__ import annotations

import itertools

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from tesserae_slurm.cli.sim_cmd import specs_from_args  # noqa: E402
from tesserae_slurm.sim.compare import (  # noqa: E402
    _cdf_figure, decision_figure, ftf_figure, jct_figure, run_one, write_report,
)
from tesserae_slurm.sim.metrics import STAGES  # noqa: E402


@pytest.fixture(scope="module")
def results():
    import argparse

    args = argparse.Namespace(trace="demo", cluster="4x4:a100", profile=None, round_s=360.0, seed=0, noise=0.0,
                              restart_s=None, restart_model=[], check=False, decision_profile="",
                              llm_strategy="best")
    res = [run_one(s) for s in specs_from_args(args, ["tiresias", "tesserae-t"])]
    assert any(r.reused for r in res[0].rounds)  # the demo has rounds that reuse the last decision
    return res


def _title(fig) -> str:
    return " ".join(fig.get_label().split())


def _says_what_and_where(title: str) -> None:
    for part in ("trace demo (60 jobs)", "cluster 4x4:a100 (16 GPUs)", "round 360 s", "tiresias, tesserae-t"):
        assert part in title, (part, title)


def _overlaps(fig, labels) -> list[tuple[str, str]]:
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels if t.get_visible() and t.get_text()]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def test_ftf_cdf_marks_rho_one_and_its_tick_labels_do_not_overlap(results):
    fig = ftf_figure(results)
    ax = fig.axes[0]
    _says_what_and_where(_title(fig))
    assert _title(fig).startswith("Finish-time fairness") and ax.get_xscale() == "log"
    assert "rho" in ax.get_xlabel() and ax.get_ylabel() == "CDF of jobs"
    fig.canvas.draw()
    ticks = ax.get_xticklabels() + ax.get_xticklabels(minor=True)
    assert "1" in [t.get_text() for t in ax.get_xticklabels()]
    assert _overlaps(fig, ticks) == []
    (mark,) = [line for line in ax.get_lines() if line.get_label().startswith("rho = 1")]
    assert set(mark.get_xdata()) == {1.0}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["tiresias", "tesserae-t", "rho = 1 (fair share)"]
    plt.close(fig)


@pytest.mark.parametrize("lo,hi", [(0.6, 3.0), (0.35, 4.1), (0.3, 1.4), (0.9, 1.6), (0.2, 40.0)])
def test_log_cdf_tick_labels_never_overlap(results, lo, hi):
    """Ranges under a decade are where matplotlib's default labels every minor tick on top of each other."""
    import numpy as np

    fig = _cdf_figure(results, "rho", "rho", lambda r: list(np.geomspace(lo, hi, 40)), mark_one=True)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert _overlaps(fig, ax.get_xticklabels() + ax.get_xticklabels(minor=True)) == []
    left, right = ax.get_xlim()
    shown = [t for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True)
             if t.get_text() and left <= t.get_position()[0] <= right]
    assert len(shown) >= 2  # still labelled, in plain numbers at 1-2-5 steps (at most 3 a decade)
    for t in shown:
        mantissa = float(t.get_text()) / 10 ** np.floor(np.log10(float(t.get_text())))
        assert round(mantissa, 6) in (1.0, 2.0, 5.0), t.get_text()
    plt.close(fig)


def test_jct_cdf_is_titled(results):
    fig = jct_figure(results)
    _says_what_and_where(_title(fig))
    fig.canvas.draw()
    assert _overlaps(fig, fig.axes[0].get_xticklabels() + fig.axes[0].get_xticklabels(minor=True)) == []
    plt.close(fig)


def test_decision_time_leaves_out_reused_rounds_like_the_table(results):
    fig = decision_figure(results)
    left, right = fig.axes[:2]
    _says_what_and_where(_title(fig))
    assert "reused rounds left out" in _title(fig)
    for r, line in zip(results, left.get_lines(), strict=True):
        decided = [x for x in r.rounds if not x.reused]
        assert len(line.get_xdata()) == len(decided) < len(r.rounds)
        assert min(line.get_xdata()) > 0  # no 0 ms reused rounds
    # the stacked bars are the report's "median decision time per stage" table
    heights = {stage: [bar.get_height() for bar in c] for stage, c in zip(STAGES, right.containers, strict=True)}
    for i, r in enumerate(results):
        table = r.summary()["decision_ms"]["stages_median"]
        assert [heights[s][i] for s in STAGES] == pytest.approx([table[s] for s in STAGES])
    plt.close(fig)


def test_saved_pngs_carry_their_title(results, tmp_path):
    write_report(results, tmp_path, "t")
    for name, what in (("jct_cdf", "Job completion time"), ("ftf_cdf", "Finish-time fairness"),
                       ("decision_time", "Decision time")):
        title = Image.open(tmp_path / f"{name}.png").text["Title"]
        assert title.startswith(what)
        _says_what_and_where(title)
