"""Mutation testing: `./dev mutate [--rev REV] [--examples N] [--sample K [--seed S]] [MODULE...]` (mutmut).

For each module (default: DEFAULT) the tree is copied to a scratch directory (the
working tree's files, or commit REV's, so the tests of that commit are measured), mutmut mutates
the module's functions and runs the module's own tests against each mutant, and the kill ratio is
printed with the surviving mutants' names (``mutmut show NAME`` in that directory shows one; the
directory is kept and named at the end). The working tree is never touched.

``--sample K`` runs K of the module's mutants drawn at random (seed S, default 0: the same K every
run of the same code) instead of all of them, for modules too big to run whole; the ratio is then
printed with its 95 % confidence interval (Wilson).

Property tests run derandomized with N examples each (``--examples``, default 25; tests/conftest.py),
so a mutant meets the same examples every run. mutmut does not mutate decorated functions, so the
compiled kernels (``@jit``: placement/consolidate_walk.py, pack_match.py, migrate_groups.py,
migrate_tables.py, lsap.py) are outside its reach: their tests are held to exact
oracles instead (docs/testing.md). Exit 2 on an unknown module.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The daemon's unit tests: a real SQLite store and the in-memory Slurm (tests/daemon/fake_slurm.py);
# the live Slurm tests never run under mutation (``-m "not slurm_live"`` below).
ROUND_TESTS = ["tests/daemon/round", "tests/daemon/test_loop.py", "tests/daemon/test_feedback.py",
               "tests/daemon/test_foreign.py"]
STORE_TESTS = [*ROUND_TESTS, "tests/daemon/test_store.py", "tests/daemon/test_retention.py",
               "tests/daemon/test_schema.py"]

# module -> (files mutmut mutates, as globs; the tests run against them: a path the measured tree
# lacks, e.g. a test file added later than ``--rev``, is left out)
MODULES: dict[str, tuple[list[str], list[str]]] = {
    "placement": (["tesserae_slurm/placement/*.py"], ["tests/placement", "tests/test_engine.py"]),
    # the quiet-round hooks (stable_rounds, skip_rounds) are the policies' own, checked against their
    # rank round by round in the simulator's folder, where the fast-forward that reads them lives
    "policies": (["tesserae_slurm/policies/*.py"], ["tests/policies", "tests/sim/test_quiet_hooks.py"]),
    "slurm/parse": (["tesserae_slurm/slurm/parse.py"], ["tests/slurm/test_parse.py", "tests/slurm/test_parse_versions.py"]),
    "tsbatch/gpus": (["tesserae_slurm/tsbatch/gpus.py"], ["tests/tsbatch"]),
    "policies/state_codec": (["tesserae_slurm/policies/state_codec.py"], ["tests/policies/test_state_codec.py"]),
    # single files of the two big modules (whole, each takes hours here), against the tests that name them
    "placement/pinned": (["tesserae_slurm/placement/pinned.py"],
                         ["tests/placement", "tests/policies/test_slurm_backfill.py"]),
    "placement/limit_gate": (["tesserae_slurm/placement/limit_gate.py"],
                             ["tests/placement/test_limits.py", "tests/placement/test_rules_and_limits.py"]),
    "policies/slurm_backfill": (["tesserae_slurm/policies/slurm_backfill.py"], ["tests/policies/test_slurm_backfill.py"]),
    "policies/gavel_rounds": (["tesserae_slurm/policies/gavel_rounds.py"], ["tests/policies/test_gavel_rounds.py"]),
    # the daemon: the round's steps, the guard, the state database and its retention
    "daemon/round": (["tesserae_slurm/daemon/round/*.py"], ROUND_TESTS),
    "daemon/round/guard": (["tesserae_slurm/daemon/round/guard.py"], ROUND_TESTS),
    "daemon/state/store": (["tesserae_slurm/daemon/state/store.py"], STORE_TESTS),
    "daemon/state/retention": (["tesserae_slurm/daemon/state/retention.py"], ["tests/daemon/test_retention.py"]),
}
DEFAULT = ["placement", "policies", "slurm/parse", "tsbatch/gpus", "policies/state_codec", "daemon/round",
           "daemon/round/guard", "daemon/state/store", "daemon/state/retention"]
# never mutated: a file with its own entry; mypy-only code and the compiled cores are skipped
SKIP = {"policies": ["tesserae_slurm/policies/state_codec.py"],
        "daemon/round": ["tesserae_slurm/daemon/round/guard.py"]}
COMPILED = [f"tesserae_slurm/placement/{m}.py" for m in ("consolidate_walk", "pack_match", "migrate_groups",
                                                         "migrate_tables", "lsap")]


def _copy_tree(dest: Path, rev: str | None) -> None:
    """The repository's files as of ``rev`` (``git archive``), or the working tree's tracked and
    untracked-but-not-ignored files."""
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def _config(only: list[str], tests: list[str], skip: list[str]) -> str:
    def toml_list(xs: list[str]) -> str:
        return "[" + ", ".join(json.dumps(x) for x in xs) + "]"
    return ("\n[tool.mutmut]\n"
            'source_paths = ["tesserae_slurm"]\n'
            f"only_mutate = {toml_list(only)}\n"
            f"do_not_mutate = {toml_list(skip + COMPILED)}\n"
            f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-m", "not slurm_live", "-q"]\n')


# Writes the mutants (mutmut's first step of `run`, alone) and every mutant's name to the file named by
# argv[1], one a line: the population a sample is drawn from. mutmut 3.8.1's own functions, as its `run`
# calls them.
_LIST_MUTANTS = """
import sys
from pathlib import Path
import mutmut.__main__ as m
from mutmut.mutation.data import SourceFileMutationData
m.set_mutant_under_test("mutant_generation")
Path("mutants").mkdir(exist_ok=True)
m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); m.store_lines_covered_by_tests()
m.create_mutants(2)
names = []
for path in m.walk_mutatable_files():
    data = SourceFileMutationData(path=path)
    data.load()
    names += data.exit_code_by_key
