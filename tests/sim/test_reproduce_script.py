"""Smoke run of scripts/reproduce_results.py on a few jobs (the full run is slow work, not a test)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reproduce_results.py"


def load_script():
    spec = importlib.util.spec_from_file_location("reproduce_results", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_smoke_run_writes_the_document_and_reuses_its_cache(tmp_path):
    script = load_script()
    out, cache = tmp_path / "results.md", tmp_path / "cache"
    argv = ["--jobs", "6", "--cluster", "1x4", "--out", str(out), "--cache", str(cache), "--only", "a100,noise",
            "--workers", "1"]
    assert script.main(argv) == 0
    text = out.read_text()
    assert "## 1. Tesserae-style trace on A100" in text and "## 4. Profiling noise" in text
    assert "| tesserae-t |" in text and "| 1.54x |" in text  # ours beside the paper's ratio
    assert "Studies not run yet" in text and "gavel-trace" in text
    cached = sorted(p.name for p in cache.iterdir())
    assert len(cached) == 5 + 1 + 3 * 5  # 5 configurations; n = 0 once, three noisy levels x 5 seeds
    script.main(argv)  # second run: everything from the cache
    assert sorted(p.name for p in cache.iterdir()) == cached and out.read_text().count("| tesserae-t |") == 1


def test_gavel_rate_matches_the_tesserae_load():
    rate = load_script().gavel_rate()
    assert 3.0 < rate < 7.0  # ~1.9 GPU-h per Tesserae job x 80/h over ~31 GPU-h per Gavel job
