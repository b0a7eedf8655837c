"""Random search with the property tests: `./dev fuzz [N] [--runs R] [--seed S] [PYTEST ARGS]`.

Runs every Hypothesis test outside the live Slurm ones (or those PYTEST ARGS select) with N examples
each (default 1000; tests/conftest.py applies it over each test's own count) under a random seed,
R times with a new seed each (default 1). CI draws the same examples every run (the derandomized
profile), so new failures are found here: each is printed with its seed, its falsifying example and
the command that reruns it; pin it as an ``@example`` in its test and fix the cause. Exit 1 when a
run failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAILED = re.compile(r"^FAILED (\S+)")
# pytest's section header for a failing test: "____ test_name[param] ____"
HEADER = re.compile(r"^_{3,} (\S+) _{3,}$")


def _failures(log: str) -> tuple[list[str], dict[str, str]]:
    """The failing test ids, and under each test's section header (its name as pytest prints it) the
    error lines: the assertion, the falsifying example and the blob that reproduces it."""
    ids = [m.group(1) for m in map(FAILED.match, log.splitlines()) if m]
    found: dict[str, list[str]] = {}
    name = ""
    for line in log.splitlines():
        if m := HEADER.match(line):
            name = m.group(1)
        elif name and (line == "E" or line.startswith("E ")):
            found.setdefault(name, []).append("  " + line[4:])
    return ids, {k: "\n".join(v) for k, v in found.items()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="./dev fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", nargs="?", type=int, default=1000, help="examples per property test (1000)")
    ap.add_argument("--runs", type=int, default=1, help="runs, a new random seed each (1)")
    ap.add_argument("--seed", type=int, help="the first run's seed (to rerun a failure)")
    args, pytest_args = ap.parse_known_args(argv)
    if args.examples < 1 or args.runs < 1:
        print("fuzz: examples and runs must be >= 1", file=sys.stderr)
        return 2
    env = dict(os.environ, TESSERAE_EXAMPLES=str(args.examples))
    env.pop("CI", None)  # the fuzz profile, not CI's fixed examples
    seeds = [args.seed if args.seed is not None and k == 0 else random.SystemRandom().randrange(2**32)
             for k in range(args.runs)]
    report: list[str] = []
    for k, seed in enumerate(seeds, 1):
        print(f"== fuzz run {k}/{len(seeds)}: seed {seed}, {args.examples} examples per property test", flush=True)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "--tb=short",
               f"--hypothesis-seed={seed}", "-m", "hypothesis and not slurm_live", *pytest_args]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
        rc = proc.wait()
        print(f"== fuzz run {k}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc == 0:
            continue
        ids, examples = _failures("".join(lines))
        if not ids:
            report.append(f"seed {seed}: pytest exited {rc} with no failing test (see the output above)")
        for test in ids:
            name = test.split("::")[-1]
            shown = examples.get(name, "  (no error printed; see the output above)")
            report.append(f"seed {seed}: {test}\n{shown}\n  rerun: ./dev fuzz {args.examples} --seed {seed} {test}")
    if report:
        print("\n== fuzz: failures (pin each as an @example in its test)")
        print("\n\n".join(report))
        return 1
    print(f"\n== fuzz: no failure in {len(seeds)} run(s) of {args.examples} examples per property test")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
