"""`tesserae bench retention` on a small database: both runs reported, the pruned one kept what its
retention says, the admin commands timed on each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_bench_retention_small(tmp_path):
    out = subprocess.run([str(BIN / "tesserae"), "bench", "retention", "--rounds", "60", "--jobs", "20", "--nodes",
                          "2", "--max-rounds", "10", "--rounds-days", "0", "--jobs-days", "0.01", "--repeats", "1",
                          "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    full, pruned = json.loads(out.stdout)
    assert full["rounds_kept"] == 60 and full["jobs_kept"] == 20 + 2 * 60 and full["prune_ms_max"] == 0
    # 60 rounds 360 s apart: jobs ended more than 0.01 days (864 s) before the last prune are gone
    assert pruned["rounds_kept"] == 10 and pruned["jobs_kept"] < full["jobs_kept"] and pruned["prune_ms_max"] > 0
    assert pruned["size_mb"] <= full["size_mb"]
    assert set(full["commands"]) == set(pruned["commands"]) and all(v > 0 for v in pruned["commands"].values())
