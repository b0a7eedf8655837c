"""``benchmarks/sim_speed.py --against REV``: both trees really run, alternately, and the report is
their medians and the pairwise ratios (a tiny generated trace; numba's JIT off so that the temporary
worktree does not compile the cores for seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sim_speed(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sim_speed.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_against_a_commit_times_both_trees_alternately_and_cleans_up():
    before = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    out = _sim_speed("--trace", "gen:tesserae:30", "--cluster", "2x4:a100", "--against", "HEAD", "--pairs", "2",
                     "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert len(report["runs_s"]["this"]) == len(report["runs_s"]["rev"]) == 2 == len(report["ratios"])
    assert report["ratios"] == [a / b for a, b in zip(report["runs_s"]["this"], report["runs_s"]["rev"])]
    # alternation: the second pair starts with this tree
    assert [line.split()[0] for line in out.stderr.splitlines()] == ["rev", "this", "this", "rev"]
    after = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    # the temporary worktree is gone (other worktrees of a developer's checkout may come and go meanwhile)
    assert not [w for w in set(after.splitlines()) - set(before.splitlines()) if "sim-speed-" in w]


def test_against_something_that_is_not_a_commit_fails_in_one_line():
    out = _sim_speed("--against", "no-such-rev", "--pairs", "1")
    assert out.returncode != 0
    assert out.stderr.strip() == "sim_speed: --against: not a commit: 'no-such-rev'"
