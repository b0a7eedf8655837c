"""Completing a partial profile: the target universe, provenance, round trips, and `tesserae estimate`."""

from __future__ import annotations

import json

import pytest

from tesserae_slurm.cli.main import main
from tesserae_slurm.estimators.bayesopt import BayesOpt
from tesserae_slurm.estimators.complete import (
    complete_profile,
    complete_table,
    provenance_from_rows,
    provenance_rows,
    target_entries,
)
from tesserae_slurm.estimators.entries import (
    Endpoint,
    Value,
    make_entry,
    oriented,
    profile_from_table,
    table_from_profile,
)
from tesserae_slurm.estimators.linear import LinearModel
from tesserae_slurm.estimators.matrix_completion import MatrixCompletion
from tesserae_slurm.model import InputError, Job
from tesserae_slurm.profiles import ProfileKey, load_profile, parse_profile_csv, profile_csv_text


def test_table_round_trips_the_a100_profile():
    a100 = load_profile("a100")
    table = table_from_profile(a100)
    assert len(table.pairs()) == 594 and len(table.isolated()) == 30 + 36
    back = profile_from_table(table, "x", a100.datasets, a100)
    assert set(back.isolated) == set(a100.isolated) and set(back.pairs) == set(a100.pairs)
    # and the CSV of the rebuilt profile is byte-identical apart from row order
    again = profile_csv_text(profile_from_table(table, "x", a100.datasets, a100))
    assert sorted(again.splitlines()[1:]) == sorted(profile_csv_text(a100).splitlines()[1:])


def test_target_universe_of_the_a100_table_is_the_table(a100_table):
    """Every same-count pair except LLM+LLM, and every isolated run: exactly what the table has."""
    assert set(target_entries(a100_table)) == set(a100_table)


def test_target_universe_grows_with_gpu_counts_and_strategies(a100_table):
    extra = target_entries(a100_table, gpu_counts=[8], strategies={("GPT2-Medium", 2): ["20,4"]})
    new = set(extra) - set(a100_table)
    eight = [e for e in new if e.num_gpus == 8]
    # 12 small endpoints + DP24 of both LLMs on 8 GPUs: 14 alone, C(14,2) + 14 pairs less the three
    # that pair two LLMs (each with itself, and with the other)
    assert len(eight) == 14 + (14 * 15 // 2 - 3)
    s204 = [e for e in new if e.num_gpus == 2]
    assert len(s204) == 1 + 12  # alone + with each small job
    assert all("20,4" in (e.job.strategy, e.partner.strategy if e.partner else "") for e in s204)


def test_completion_keeps_measurements_and_tags_what_it_filled(a100_table):
    hidden = [e for e in a100_table.pairs() if e.num_gpus == 4 and not e.job.strategy and not e.partner.strategy]
    partial = a100_table.without(hidden)
    done = complete_table(partial, list(a100_table), [LinearModel(), MatrixCompletion(0)])
    assert set(done) == set(a100_table)
    assert {done.source(e) for e in hidden} == {"estimated:linear"}
    assert all(done.values[e] == a100_table.values[e] and done.source(e) == "measured" for e in partial)
    rows = provenance_rows(done)
    assert len(rows) == len(hidden) and rows[0]["source"] == "estimated:linear"
    back = provenance_from_rows(json.loads(json.dumps(rows)))
    assert back == {e: "estimated:linear" for e in hidden}
    with pytest.raises(InputError, match=r"provenance\[0\]: bad provenance row"):
        provenance_from_rows([{"gpu_type": "a100"}])


def test_completed_profile_serves_packing_lookups():
    a100 = load_profile("a100")
    table = table_from_profile(a100)
    gpt = ProfileKey("GPT2-Medium", "512/8", 2)
    part = Endpoint(ProfileKey("resnet50", "64", 2))
    hide = [make_entry("a100", Endpoint(gpt, s), part) for s in ("8,16", "6,18", "TP24")]
    partial = profile_from_table(table.without(hide), "partial", a100.datasets, a100)
    completed, filled = complete_profile(partial, [LinearModel(), BayesOpt()])
    assert {filled.source(e) for e in hide} == {"estimated:bo"}
    opts = completed.pair_options(gpt, part.key, "a100")
    assert {o.a_strategy for o in opts} == set(a100.strategies("GPT2-Medium", 2))
    best = completed.best_pair(Job("g", 2, "GPT2-Medium", "512/8"), Job("r", 2, "resnet50", "64"), "a100")
    assert best is not None and best.feasible
    # a filled value is the surrogate's, the measured ones are untouched
    measured = make_entry("a100", Endpoint(gpt, "10,14"), part)
    assert filled.source(measured) == "measured"
    assert oriented(measured, filled.values[measured], Endpoint(gpt, "10,14")) == (0.54, 0.65)  # CSV row 163


def test_value_feasibility_and_totals():
    assert Value(0.5).feasible and Value(0.5).total == 0.5
    assert not Value(0.5, 0.0).feasible and Value(0.5, 0.25).total == 0.75


# ---- CLI --------------------------------------------------------------------------------------------

def test_cli_fill_extends_gpu_counts_and_writes_provenance(tmp_path, capsys):
    a100 = load_profile("a100")
    table = table_from_profile(a100)
    one_gpu = table.only(e for e in table if e.num_gpus == 1)
    src = tmp_path / "one.csv"
    src.write_text(profile_csv_text(profile_from_table(one_gpu, "one", a100.datasets, a100)))
    out = tmp_path / "full.csv"
    rc = main(["estimate", "fill", str(src), "--out", str(out), "--estimators", "linear", "--gpu-counts", "2,4"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "estimated:linear" in text and "held out" in text
    got = parse_profile_csv(out.read_text(), str(out))
    key = ProfileKey("resnet50", "64", 4)
    assert got.pair_options(key, ProfileKey("vgg19", "32", 4), "a100") == \
        got.pair_options(ProfileKey("resnet50", "64", 1), ProfileKey("vgg19", "32", 1), "a100")
    prov = json.loads((tmp_path / "full.csv.provenance.json").read_text())
    assert len(prov) == 2 * (12 + 78)  # per new count: 12 alone + 78 pairs
    assert {r["source"] for r in prov} == {"estimated:linear"}


@pytest.mark.parametrize("argv, message", [
    (["estimate", "fill", "a100", "--out", "x.csv", "--estimators", "magic"], "unknown estimator 'magic'"),
    (["estimate", "fill", "a100", "--out", "x.csv", "--strategies", "GPT2-Medium=10,14"], "MODEL@GPUS"),
    (["estimate", "eval", "--budgets", "two"], "--budgets must be comma-separated integers"),
    (["estimate", "fill", "nope.csv", "--out", "x.csv"], "unknown profile 'nope.csv'"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("tesserae estimate: error:")


def test_cli_eval_json_reports_every_estimator(capsys):
    assert main(["estimate", "eval", "--budgets", "3", "--seeds", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["estimator"] for r in data["linear_holdout"]] == ["linear", "mc", "mean"]
    (b,) = data["budgets"]
    assert [r["estimator"] for r in b["reports"]] == ["linear+bo", "mc", "mean"]
    (s,) = data["search"]
    assert s["budget"] == 3 and 0.0 <= s["random_success"] <= s["bo_success"] <= 1.0
