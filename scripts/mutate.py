"""Mutation testing: `./dev mutate [--rev REV] [--examples N] [MODULE...]` (mutmut).

For each module (default: DEFAULT) the tree is copied to a scratch directory (the
working tree's files, or commit REV's, so the tests of that commit are measured), mutmut mutates
the module's functions and runs the module's own tests against each mutant, and the kill ratio is
printed with the surviving mutants' names (``mutmut show NAME`` in that directory shows one; the
directory is kept and named at the end). The working tree is never touched.

Property tests run derandomized with N examples each (``--examples``, default 25; tests/conftest.py),
so a mutant meets the same examples every run. mutmut does not mutate decorated functions, so the
compiled kernels (``@jit``: placement/consolidate_walk.py, pack_match.py, migrate_groups.py,
migrate_tables.py, lsap.py) are outside its reach: their tests are held to exact
oracles instead (docs/testing.md). Exit 2 on an unknown module.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# module -> (files mutmut mutates, as globs; the tests run against them)
MODULES: dict[str, tuple[list[str], list[str]]] = {
    "placement": (["tesserae_slurm/placement/*.py"], ["tests/placement", "tests/test_engine.py"]),
    "policies": (["tesserae_slurm/policies/*.py"], ["tests/policies"]),
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
}
DEFAULT = ["placement", "policies", "slurm/parse", "tsbatch/gpus", "policies/state_codec"]
# never mutated: the state codec has its own entry; mypy-only code and the compiled cores are skipped
SKIP = {"policies": ["tesserae_slurm/policies/state_codec.py"]}
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


def _run_module(name: str, work: Path, rev: str | None, examples: int) -> dict[str, object]:
    only, tests = MODULES[name]
    _copy_tree(work, rev)
    with open(work / "pyproject.toml", "a") as f:
        f.write(_config(only, tests, SKIP.get(name, [])))
    env = dict(os.environ, CI="true", TESSERAE_EXAMPLES=str(examples), NUMBA_CACHE_DIR=str(work / ".numba"))
    mutmut = [sys.executable, "-m", "mutmut"]
    t0 = time.monotonic()
    run = subprocess.run([*mutmut, "run", "--max-children", "2"], cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (work / "mutmut-run.log").write_text(run.stdout + run.stderr)
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=work, env=env, capture_output=True, check=False)
    stats_file = work / "mutants" / "mutmut-cicd-stats.json"
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    if run.returncode != 0 or not stats.get("total"):  # e.g. the tests fail without any mutant
        raise SystemExit(f"mutate: {name}: mutmut exited {run.returncode} with no results "
                         f"(log: {work / 'mutmut-run.log'})")
    listed = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True,
                            text=True).stdout
    survivors = [line.split(":")[0].strip() for line in listed.splitlines()
                 if line.strip().endswith((": survived", ": no tests", ": suspicious"))]
    killed = stats["killed"] + stats["timeout"] + stats["segfault"]
    tried = killed + stats["survived"] + stats["no_tests"] + stats["suspicious"]
    return {"module": name, "killed": killed, "tried": tried, "ratio": killed / tried if tried else 1.0,
            "survivors": survivors, "wall_s": wall, "dir": str(work), "stats": stats}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="./dev mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"of: {', '.join(MODULES)} (default: {', '.join(DEFAULT)})")
    ap.add_argument("--rev", help="measure this commit's code and tests (default: the working tree)")
    ap.add_argument("--examples", type=int, default=25, help="examples per property test (25)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        print(f"mutate: unknown module(s) {', '.join(unknown)} (known: {', '.join(MODULES)})", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="tesserae-mutate-"))
    results = []
    for name in args.modules or DEFAULT:
        work = root / name.replace("/", "-")
        work.mkdir()
        print(f"== mutate {name}{f' at {args.rev}' if args.rev else ''} in {work}", flush=True)
        r = _run_module(name, work, args.rev, args.examples)
        results.append(r)
        print(f"   {r['killed']}/{r['tried']} killed ({100 * r['ratio']:.0f} %) in {r['wall_s']:.0f} s", flush=True)
        for s in r["survivors"]:
            print(f"   survived: {s}")
    print("\n== kill ratio per module")
    for r in results:
        print(f"{r['module']:<22} {r['killed']:>5}/{r['tried']:<5} {100 * r['ratio']:5.1f} %")
    print(f"(scratch trees with each run's mutants: {root}; `mutmut show NAME` there shows one)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