Path(sys.argv[1]).write_text("".join(n + "\\n" for n in names))
"""
KILLED = ("killed", "timeout", "segfault")
TRIED = (*KILLED, "survived", "no tests", "suspicious")  # not: skipped, not checked, caught by type check


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % confidence interval of a proportion k/n (Wilson score: sound near 0 and 1, unlike k/n +- 2 SE)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)


def _run_module(name: str, work: Path, rev: str | None, examples: int, sample: int | None,
                seed: int) -> dict[str, object]:
    only, tests = MODULES[name]
    _copy_tree(work, rev)
    with open(work / "pyproject.toml", "a") as f:
        f.write(_config(only, [t for t in tests if (work / t).exists()], SKIP.get(name, [])))
    env = dict(os.environ, CI="true", TESSERAE_EXAMPLES=str(examples), NUMBA_CACHE_DIR=str(work / ".numba"))
    mutmut = [sys.executable, "-m", "mutmut"]
    t0 = time.monotonic()
    chosen: list[str] = []
    population = 0
    if sample is not None:
        every = work / "mutants.txt"
        listed = subprocess.run([sys.executable, "-c", _LIST_MUTANTS, str(every)], cwd=work, env=env,
                                capture_output=True, text=True)
        names = sorted(every.read_text().split()) if every.exists() else []
        if listed.returncode != 0 or not names:
            (work / "mutmut-run.log").write_text(listed.stdout + listed.stderr)
            raise SystemExit(f"mutate: {name}: could not list the mutants (log: {work / 'mutmut-run.log'})")
        population = len(names)
        chosen = random.Random(seed).sample(names, min(sample, len(names)))
        (work / "sample.txt").write_text("\n".join(sorted(chosen)) + "\n")
    run = subprocess.run([*mutmut, "run", "--max-children", "2", *chosen], cwd=work, env=env, capture_output=True,
                         text=True)
    wall = time.monotonic() - t0
    (work / "mutmut-run.log").write_text(run.stdout + run.stderr)
    report = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True,
                            text=True).stdout
    status = {k.strip(): v.strip() for k, _, v in (line.rpartition(":") for line in report.splitlines()) if k}
    if chosen:
        wanted = set(chosen)
        status = {k: v for k, v in status.items() if k in wanted}
    counted = {k: v for k, v in status.items() if v in TRIED}
    if run.returncode != 0 or not counted:  # e.g. the tests fail without any mutant
        raise SystemExit(f"mutate: {name}: mutmut exited {run.returncode} with no results "
                         f"(log: {work / 'mutmut-run.log'})")
    killed = sum(v in KILLED for v in counted.values())
    tried = len(counted)
    survivors = sorted(k for k, v in counted.items() if v not in KILLED)
    return {"module": name, "killed": killed, "tried": tried, "ratio": killed / tried,
            "ci95": wilson(killed, tried) if chosen else None, "population": population or tried,
            "survivors": survivors, "statuses": {v: sum(x == v for x in status.values()) for v in set(status.values())},
            "wall_s": wall, "dir": str(work)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="./dev mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"of: {', '.join(MODULES)} (default: {', '.join(DEFAULT)})")
    ap.add_argument("--rev", help="measure this commit's code and tests (default: the working tree)")
    ap.add_argument("--examples", type=int, default=25, help="examples per property test (25)")
    ap.add_argument("--sample", type=int, metavar="K", help="run K mutants drawn at random, not all of them")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (0)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        print(f"mutate: --sample must be at least 1, not {args.sample}", file=sys.stderr)
        return 2
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        print(f"mutate: unknown module(s) {', '.join(unknown)} (known: {', '.join(MODULES)})", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="tesserae-mutate-"))
    results = []
    for name in args.modules or DEFAULT:
        work = root / name.replace("/", "-")
        work.mkdir()
        print(f"== mutate {name}{f' at {args.rev}' if args.rev else ''}"
              f"{f' ({args.sample} mutants, seed {args.seed})' if args.sample else ''} in {work}", flush=True)
        r = _run_module(name, work, args.rev, args.examples, args.sample, args.seed)
        results.append(r)
        print(f"   {r['killed']}/{r['tried']} killed ({100 * r['ratio']:.0f} %) in {r['wall_s']:.0f} s", flush=True)
        for s in r["survivors"]:
            print(f"   survived: {s}")
    print("\n== kill ratio per module")
    for r in results:
        line = f"{r['module']:<24} {r['killed']:>5}/{r['tried']:<5} {100 * r['ratio']:5.1f} %"
        ci = r["ci95"]
        if isinstance(ci, tuple):
            lo, hi = ci
            line += f"  (95 % CI {100 * lo:.1f}-{100 * hi:.1f} %; a sample of {r['population']} mutants)"
        print(line)
    print(f"(scratch trees with each run's mutants: {root}; `mutmut show NAME` there shows one)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
