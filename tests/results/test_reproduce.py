"""Smoke runs of the reproduction (tesserae_slurm/results/, scripts/reproduce_results.py) on a few
jobs (the full run is slow work, not a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tesserae_slurm.results import cli, profile_studies, render, runner, studies

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reproduce_results.py"


def test_the_script_is_the_command():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", "nonsense"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "unknown studies ['nonsense']" in proc.stderr


def test_smoke_run_writes_the_document_and_reuses_its_cache(tmp_path, monkeypatch):
    out, cache = tmp_path / "results.md", tmp_path / "cache"
    argv = ["--jobs", "6", "--cluster", "1x4", "--out", str(out), "--cache", str(cache), "--only", "a100,noise",
            "--workers", "1"]
    assert cli.main(argv) == 0
    text = out.read_text()
    assert "## 1. Tesserae-style trace on A100" in text and "## 4. Profiling noise" in text
    assert "| tesserae-t |" in text and "| 1.54x |" in text  # ours beside the paper's ratio
    assert "Studies not run yet" in text and "gavel-trace" in text
    cached = sorted(p.name for p in cache.iterdir())
    assert len(cached) == 5 + 1 + 3 * 5  # 5 configurations; n = 0 once, three noisy levels x 5 seeds
    cli.main(argv)  # second run: everything from the cache
    assert sorted(p.name for p in cache.iterdir()) == cached and out.read_text().count("| tesserae-t |") == 1
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "other-code")  # the code changed: nothing is reused
    cli.main(argv + ["--only", "a100"])
    assert len(set(p.name for p in cache.iterdir()) - set(cached)) == 5


def test_code_fingerprint_follows_the_files(tmp_path):
    from tesserae_slurm.sim.fingerprint import code_fingerprint

    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.md").write_text("not code\n")
    before = code_fingerprint.__wrapped__(tmp_path)
    (tmp_path / "notes.md").write_text("edited\n")
    assert code_fingerprint.__wrapped__(tmp_path) == before  # only sources and data count
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_fingerprint.__wrapped__(tmp_path) != before
    assert code_fingerprint() == code_fingerprint() and len(code_fingerprint()) == 12
    now = code_fingerprint.__wrapped__(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "render.py").write_text("prose = 'reworded'\n")
    assert code_fingerprint.__wrapped__(tmp_path) == now  # the reproduction's own package is left out
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "results.py").write_text("x = 3\n")
    assert code_fingerprint.__wrapped__(tmp_path) != now  # only that folder, not every file of its name


def test_gavel_rate_matches_the_tesserae_load():
    rate = studies.gavel_rate()
    assert 3.0 < rate < 7.0  # ~1.9 GPU-h per Tesserae job x 80/h over ~31 GPU-h per Gavel job


def test_smoke_run_of_the_estimator_and_parallelism_studies(tmp_path):
    out, cache = tmp_path / "results.md", tmp_path / "cache"
    argv = ["--jobs", "12", "--cluster", "1x4", "--out", str(out), "--cache", str(cache), "--only",
            "estimators,parallelism", "--budgets", "2", "--repeats", "1", "--llm-shares", "0.5", "--workers", "1"]
    assert cli.main(argv) == 0
    text = out.read_text()
    assert "## 6. Throughput estimators instead of the full table" in text and "## 7. LLM parallelism" in text
    assert "| 2 | 29% |" in text  # budget 2: the measured share of the A100 table
    assert "| 50% |" in text and "Tesserae-T vs Default PP" in text
    runs = sorted(p.name for p in cache.glob("*.json"))
    assert len(runs) == (1 + 3) + 4  # oracle + three tables; four LLM strategy modes
    tables = sorted(p.name for p in (cache / "profiles").iterdir())
    assert "a100-b2-s0-linear+bo.csv" in tables and "a100-b2-s0-mc.csv.provenance.json" in tables
    cli.main(argv + ["--render-only"])  # from the cache alone: the same document
    assert sorted(p.name for p in cache.glob("*.json")) == runs and out.read_text().count("| 50% |") == 1


def test_llm_share_changes_only_models_of_multi_gpu_jobs():
    from tesserae_slurm.sim.traces import load_shipped

    trace = list(load_shipped("tesserae-900"))
    mixed = profile_studies.with_llm_share(trace, 0.5, 1)
    assert [(j.job_id, j.submit_time, j.num_gpus, j.duration) for j in mixed] == \
        [(j.job_id, j.submit_time, j.num_gpus, j.duration) for j in trace]
    multi = [j for j in mixed if j.num_gpus in (2, 4)]
    share = sum(j.model in ("GPT2-Medium", "Bert-Large") for j in multi) / len(multi)
    assert 0.45 < share < 0.55
    assert all(j.model == t.model for j, t in zip(mixed, trace, strict=True) if j.num_gpus not in (2, 4))
    assert profile_studies.with_llm_share(trace, 0.5, 1) == mixed  # seeded


def test_the_document_names_the_cache_relative_to_the_repository(tmp_path):
    assert render._shown(render.ROOT / "out" / "reproduce") == "out/reproduce"
    assert render._shown(tmp_path) == str(tmp_path)  # outside the repository: as given


def test_splice_replaces_only_the_slurm_section():
    new = [render.SLURM_TITLE, "", "new", ""]
    doc = "\n".join(["# R", "", "## 7. x", "", "seven", "", "## What differs", "", "end"])
    once = render.splice(doc, new)  # no section 8 yet: inserted before the closing sections
    assert once.split("\n") == ["# R", "", "## 7. x", "", "seven", "", *new, "## What differs", "", "end"]
    twice = render.splice(once.replace("new", "old"), new)  # replaced, the rest untouched
    assert twice == once


def test_smoke_run_of_the_fairness_study(tmp_path):
    """Section 9 (packing without victims): every variant and trace seed, the targets, the CDF figures."""
    out, cache = tmp_path / "results.md", tmp_path / "cache"
    argv = ["--jobs", "10", "--cluster", "2x4", "--out", str(out), "--cache", str(cache), "--only", "fairness",
            "--trace-seeds", "2", "--workers", "1"]
    assert cli.main(argv) == 0
    text = out.read_text()
    assert "## 9. Packing without victims" in text and "### Verdict" in text
    assert "| (b) + (e), promotion only for jobs that ran <= 3 h |" in text
    assert "(a) Tesserae-T, `min_speed` 0.5" in text
    assert "| tesserae-t-fair = (b) + (e) + (f), promotion only for jobs that ran <= 2 h |" in text  # verdict too
    assert "| `tesserae-t-fair` = (b) + (e) + (f), cap 2 h | Tesserae-style trace, A100 | 1 |" in text
    assert "vs Tiresias(Single), avg JCT" in text and "Worst jobs (seed 0)" in text
    runs = sorted(p.name for p in cache.glob("*.json"))
    assert len(runs) == 2 * (13 + 12)  # two generated setups: 13 variants at seed 0, 12 at seed 1 (no Gavel)
    assert "* **The promotion knob** of `tesserae-t-fair` at 7.5x instead of 8x: meets all four targets in" in text
    assert (tmp_path / "img" / "fairness-a100.png").exists() and "](img/fairness-a100.png)" in text
    # the variants of one configuration are cached apart (policy options and min_speed are in the key)
    assert len({r.rsplit("-", 1)[-1] for r in runs}) == len(runs)
    old = "# doc\n\n## 8. Against plain Slurm\n\nx\n\n## What differs from the paper's setup everywhere\n"
    out.write_text(old)
    assert cli.main(argv + ["--splice"]) == 0  # section 9 alone, into the document as it is
    spliced = out.read_text()
    assert spliced.startswith("# doc\n\n## 8. Against plain Slurm\n\nx\n\n## 9. Packing without victims")
    assert spliced.rstrip().endswith("## What differs from the paper's setup everywhere")


def test_moves_verdict_is_computed_from_the_runs():
    def run(jct: float, migrations: int, preemptions: int, jobs: int) -> dict:
        return {"avg_jct_s": jct, "makespan_s": 7200.0, "ftf": {"worst": 2.0, "p99": 1.5},
                "migrations": migrations, "preemptions": preemptions,
                "moves_per_job": (migrations + preemptions) / jobs, "oscillations": 0, "same_node_shifts": 0,
                "decision_ms": {"median": 1.0}}
    study = studies.Study("moves", "t", studies.Setup("x", "1x4:a100", "a100"), ("a", "b"),
                          extra={"titles": ("S0", "S1")})
    study.results = {(0, "a", "paper"): run(1000.0, 90, 10, 10), (0, "a", "paying"): run(1030.0, 10, 10, 10),
                     (0, "b", "paper"): run(1000.0, 40, 0, 10), (0, "b", "paying"): run(900.0, 20, 0, 10),
                     (1, "a", "paper"): run(1000.0, 100, 0, 10), (1, "a", "paying"): run(990.0, 100, 0, 10)}
    text = "\n".join(render.render_moves({"moves": study}))
    assert "the largest change is +3.0% (S0, a), the best -10.0%" in text  # the worst suite named, not the first
    assert "migrations change by +0% to -89%" in text
    assert "fall to 20% to 100% of the paper's plan's" in text  # (10+10)/(90+10) .. 100/100
    assert "| S0 | a | +3.0% | -89% | -80% |" in text
