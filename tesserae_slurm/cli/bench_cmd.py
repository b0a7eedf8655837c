"""`tesserae bench ...`: benchmarks reported as medians (never timed unit tests)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ..model import InputError
from .gc_tuning import long_run_gc
from .jsonio import dump_json
from .render import table


def _ints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (medians of repeated runs)")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    d = bsub.add_parser("decision", help="time one round decision on a synthetic state, by stage")
    d.add_argument("--gpus", type=int, default=256)
    d.add_argument("--jobs", type=int, default=2048)
    d.add_argument("--repeats", type=int, default=7)
    d.add_argument("--warmup", type=int, default=1,
                   help="untimed runs first, left out of the statistics (numba's JIT compile; default 1)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--packing", choices=["on", "off", "single"], default="on")
    d.add_argument("--migration", choices=["tesserae", "flat", "gavel"], default="tesserae")
    d.add_argument("--user-limit", type=int, default=None, metavar="GPUS",
                   help="a GPU limit for every user (the synthetic jobs have 50 users); default none")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=run_decision)

    s = bsub.add_parser("scale", help="decision time by stage over cluster and queue sizes, vs Gavel and POP",
                        description="Sweep GPUs x active jobs; time the whole round (Tiresias ranking + engine) "
                                    "and the Gavel/POP LP baselines on the same states.")
    s.add_argument("--gpus", type=_ints, default=None, help="comma-separated GPU counts (default 64,256,1024,10000)")
    s.add_argument("--jobs", type=_ints, default=None,
                   help="comma-separated active-job counts (default 256,512,1024,2048,8192,50000)")
    s.add_argument("--repeats", type=int, default=5, help="states per point; medians are reported (default 5)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--baselines", default="gavel,pop",
                   help="comma-separated: gavel (our HiGHS model of Gavel's LP), gavel-cvxpy (Gavel's cvxpy/ECOS "
                        "build, needs the bench extra), pop, or none (default gavel,pop)")
    s.add_argument("--cap", type=float, default=60.0, help="time cap per baseline call in seconds (default 60)")
    s.add_argument("--baseline-max-jobs", type=int, default=2048,
                   help="do not run baselines above this many jobs (default 2048)")
    s.add_argument("--smoke", action="store_true", help="tiny sizes for CI: 16 GPUs, 32 and 64 jobs, 1 repeat")
    s.add_argument("--json", metavar="OUT", help="write results JSON here ('-' for stdout)")
    s.add_argument("--plot", metavar="PNG", help="write the time-vs-jobs plot here")
    s.add_argument("--report", metavar="MD", help="write a markdown report here (docs/performance.md)")
    s.add_argument("--from-json", metavar="JSON", help="re-render --report/--plot from an earlier --json (no runs)")
    s.set_defaults(func=run_scale)

    c = bsub.add_parser("cli", help="median wall time of the admin commands against a 1,000-job state DB",
                        description="Build a state database through the daemon's store (1,000 jobs, 300 rounds) "
                                    "and time `tesserae --help`, `jobs` (its table, and every job as JSON), `rounds`, "
                                    "`round show last` and `explain JOB`, each as a fresh process. Needs the daemon "
                                    "extra.")
    c.add_argument("--repeats", type=int, default=5, help="runs per command; the median is reported (default 5)")
    c.add_argument("--jobs", type=int, default=1000, help="jobs in the database (default 1000)")
    c.add_argument("--rounds", type=int, default=300, help="rounds in the database (default 300)")
    c.add_argument("--checkout", metavar="DIR", default=None,
                   help="time another source tree's code (put on PYTHONPATH), e.g. a `git worktree` of an "
                        "older commit, for before/after comparisons")
    c.add_argument("--db", metavar="PATH", default=None, help="where to write the database (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="JSON output")
    c.set_defaults(func=run_cli)

    ds = bsub.add_parser(
        "daemon-scale", help="the daemon's whole round at scale, phase by phase (observe, reconcile, decide, "
                             "record, apply), Slurm calls per changed job, database growth, `jobs` and page latency",
        description="Run the real daemon (tesserae-t) for a few rounds over a big queue and report each phase's "
                    "time, the Slurm commands, the database's growth and the admin command's and web page's latency "
                    "(medians). --world generated: Slurm 22.05's JSON printed from an in-memory cluster (default "
                    "1,792 nodes x 4 GPUs, 20,000 jobs: Perlmutter), changing commands counted, not executed. "
                    "--world devcluster: the dev cluster's slurmd per node with emulated GPUs (default 64 nodes, "
                    "5,000 jobs sleeping 60-600 s), every call real; needs the host's Slurm and root.")
    ds.add_argument("--world", choices=("generated", "devcluster"), default="generated")
    ds.add_argument("--nodes", type=int, default=None, help="nodes of 4 GPUs (default 1792 generated, 64 devcluster)")
    ds.add_argument("--jobs", type=int, default=None, help="queued jobs (default 20000 generated, 5000 devcluster)")
    ds.add_argument("--rounds", type=int, default=5, help="rounds to run (default 5; the first two shown apart)")
    ds.add_argument("--churn", type=float, default=0.02,
                    help="generated: share of running jobs that end between rounds, as many arriving (default 0.02)")
    ds.add_argument("--pause", type=float, default=5.0, help="devcluster: seconds between rounds (default 5)")
    ds.add_argument("--seed", type=int, default=0)
    ds.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    ds.add_argument("--calls", action="store_true", help="also list each round's Slurm commands by verb")
    ds.set_defaults(func=run_daemon_scale)

    r = bsub.add_parser("retention", help="state database size and admin command latency after many rounds, "
                                          "with and without retention",
                        description="Write two state databases through the daemon's store (default 10,000 rounds "
                                    "360 s apart at 1,000 active jobs on 256 GPUs), one pruned after every round "
                                    "as the daemon prunes between rounds, and time the admin commands on each. "
                                    "Needs the daemon extra and about 1 GB of disk.")
    r.add_argument("--rounds", type=int, default=10_000)
    r.add_argument("--jobs", type=int, default=1_000, help="active jobs at any time (default 1000)")
    r.add_argument("--nodes", type=int, default=64, help="4-GPU nodes (default 64)")
    r.add_argument("--rounds-days", type=float, default=7.0, help="retention.rounds_days of the pruned run")
    r.add_argument("--jobs-days", type=float, default=7.0, help="retention.jobs_days of the pruned run")
    r.add_argument("--max-rounds", type=int, default=0, help="retention.max_rounds of the pruned run")
    r.add_argument("--repeats", type=int, default=3, help="runs per command; the median is reported")
    r.add_argument("--dir", default=None, help="keep the databases here (default: a temp dir, removed)")
    r.add_argument("--json", action="store_true", help="JSON output")
    r.set_defaults(func=run_retention)

    ph = bsub.add_parser(
        "physical", help="the paper's physical experiment on the dev cluster (emulated GPUs), beside the simulator",
        description="Replay the paper's 120-job trace (80 jobs/h) on an 8 x 4 dev cluster of emulated GPUs in "
                    "scaled time, under each run (the daemon under a policy, plain Slurm), REPEATS times, and "
                    "report the simulator's deviation from the mean of the real runs and the runs' ratios, with "
                    "the paper's figures beside (section 6.2). Needs root, Slurm and the daemon extra; about 15 "
                    "min per run at the default scale (docs/devcluster.md, \"replay\").")
    ph.add_argument("--trace", default="gen:tesserae:120:80:0", help="default gen:tesserae:120:80:0")
    ph.add_argument("--scale", type=float, default=None, help="trace seconds per wall second (default 40)")
    ph.add_argument("--mode", default="daemon:tesserae-t,daemon:tiresias,plain",
                    help="runs, comma-separated (default daemon:tesserae-t,daemon:tiresias,plain); the first "
                         "daemon run is what the others' ratios compare with")
    ph.add_argument("--repeats", type=int, default=1, help="real runs of each (default 1; the paper's "
                                                           "fidelity is a mean over runs)")
    ph.add_argument("--replay-jobs", type=int, default=None, metavar="N", help="only the first N arrivals (shorter)")
    ph.add_argument("--nodes", type=int, default=8)
    ph.add_argument("--gpus", type=int, default=4)
    ph.add_argument("--round", type=float, default=360.0, help="round length, trace seconds (default 360)")
    ph.add_argument("--grace", type=float, default=90.0, help="preemption grace, trace seconds (default 90)")
    ph.add_argument("--profile", default="a100")
    ph.add_argument("--seed", type=int, default=0, help="seed of plain Slurm's modeled time limits (default 0)")
    ph.add_argument("--no-feedback", action="store_true")
    ph.add_argument("--dir", default="/tmp/tesserae-bench-physical", help="the dev cluster's directory")
    ph.add_argument("--ports", type=int, default=None, metavar="BASE", help="slurmctld's port (slurmds above it)")
    ph.add_argument("--no-install", action="store_true", help="do not apt-get install missing Slurm packages")
    ph.add_argument("--keep-up", action="store_true", help="leave the cluster running")
    ph.add_argument("--out", default="out/bench-physical", help="report directory (default out/bench-physical)")
    ph.add_argument("--from-dir", default=None, metavar="OUT",
                    help="run nothing: predict the runs saved in OUT (its report.json and run directories) again "
                         "with the current simulator, measure their overheads, and write the report there")
    ph.set_defaults(func=run_physical)
    v = bsub.add_parser("responsive", help="submit -> start and signal -> GPUs free on the dev cluster, and the cost "
                                           "of the poll between rounds on slurmctld",
                        description="On a dev cluster (2 nodes x 4 fake GPUs, with a plain partition): 1-GPU jobs "
                                    "submitted to an idle cluster, timed to their start, under plain Slurm and "
                                    "under the daemon; operators' requeues of running jobs, timed from the "
                                    "checkpoint signal to the stop's end; the poll's cost in slurmctld (sdiag). "
                                    "Medians. Needs root (Slurm) and the daemon extra.")
    v.add_argument("--dir", default="/tmp/tesserae-bench-responsive", help="the dev cluster's directory")
    v.add_argument("--ports", type=int, default=None, help="slurmctld's port (the slurmds take the next ones)")
    v.add_argument("--out", default="out/bench-responsive", help="the runs' files and report.md/json")
    v.add_argument("--parts", default="plain,start,stop,poll", help="which measures (default all of them)")
    v.add_argument("--repeats", type=int, default=7, help="jobs per measure; medians are reported (default 7)")
    v.add_argument("--round-seconds", type=float, default=360.0, help="the daemon's rounds for submit -> start "
                                                                      "(default 360, as etc/tesserae.yaml)")
    v.add_argument("--grace-seconds", type=float, default=30.0, help="preemption grace (default 30)")
    v.add_argument("--checkpoint-seconds", type=float, default=1.0, help="time the payload takes to checkpoint "
                                                                         "(default 1)")
    v.add_argument("--queue", type=_ints, default=[1, 500], help="held jobs in the partition while the poll is "
                                                                  "timed (default 1,500)")
    v.add_argument("--poll-calls", type=int, default=50, help="calls per listing timed (default 50)")
    v.add_argument("--checkout", metavar="DIR", default=None,
                   help="run the daemon and the launcher from another source tree (before/after)")
    v.add_argument("--keep-up", action="store_true", help="leave a cluster this command brought up running")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=run_responsive)
    m = bsub.add_parser("moves", help="the dev-cluster scenario of moves: migrations, preemptions, shifts and "
                                      "oscillations of the daemon on a real Slurm",
                        description="Bring up the dev cluster (8 nodes x 4 fake GPUs), run the daemon with the dev "
                                    "configuration (tesserae-t, 5 s rounds, 20 s grace, Tiresias demoting after 30 "
                                    "GPU-s) and 32 jobs of 1-8 GPUs over the six a100 models from two users until "
                                    "every job ended, and count from its state database how it moved and stopped "
                                    "jobs. Each round's inputs are recorded and dumped (rounds.jsonl) for replays. "
                                    "Needs the daemon extra, the host's Slurm and root (for the second user).")
    m.add_argument("--dir", default="/tmp/tesserae-bench-moves", help="cluster and run directory")
    m.add_argument("--out", default=None, help="where the report goes (default DIR/out)")
    m.add_argument("--jobs", type=int, default=32)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--nodes", type=int, default=8)
    m.add_argument("--gpus", type=int, default=4, help="fake GPUs per node (default 4)")
    m.add_argument("--policy", default="tesserae-t", help="the daemon's named configuration (default tesserae-t)")
    m.add_argument("--round-seconds", type=float, default=5.0)
    m.add_argument("--grace-seconds", type=float, default=20.0)
    m.add_argument("--users", default="root,nobody",
                   help="comma-separated Unix users submitting in turn (root: the caller; others through runuser)")
    m.add_argument("--ports", type=int, default=None, help="pin the cluster's ports from this base")
    m.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for every job to end")
    m.add_argument("--from-db", metavar="DB", default=None,
                   help="analyze an earlier run's state database instead of running (no cluster)")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=run_moves)


def run_decision(args: argparse.Namespace) -> int:
    from ..bench.decision import as_json, bench_decision
    from ..engine import EngineConfig

    if args.repeats < 1 or args.warmup < 0:
        raise InputError("--repeats must be >= 1 and --warmup >= 0")
    from ..model.gpu_limits import GpuLimits
    limits = GpuLimits(default_user=args.user_limit) if args.user_limit is not None else None
    b = bench_decision(args.gpus, args.jobs, repeats=args.repeats, seed=args.seed,
                       config=EngineConfig(packing=args.packing, migration=args.migration), warmup=args.warmup,
                       limits=limits)
    if args.json:
        dump_json(as_json(b))
        return 0
    print(f"decision at {b.gpus} GPUs / {b.jobs} jobs, {b.repeats} repeats after {b.warmup} warm-up run(s) "
          f"(not counted): median {b.median_ms:.2f} ms "
          f"(p90 {b.p90_ms:.2f} ms); median migrations {b.migrations_median:g}, packed pairs {b.packed_median:g}")
    print(table(["STAGE", "MEDIAN_MS"], [[k, f"{v:.2f}"] for k, v in b.stages.items()]))
    return 0


def run_moves(args: argparse.Namespace) -> int:
    import importlib.util
    import os
    from dataclasses import asdict

    if importlib.util.find_spec("sqlalchemy") is None:
        raise InputError("bench moves runs the daemon: install the daemon extra (pip install 'tesserae-slurm[daemon]')")
    from ..bench.moves import analyze, as_json, dump_rounds, report_text, run_scenario, scenario_jobs

    root = Path(args.dir).resolve()
    out = Path(args.out).resolve() if args.out else root / "out"
    if args.from_db:
        db = Path(args.from_db)
        if not db.is_file():
            raise InputError(f"--from-db {db}: no such file")
    else:
        from ..devcluster import DevCluster, ensure_slurm_installed
        from ..devcluster.compare import Settings, policy_options
        from ..devcluster.errors import DevClusterError
        from ..devcluster.runs import RunError
        from ..slurm import SlurmError

        users = [u.strip() for u in args.users.split(",") if u.strip()]
        if not users or args.jobs < 1:
            raise InputError("--users names at least one user and --jobs is >= 1")
        if any(u != "root" for u in users) and os.geteuid() != 0:
            raise InputError("--users: submitting as other users needs root (runuser)")
        jobs = scenario_jobs(args.jobs, args.seed)
        settings = Settings(policy=args.policy, policy_options=policy_options(args.policy),
                            round_seconds=args.round_seconds, grace_seconds=args.grace_seconds, timeout_s=args.timeout)
        ensure_slurm_installed()
        cluster = DevCluster(root / "cluster", nodes=args.nodes, gpus_per_node=args.gpus, ctld_port=args.ports,
                             slurmd_base_port=None if args.ports is None else args.ports + 1)
        work = root / "run"
        import shutil
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        work.chmod(0o755)
        try:
            cluster.up()
            print(f"dev cluster {cluster.root}: {args.nodes} nodes x {args.gpus} fake GPUs; daemon {args.policy}, "
                  f"{args.round_seconds:g} s rounds, {args.grace_seconds:g} s grace; {len(jobs)} jobs from "
                  f"{', '.join(users)}, seed {args.seed}", file=sys.stderr, flush=True)
            db = run_scenario(jobs, cluster.env(), work, settings, ["" if u == "root" else u for u in users])
        except (DevClusterError, RunError, SlurmError) as exc:
            print(f"tesserae bench moves: error: {exc}", file=sys.stderr)
            return 1
        finally:
            cluster.down()
        (work / "jobs.json").write_text(json.dumps([asdict(j) for j in jobs], indent=1) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    report = analyze(db)
    recorded = dump_rounds(db, out / "rounds.jsonl")
    (out / "report.json").write_text(json.dumps(as_json(report), indent=1) + "\n")
    if args.json:
        dump_json(as_json(report))
    else:
        print(report_text(report))
        print(f"\nwrote {out / 'report.json'} and {out / 'rounds.jsonl'} ({recorded} rounds with their inputs)")
    return 0


def run_cli(args: argparse.Namespace) -> int:
    import importlib.util
    import tempfile

    from ..bench import cli_latency

    if args.repeats < 1 or args.jobs < 1 or args.rounds < 1:
        raise InputError("--repeats, --jobs and --rounds must be >= 1")
    if importlib.util.find_spec("sqlalchemy") is None:
        raise InputError("bench cli writes a state database: install the daemon extra "
                         "(pip install 'tesserae-slurm[daemon]')")
    if args.checkout and not (Path(args.checkout) / "tesserae_slurm" / "cli" / "main.py").is_file():
        raise InputError(f"--checkout {args.checkout}: not a tesserae-slurm source tree")

    def progress(text: str) -> None:
        print(f"bench cli: {text} ...", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="tesserae-bench-cli-") as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "state.db"
        try:
            timings = cli_latency.run(db, args.repeats, args.checkout, args.jobs, args.rounds, progress)
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    if args.json:
        dump_json({"jobs": args.jobs, "rounds": args.rounds, "repeats": args.repeats, "checkout": args.checkout,
                   "commands": [{"command": t.label, "argv": list(t.argv), "median_s": t.median_s,
                                 "runs_s": list(t.runs)} for t in timings]})
        return 0
    print(f"admin commands against {args.jobs} jobs / {args.rounds} rounds, {args.repeats} runs each"
          + (f" (code from {args.checkout})" if args.checkout else ""))
    print(table(["COMMAND", "MEDIAN_S", "MIN_S", "MAX_S"],
                [[f"tesserae {t.label}", f"{t.median_s:.3f}", f"{min(t.runs):.3f}", f"{max(t.runs):.3f}"]
                 for t in timings]))
    return 0


def _scale_command(args: argparse.Namespace) -> str:
    """The sweep's own command line, rebuilt from the parsed options (for the report's header)."""
    words = ["tesserae", "bench", "scale"]
    if args.smoke:
        words.append("--smoke")
    for flag, value in (("--gpus", args.gpus), ("--jobs", args.jobs)):
        if value:
            words += [flag, ",".join(map(str, value))]
    for flag, value, default in (("--repeats", args.repeats, 5), ("--seed", args.seed, 0),
                                 ("--baselines", args.baselines, "gavel,pop"), ("--cap", args.cap, 60.0),
                                 ("--baseline-max-jobs", args.baseline_max_jobs, 2048)):
        if value != default:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    for flag, value in (("--json", args.json), ("--plot", args.plot), ("--report", args.report)):
        if value:
            words += [flag, value]
    return shlex.join(words)


def run_scale(args: argparse.Namespace) -> int:
    from ..bench import report, scale  # local: pulls in the policies and the simulator's speed model

    baselines = [] if args.baselines.strip() in ("", "none") else [b.strip() for b in args.baselines.split(",")]
    bad = [b for b in baselines if b not in scale.BASELINES]
    if bad:
        raise InputError(f"unknown baseline(s) {', '.join(bad)}; known: {', '.join(scale.BASELINES)}, none")
    if args.repeats < 1 or args.cap <= 0:
        raise InputError("--repeats must be >= 1 and --cap > 0")
    gpus, jobs, repeats, cap = args.gpus, args.jobs, args.repeats, args.cap
    if args.smoke:
        gpus, jobs, repeats, cap = gpus or [16], jobs or [32, 64], 1, min(cap, 30.0)
    gpus, jobs = gpus or list(scale.DEFAULT_GPUS), jobs or list(scale.DEFAULT_JOBS)

    def progress(text: str) -> None:
        print(f"bench scale: {text} ...", file=sys.stderr, flush=True)

    command = _scale_command(args)
    if args.from_json:
        from .jsonio import load_json

        try:
            points, cap, recorded = scale.from_json(load_json(args.from_json))
        except (KeyError, TypeError) as exc:
            raise InputError(f"{args.from_json}: not a `tesserae bench scale --json` file ({exc})") from None
        command = recorded or f"tesserae bench scale (re-rendered from {args.from_json})"
    else:
        points = scale.sweep(gpus, jobs, repeats, args.seed, baselines, cap, args.baseline_max_jobs, progress)
    result = scale.as_json(points, cap, command)
    if args.json == "-":
        dump_json(result)
    elif args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
    plot_name = None
    if args.plot and report.plot(points, Path(args.plot), cap):
        plot_name = args.plot
    if args.report:
        out = Path(args.report)
        rel = None
        if plot_name:
            try:
                rel = str(Path(plot_name).resolve().relative_to(out.resolve().parent))
            except ValueError:
                rel = str(Path(plot_name).resolve())
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report.markdown(points, cap, command.strip(), rel) + report.kept_tail(out))
    if args.json != "-":
        rows = []
        for p in points:
            g, gc, pop = (p.baselines.get(k) for k in ("gavel", "gavel-cvxpy", "pop"))
            rows.append([p.gpus, p.jobs, f"{p.median_ms:.1f}", *(f"{p.stages[s]:.1f}" for s in scale.STAGES),
                         f"{p.peak_mib:.1f}", *(b.text(cap) if b else "" for b in (g, gc, pop)),
                         report.ratio_text(g, p, cap), report.ratio_text(gc, p, cap)])
        print(table(["GPUS", "JOBS", "TOTAL_MS", "SCHED", "PLACE", "PACK", "MIGRATE", "PEAK_MIB", "GAVEL_MS",
                     "GAVEL_CVXPY_MS", "POP_MS", "GAVEL/TESSERAE", "CVXPY/TESSERAE"], rows))
        for line in report.target_lines(points):
            print(line)
    return 0


def run_daemon_scale(args: argparse.Namespace) -> int:
    import tempfile

    from ..bench import daemon_scale as ds

    live = args.world == "devcluster"
    nodes = args.nodes if args.nodes is not None else 64 if live else 1792
    jobs = args.jobs if args.jobs is not None else 5000 if live else 20000
    if min(nodes, jobs, args.rounds) < 1 or not 0 <= args.churn < 1 or args.pause < 0:
        raise InputError("--nodes, --jobs and --rounds must be >= 1, --churn in [0, 1), --pause >= 0")

    def progress(text: str) -> None:
        print(f"bench daemon-scale: {text}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="tesserae-bench-daemon-scale-") as tmp, long_run_gc():  # as the daemon
        work = Path(args.dir) if args.dir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if live:
            report, _ = ds.run_devcluster(work, nodes, jobs, args.rounds, args.pause, args.seed, progress=progress)
        else:
            report = ds.run_generated(work, nodes, jobs, args.rounds, args.churn, args.seed, progress=progress)
    print(ds.markdown([report]))
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in report.load)} (1, 5, 15 min)")
    if args.calls:
        print()
        print(ds.calls_table([report]))
    return 0


def run_retention(args: argparse.Namespace) -> int:
    import dataclasses
    import tempfile

    from ..bench.retention import report, run
    from ..site.config import RetentionSection

    if min(args.rounds, args.jobs, args.nodes, args.repeats) < 1:
        raise InputError("--rounds, --jobs, --nodes and --repeats must be >= 1")
    ret = RetentionSection(rounds_days=args.rounds_days, jobs_days=args.jobs_days, max_rounds=args.max_rounds)
    with tempfile.TemporaryDirectory(prefix="tesserae-bench-retention-") as tmp:
        work = Path(args.dir) if args.dir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        res = run(work, args.rounds, args.jobs, args.nodes, args.repeats, ret,
                  lambda t: print(f"bench retention: {t} ...", file=sys.stderr, flush=True))
    if args.json:
        dump_json([dataclasses.asdict(r) for r in res])
    else:
        print(report(res, args.rounds, args.jobs, args.nodes, args.repeats))
    return 0


def run_physical(args: argparse.Namespace) -> int:
    from ..bench.physical import render_physical, runs_from_report
    from ..devcluster.cluster import DevCluster
    from ..devcluster.errors import DevClusterError
    from ..devcluster.replay import DEFAULT_SCALE
    from ..devcluster.replay_cmd import Runs, plan_from_args, replay_runs
    from ..devcluster.runs import RunError
    from ..slurm import SlurmError

    if args.repeats < 1:
        raise InputError("--repeats must be >= 1")
    if args.from_dir:  # the saved runs, predicted again with the current simulator
        out = Path(args.from_dir).resolve()
        modes, plan, runs, asked = runs_from_report(out, args.profile, args.seed)
    else:
        args.scale = DEFAULT_SCALE if args.scale is None else args.scale
        try:
            cluster = DevCluster(Path(args.dir), nodes=args.nodes, gpus_per_node=args.gpus, plain_partition="plain",
                                 bf_interval_s=1, ctld_port=args.ports,
                                 slurmd_base_port=None if args.ports is None else args.ports + 1)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        modes, profile, plan = plan_from_args(cluster, args)
        out = Path(args.out).resolve()

        asked = args.repeats

        def so_far(runs: Runs) -> None:  # the runs done so far, readable by --from-dir if a later one fails
            _, data, _ = render_physical(plan, [label for label, _ in modes], runs, out, profile, asked)
            (out / "report.json").write_text(json.dumps(data, indent=1) + "\n")

        try:
            runs = replay_runs(cluster, plan, profile, modes, out, repeats=args.repeats,
                               feedback=not args.no_feedback, install=not args.no_install, keep_up=args.keep_up,
                               prog="tesserae bench physical", on_run=so_far)
        except (DevClusterError, RunError, SlurmError) as exc:
            print(f"tesserae bench physical: error: {exc}", file=sys.stderr)
            return 1
    text, data, ok = render_physical(plan, [label for label, _ in modes], runs, out, repeats_asked=asked)
    print("\n" + text)
    (out / "report.md").write_text(text + "\n")
    (out / "report.json").write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nwrote {out / 'report.md'} and {out / 'report.json'}")
    return 0 if ok else 1


def run_responsive(args: argparse.Namespace) -> int:
    from ..bench import responsive
    from ..devcluster import DevCluster
    from ..devcluster.errors import DevClusterError
    from ..devcluster.install import ensure_slurm_installed
    from ..slurm import SlurmError

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in responsive.PARTS]
    if bad or not parts:
        raise InputError(f"--parts takes {', '.join(responsive.PARTS)}, got {args.parts!r}")
    if args.repeats < 1 or args.round_seconds <= 0 or args.grace_seconds < 0 or args.checkpoint_seconds < 0:
        raise InputError("--repeats must be >= 1, --round-seconds > 0, --grace/--checkpoint-seconds >= 0")
    if args.checkout and not (Path(args.checkout) / "tesserae_slurm" / "cli" / "main.py").is_file():
        raise InputError(f"--checkout {args.checkout}: not a tesserae-slurm source tree")
    cluster = DevCluster(args.dir, nodes=2, gpus_per_node=4, plain_partition="plain", bf_interval_s=1,
                         ctld_port=args.ports, slurmd_base_port=args.ports + 1 if args.ports else None)
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    brought_up = False
    try:
        if not cluster.status().up:
            ensure_slurm_installed()
            cluster.up()
            brought_up = True
        result = responsive.run(cluster, work, parts, args.repeats, args.round_seconds, args.grace_seconds,
                                args.checkpoint_seconds, args.checkout, args.queue, args.poll_calls,
                                lambda t: print(f"bench responsive: {t}", file=sys.stderr, flush=True))
    except (responsive.BenchError, DevClusterError, SlurmError) as exc:
        print(f"tesserae bench responsive: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if brought_up and not args.keep_up:
            cluster.down()
    text = responsive.report(result)
    (work / "report.md").write_text(text + "\n")
    (work / "report.json").write_text(json.dumps(responsive.as_json(result), indent=1) + "\n")
    if args.json:
        dump_json(responsive.as_json(result))
    else:
        print(text)
    return 0
