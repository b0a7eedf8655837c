"""`tesserae profile`: measure the model zoo alone and in pairs and write a profile CSV.

Needs the ``torch`` extra; without it `tesserae profile` stays listed and answers with the extra to
install (cli/main.py checks before this module loads; torch itself is imported only when a profile runs).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..model import InputError
from ..profiler.measure import Protocol
from ..profiler.runner import ProfilerConfig, default_gpu_label, jobs_from_args, run_profile
from ..profiler.zoo import SIZES, ZOO
from ..profiles import write_profile_csv
from .progress import Bar
from .render import table


class RunProgress(Bar):
    """One progress line on stderr, like the simulator's (only when stderr is a terminal)."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        super().__init__(label, "runs", enabled, label_width=10)

    def __call__(self, done: int, total: int, run: str) -> None:
        self.draw(done, total, f"{time.monotonic() - self.started:6.0f} s  {run[:40]:<40}")


def _csv_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _int_list(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in _csv_list(text)]
    except ValueError:
        raise InputError(f"{what} must be comma-separated integers, got {text!r}") from None
    if any(x <= 0 for x in out):
        raise InputError(f"{what} must be positive, got {text!r}")
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="measure the model zoo alone and packed in pairs; write a profile CSV",
                       description=__doc__)
    p.add_argument("--models", default="resnet50,vgg19,dcgan,pointnet,gpt",
                   help=f"comma-separated zoo models (known: {', '.join(ZOO)})")
    p.add_argument("--batches", default="32,64,128", help="batch sizes of the non-LLM models")
    p.add_argument("--gpt-batches", default="512/8", help="GLOBAL/MICRO batches of the GPT job (comma-separated)")
    p.add_argument("--gpt-layers", type=int, default=24, help="transformer layers of the GPT job (default 24)")
    p.add_argument("--size", choices=SIZES, default=None,
                   help="full architectures, or tiny ones for a quick CPU run (default: tiny on cpu, full on cuda)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    p.add_argument("--gpu-type", default=None, help="GPU type label of the table (default: from the device name)")
    p.add_argument("--out", required=True, help="profile CSV to write")
    p.add_argument("--results", default=None, help="raw per-run results, JSON lines (default OUT.runs.jsonl)")
    p.add_argument("--resume", action="store_true", help="continue the results file, skipping finished runs")
    p.add_argument("--warmup", type=int, default=5, help="warm-up steps per job (default 5)")
    p.add_argument("--windows", type=int, default=5, help="measurement windows; the median counts (default 5)")
    p.add_argument("--window-seconds", type=float, default=2.0, help="minimum length of a window (default 2)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take (default 900)")
    p.add_argument("--memory-cap-mib", type=float, default=None,
                   help="device memory budget: a job or pair whose peaks sum above it is recorded infeasible")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per job (default 1)")
    p.add_argument("--cores", default="", help="cpu: cores that form the device (default: the first allowed one)")
    p.add_argument("--mps", choices=["auto", "on", "off"], default="auto",
                   help="cuda: run packed jobs under a private MPS control daemon (default auto)")
    p.add_argument("--gpu-counts", default="",
                   help="also write these GPU counts, estimated by the linear model from the 1-device runs")
    p.add_argument("--name", default=None, help="profile name (default: the output file's stem)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    device = args.device.strip().lower()
    size = args.size or ("tiny" if device == "cpu" else "full")
    label = args.gpu_type
    if label is None:
        if device == "cpu":
            label = "cpu"
        else:
            import torch

            label = default_gpu_label(torch.cuda.get_device_name(device)) if torch.cuda.is_available() else "gpu"
    jobs = jobs_from_args(_csv_list(args.models), _csv_list(args.batches), size, args.gpt_layers,
                          _csv_list(args.gpt_batches))
    protocol = Protocol(args.warmup, args.windows, args.window_seconds, args.timeout)
    if args.threads <= 0:
        raise InputError(f"--threads must be positive, got {args.threads}")
    cores = tuple(int(c) for c in _int_list(args.cores, "--cores")) if args.cores else ()
    config = ProfilerConfig(jobs, device, label.strip().lower(), protocol, args.memory_cap_mib, args.threads,
                            cores, args.mps)
    out = Path(args.out)
    results = Path(args.results) if args.results else out.with_name(out.name + ".runs.jsonl")
    progress = RunProgress("profile")
    try:
        build, measured = run_profile(config, results, args.resume, progress, args.name or out.stem)
    finally:
        progress.close()
    profile = build.profile
    notes: list[str] = []
    counts = _int_list(args.gpu_counts, "--gpu-counts") if args.gpu_counts else []
    if counts:
        from ..estimators.complete import complete_profile, provenance_rows
        from ..estimators.linear import LinearModel

        profile, filled = complete_profile(profile, [LinearModel()], counts, name=profile.name)
        rows = provenance_rows(filled)
        prov = out.with_name(out.name + ".provenance.json")
        prov.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        notes.append(f"{len(rows)} entries estimated by the linear model for {len(counts)} GPU counts: {prov}")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_profile_csv(profile, out)
    print(f"profiled {len(jobs)} jobs on {device} as {config.gpu_type} ({size}): {measured} runs measured now, "
          f"results in {results}")
    feasible = sum(1 for p in profile.pairs if p.option.feasible)
    print(table(["ISOLATED", "PAIRS", "INFEASIBLE", "LEFT_OUT"],
                [[len(profile.isolated), len(profile.pairs), len(profile.pairs) - feasible, len(build.left_out)]]))
    for why in build.left_out:
        print(f"left out: {why}")
    for n in notes:
        print(n)
    print(f"wrote {out}")
    return 0
