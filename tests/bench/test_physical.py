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
