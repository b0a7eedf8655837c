"""tsbatch's imperative shell: config -> partition shape -> validated submission -> one sbatch call.

Nothing is submitted unless every check passed; sbatch is called once (never retried: a lost answer
must not become two jobs). Arguments and names reach Slurm as argv items, verbatim.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import InputError
from ..site.config import SiteConfig
from ..site.partition import PartitionShape, scheduling_profile, shape_from_nodes
from ..slurm import SlurmBackend
from .gpus import cluster_shape
from .options import Submission, check_command_line, make_submission, parse_argv, sbatch_args


@dataclass(frozen=True)
class Prepared:
    submission: Submission
    extra_args: tuple[str, ...]  # everything before the script
    script: tuple[str, ...]
    env: dict[str, str]  # added to sbatch's (so the job's) environment
    shape: PartitionShape
    shape_from: str  # where the partition's shape came from (sinfo, or --cluster for a dry run)

    def argv(self) -> list[str]:
        """The sbatch command line, for --dry-run and logs (a translated header: a copy of the script is sent)."""
        return ["sbatch", "--parsable", *self.extra_args, *self.script]


def read_script(path: str) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read batch script ({exc.strerror})") from None
    text = data.decode("utf-8", errors="surrogateescape")  # bytes kept as they are if tsbatch rewrites the header
    if not text.startswith("#!"):
        raise InputError(f"{path}: a batch script must start with '#!' (e.g. #!/bin/bash)")
    return text


def shape_of(backend: SlurmBackend, cfg: SiteConfig) -> PartitionShape:
    return shape_from_nodes(backend.list_nodes(cfg.slurm.partition), cfg)


def prepare(argv: Sequence[str], backend_factory: Callable[[SiteConfig], SlurmBackend],
            config_loader: Callable[[str | None], SiteConfig]) -> tuple[Prepared, SlurmBackend | None]:
    """Parse and validate; returns what to submit and the backend to submit with (None: --cluster, a
    dry run that never asks Slurm)."""
    own, sbatch, script = parse_argv(argv)
    config = own.get("--config")  # an option with a value: a string when given
    cfg = config_loader(config if isinstance(config, str) else None)
    partition = cfg.slurm.partition
    check_command_line(own, sbatch, script, partition)
    if "--cluster" in own and not own.get("--dry-run"):
        raise InputError("--cluster describes a cluster for --dry-run only; a submission reads the partition "
                         "from Slurm")
    text = read_script(script[0]) if script else None
    backend: SlurmBackend | None = None
    if "--cluster" in own:
        shape = cluster_shape(str(own["--cluster"]), cfg.scheduler.gpu_type)
        shape_from = f"--cluster {own['--cluster']}"
    else:
        backend = backend_factory(cfg)
        shape = shape_of(backend, cfg)
        shape_from = f"sinfo, partition {partition}"
        if not shape.node_gpus:
            raise InputError(f"partition {partition!r} has no nodes with GPUs (is it the managed partition?)")
    sub = make_submission(own, sbatch, script, partition, text, shape, scheduling_profile(cfg.scheduler.profile))
    extra = sbatch_args(sub, partition, cfg.preemption.signal, cfg.preemption.grace_seconds)
    env = {}
    if script:
        env["TESSERAE_SCRIPT_DIR"] = str(Path(script[0]).resolve().parent)
    return Prepared(sub, tuple(extra), tuple(script), env, shape, shape_from), backend


def submit(prepared: Prepared, backend: SlurmBackend) -> int:
    """One sbatch call. A script whose header lost GPU options is sent as a copy under its own name
    (Slurm keeps the script's text, not its path, so the copy can go once sbatch has read it)."""
    script: list[str] = [os.fspath(a) for a in prepared.script]
    text = prepared.submission.script_text
    if text is None:
        return backend.submit(script, prepared.extra_args, env=prepared.env)
    with tempfile.TemporaryDirectory(prefix="tsbatch-") as tmp:
        copy = Path(tmp) / Path(script[0]).name
        copy.write_bytes(text.encode("utf-8", errors="surrogateescape"))
        copy.chmod(0o700)
        return backend.submit([str(copy), *script[1:]], prepared.extra_args, env=prepared.env)
