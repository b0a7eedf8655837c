"""tsbatch's command line: parse, validate against the site's configuration and the partition, submit
once (tsbatch/submit.py); bad input is one line and exit status 2, a Slurm error exit status 1."""

from __future__ import annotations

import shlex
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..model import InputError

if TYPE_CHECKING:
    from ..tsbatch.submit import Prepared

EXIT_INPUT = 2
EXIT_SLURM = 1

# What `tsbatch --help` prints ({refused}: the refused sbatch options, from tsbatch/options.py).
HELP = """tsbatch: sbatch for the tesserae-managed partition.

    tsbatch [tsbatch options] [sbatch options] script.sh [args ...]
    tsbatch [tsbatch options] [sbatch options] --wrap CMD

The job is submitted held, requeueable, appending to its output, with the checkpoint signal the
daemon uses, and with its scheduling metadata in its Comment; the tesserae daemon starts it on the
nodes and GPUs it chooses, may share its GPUs with another job (packing), and may preempt it
(checkpoint signal, then requeue) or move it.

tsbatch options:
  --model M              the job's model in the daemon's throughput profile (required, or --no-profile)
  --batch-size B         its batch size (optional for LLMs: the profile has one per GPU count)
  --parallelism "S1;S2"  strategies the job may run with, e.g. "10,14;TP24" (default: all the profile knows)
  --no-pack              never share GPUs with another job
  --no-profile           a job the profile does not know: placed alone at speed 1.0, never packed
  --parsable             print only the job id
  --dry-run              print what would be submitted (sbatch argv, metadata, script) and the checks'
                         outcome; submit nothing
  --cluster SHAPE        with --dry-run: the partition as NODESxGPUS[:TYPE][,...] (e.g. 2x4:a100), so
                         Slurm is not asked (the GPU type defaults to the config's scheduler.gpu_type)
  --config PATH          the daemon's configuration (managed partition, profile, checkpoint signal)
  --list-models          print the models the daemon's profile knows, with their batch sizes and GPU counts
  -h, --help             this text

GPUs and nodes, in sbatch's spellings, on the command line or in the script's #SBATCH lines:
  -G, --gpus=[TYPE:]N            N GPUs in all (default: 1)
  --gpus-per-node=[TYPE:]N       N GPUs on each node, times -N (default 1 node)
  --gres=gpu[:TYPE][:N]          the same (N defaults to 1)
  --gpus-per-task=[TYPE:]N       N GPUs per task, times -n/--ntasks (or --ntasks-per-node times -N)
  -N, --nodes=N                  must be the nodes tesserae uses: 1 when the job fits one node, else
                                 GPUs / GPUs per node (e.g. -N 2 --gpus-per-node=4 on 4-GPU nodes)
  --gpu-bind=none                accepted: each job sees exactly the GPUs tesserae gave it
They become the job's GPU count and node count, and Slurm never sees them (the managed partition
admits no GPU request): a script whose header holds them is submitted as a copy without them. As in
sbatch, the command line overrides the header option by option.

Rules, checked before anything is submitted (the daemon checks every job's metadata the same way):
  - the GPU count is a power of two (1, 2, 4, 8, ...); a job larger than one node uses whole nodes;
    it can be at most the GPUs of one type in the partition (jobs never mix GPU types)
  - GPU options that disagree (-G 2 with --gpus-per-node=4) or a -N that is not the placement's are
    refused, not reconciled; so is a range of nodes (-N 1-2)
  - a GPU type must be the partition's; where the partition has several, tesserae picks the type,
    so a request naming one is refused
  - --model (and --batch-size, --parallelism) must be known to the daemon's profile
  - another --partition than the managed one, and --open-mode other than append, are refused

Refused sbatch options, and why:
{refused}
Every other sbatch option is passed to sbatch unchanged. Bad input prints one line and exits 2
without submitting anything; a Slurm error exits 1.
"""


