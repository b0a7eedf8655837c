"""tsbatch's imperative shell: config -> partition shape -> validated submission -> one sbatch call.

Nothing is submitted unless every check passed; sbatch is called once (never retried: a lost answer
must not become two jobs). Arguments and names reach Slurm as argv items, verbatim.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import InputError
from ..slurm import SlurmBackend
from .options import PartitionShape, Submission, check_command_line, make_submission, parse_argv, sbatch_args


@dataclass(frozen=True)
class Prepared:
    submission: Submission
    extra_args: tuple[str, ...]  # everything before the script
    script: tuple[str, ...]
    env: dict[str, str]  # added to sbatch's (so the job's) environment

    def argv(self) -> list[str]:
        """The sbatch command line, for --dry-run and logs."""
        return ["sbatch", "--parsable", *self.extra_args, *self.script]


def read_script(path: str) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read batch script ({exc.strerror})") from None
    text = data.decode("utf-8", errors="replace")
    if not text.startswith("#!"):
        raise InputError(f"{path}: a batch script must start with '#!' (e.g. #!/bin/bash)")
    return text


def shape_of(backend: SlurmBackend, cfg) -> PartitionShape:  # type: ignore[no-untyped-def]
    return shape_from_nodes(backend.list_nodes(cfg.slurm.partition), cfg)


def shape_from_nodes(nodes, cfg) -> PartitionShape:  # type: ignore[no-untyped-def]
    """The partition's shape for tsbatch's checks (``options.check_meta``), which the daemon shares."""
    from ..daemon.connect import gpu_type_of
    return PartitionShape(tuple((gpu_type_of(cfg, n.name), n.gpus) for n in nodes if n.gpus > 0))


def prepare(argv: Sequence[str], backend_factory, config_loader) -> tuple[Prepared, SlurmBackend]:  # type: ignore[no-untyped-def]
    """Parse and validate; returns what to submit and the backend to submit with."""
    from ..daemon.profile import scheduling_profile

    own, sbatch, script = parse_argv(argv)
    cfg = config_loader(own.get("--config"))
    partition = cfg.slurm.partition
    check_command_line(own, sbatch, script, partition)
    text = read_script(script[0]) if script else None
    backend = backend_factory(cfg)
    shape = shape_of(backend, cfg)
    if not shape.node_gpus:
        raise InputError(f"partition {partition!r} has no nodes with GPUs (is it the managed partition?)")
    sub = make_submission(own, sbatch, script, partition, text, shape, scheduling_profile(cfg.scheduler.profile))
    nodes = max(1, -(-sub.meta.num_gpus // shape.largest_node))
    extra = sbatch_args(sub, partition, cfg.preemption.signal, cfg.preemption.grace_seconds, nodes)
    env = {}
    if script:
        env["TESSERAE_SCRIPT_DIR"] = str(Path(script[0]).resolve().parent)
    return Prepared(sub, tuple(extra), tuple(script), env), backend


def submit(prepared: Prepared, backend: SlurmBackend) -> int:
    script: list[str] = [os.fspath(a) for a in prepared.script]
    return backend.submit(script, prepared.extra_args, env=prepared.env)