def help_text() -> str:
    from ..tsbatch.options import REFUSED, SHORT_TO_LONG

    short = {long: f"-{letter}, " for letter, long in SHORT_TO_LONG.items()}
    by_reason: dict[str, list[str]] = {}
    for name, reason in REFUSED.items():
        by_reason.setdefault(reason, []).append(f"{short.get(name, '')}--{name}")
    lines = [textwrap.fill(f"{', '.join(names)}: {reason}", 100, initial_indent="  ", subsequent_indent="      ",
                           break_on_hyphens=False) for reason, names in by_reason.items()]
    return HELP.strip().format(refused="\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or _asks_for_help(args):
        print(help_text())
        return 0 if args else EXIT_INPUT
    from ..site.connect import backend_from_config
    from ..site.load import resolve_config
    from ..slurm import SlurmError
    from ..tsbatch.submit import prepare, submit

    try:
        if _asks_for(args, "--list-models"):
            print(list_models(args))
            return 0
        prepared, backend = prepare(args, backend_from_config, lambda path: resolve_config(path, check_policy=False)[0])
        if prepared.submission.dry_run:
            print(dry_run_report(prepared))
            return 0
        assert backend is not None  # only a dry run goes without Slurm
        job_id = submit(prepared, backend)
    except InputError as exc:
        print(f"tsbatch: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except SlurmError as exc:
        hint = "; --dry-run --cluster NODESxGPUS[:TYPE] checks without Slurm" if "--dry-run" in args else ""
        print(f"tsbatch: error: {exc}{hint}", file=sys.stderr)
        return EXIT_SLURM
    if prepared.submission.parsable:
        print(job_id)
    else:
        print(f"Submitted batch job {job_id} (held; the tesserae daemon starts it)")
    return 0


def _asks_for_help(args: list[str]) -> bool:
    try:
        return _asks_for(args, "--help")
    except InputError:
        return False


def _asks_for(args: list[str], flag: str) -> bool:
    from ..tsbatch.options import parse_argv

    return bool(parse_argv(args)[0].get(flag))


def list_models(args: list[str]) -> str:
    """--list-models: the profile's models as --model takes them, their batch sizes and GPU counts."""
    from ..site.job_rules import describe_batch, profiled_models
    from ..site.load import resolve_config
    from ..site.partition import scheduling_profile
    from ..tsbatch.options import parse_argv
    from .render import table

    config = parse_argv(args)[0].get("--config")
    cfg, source = resolve_config(config if isinstance(config, str) else None, check_policy=False)
    profile = scheduling_profile(cfg.scheduler.profile)
    rows = []
    for e in profiled_models(profile):
        if e.fixed_batch:
            batches = "none needed: " + "; ".join(f"{describe_batch(b)} ({b})" for b in e.batches)
        else:
            batches = ", ".join(e.batches) or "none needed"
        rows.append([e.model, batches, ",".join(map(str, e.gpu_counts))])
    return (f"profile {profile.name} (scheduler.profile in {source}):\n"
            + table(["MODEL (--model)", "BATCH SIZES (--batch-size)", "GPUS (-G)"], rows)
            + "\nAny other job: --no-profile (placed alone at speed 1.0, never packed).")


def dry_run_report(prepared: Prepared) -> str:
    """What --dry-run prints: the checks' outcome, the metadata, the sbatch argv and the script."""
    sub = prepared.submission
    shape = prepared.shape
    nodes = ", ".join(f"{t}:{g}" for t, g in sorted(set(shape.node_gpus)))
    meta = sub.meta
    what = f"{meta.num_gpus} GPU(s) on {sub.nodes} node(s)" + (f" (from {sub.gpus_from})" if sub.gpus_from else "")
    lines = [
        "tsbatch: dry run, nothing submitted",
        f"checks: passed against {len(shape.node_gpus)} node(s) [{nodes}] ({prepared.shape_from})",
        f"gpus: {what}",
        f"metadata: {meta.encode()}",
        f"argv: {shlex.join(prepared.argv())}",
    ]
    if prepared.script:
        if sub.script_text is None:
            lines.append(f"script: {prepared.script[0]} (sent as it is)")
        else:
            text = sub.script_text.rstrip("\n").split("\n")
            last = max(i for i, line in enumerate(text) if "# tsbatch translated:" in line)
            lines.append(f"script: a copy of {prepared.script[0]} without the translated options, which begins:")
            lines += ["  " + line for line in text[:last + 1]]
            if len(text) > last + 1:
                more = len(text) - last - 1
                lines.append(f"  ... ({more} more line{'s' if more > 1 else ''}, unchanged)")
    if prepared.env:
        lines.append("environment: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(prepared.env.items())))
    return "\n".join(lines).encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")


if __name__ == "__main__":
    sys.exit(main())
