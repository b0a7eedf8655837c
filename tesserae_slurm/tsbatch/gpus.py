"""sbatch's GPU and node options, translated into the one number the daemon schedules: a job's GPUs.

Users write what they would write for sbatch (``-G 4``, ``--gres=gpu:a100:2``, ``-N 2
--gpus-per-node=4``, ``--gpus-per-task=1 --ntasks-per-node=4``), on the command line or in the
script's header. The daemon places a job of n GPUs on one node when n fits a node and otherwise on
n / (GPUs per node) whole nodes, and it picks the GPU type. So a request is honoured when it names
one count, a node count that is that placement's, and no GPU type the daemon could not keep to;
anything else is refused with one line naming the options, never silently changed.

Worked example on 4 nodes x 4 A100: ``-N 2 --gpus-per-node=4`` is 2 x 4 = 8 GPUs on 2 nodes: kept.
``-N 2 --gpus-per-node=2`` is 4 GPUs, which the daemon puts on 1 node: refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import InputError
from ..model.job import nodes_for
from ..site.partition import PartitionShape

# Options consumed here: they never reach sbatch.
TRANSLATED = frozenset(("gpus", "gpus-per-node", "gres", "gpus-per-task", "nodes", "gpu-bind"))
# Read here when GPUs are given per task, and passed on to sbatch unchanged.
TASK_OPTIONS = frozenset(("ntasks", "ntasks-per-node"))


@dataclass(frozen=True)
class GivenOption:
    name: str  # sbatch's long name
    value: str
    spelled: str  # as the user wrote it, e.g. "-N 2" or "--gres=gpu:2"
    where: str  # "" on the command line, else "<script> #SBATCH"

    def show(self) -> str:
        return f"{self.spelled} ({self.where})" if self.where else self.spelled


@dataclass(frozen=True)
class GpuRequest:
    num_gpus: int
    nodes: int
    origin: str  # the options the count came from ("" for the default of 1 GPU)


def merge(header: Sequence[GivenOption], command_line: Sequence[GivenOption]) -> dict[str, GivenOption]:
    """sbatch's precedence: the command line overrides the header, option by option. The same option
    twice in one place with different values is refused (sbatch would silently keep the last)."""
    merged: dict[str, GivenOption] = {}
    for source in (header, command_line):
        seen: dict[str, GivenOption] = {}
        for opt in source:
            if opt.name not in TRANSLATED | TASK_OPTIONS:
                continue
            first = seen.get(opt.name)
            if first is not None and first.value != opt.value:
                raise InputError(f"conflicting values: {first.show()} and {opt.show()}")
            seen[opt.name] = opt
        merged.update(seen)
    return merged


def translate(opts: dict[str, GivenOption], shape: PartitionShape, partition: str) -> GpuRequest:
    """The GPU count and node count of a merged request, or an ``InputError`` saying why not."""
    bind = opts.get("gpu-bind")
    if bind is not None and bind.value != "none":
        raise InputError(f"{bind.show()}: the launcher shows each job exactly the GPUs tesserae chose "
                         "(CUDA_VISIBLE_DEVICES); only --gpu-bind=none is accepted")
    given_nodes = _nodes(opts["nodes"]) if "nodes" in opts else None
    nodes = given_nodes or 1
    counts: list[tuple[int, list[GivenOption]]] = []  # (total GPUs, the options it came from)
    types: list[tuple[str, GivenOption]] = []
    per_node = [opts["nodes"]] if "nodes" in opts else []
    for name in ("gpus", "gpus-per-node", "gres", "gpus-per-task"):
        if name not in opts:
            continue
        opt = opts[name]
        gtype, k = _gres(opt) if name == "gres" else _typed_count(opt)
        if name == "gpus":
            counts.append((k, [opt]))
        elif name == "gpus-per-task":
            tasks, task_opts = _tasks(opts, nodes)
            counts.append((k * tasks, [*task_opts, opt]))
        else:
            counts.append((k * nodes, [*per_node, opt]))
        if gtype:
            types.append((gtype, opt))
    n, first = counts[0] if counts else (1, [])
    for other, other_opts in counts[1:]:
        if other != n:
            raise InputError(f"conflicting GPU requests: {describe(first)} asks for {n} GPU(s), "
                             f"{describe(other_opts)} for {other}")
    used = list(dict.fromkeys(o for _, opts_ in counts for o in opts_))
    for gtype, opt in types:
        _check_type(gtype, opt, shape.gpu_types, partition)
    need = nodes_for(n, shape.largest_node)
    if given_nodes is not None and given_nodes != need:
        raise InputError(
            f"{opts['nodes'].show()}: tesserae runs {n} GPU(s) on {need} node(s) ({shape.largest_node} GPUs per node; "
            "a job spans nodes only when it fills them)"
            + (f"; ask for {given_nodes * shape.largest_node} GPUs or drop -N" if given_nodes > need else "; drop -N"))
    return GpuRequest(n, need, describe(used))


_COUNT = re.compile(r"(?:([A-Za-z][\w.-]*):)?(\d+)")


def _typed_count(opt: GivenOption) -> tuple[str, int]:
    """``[type:]N`` of --gpus, --gpus-per-node and --gpus-per-task; several types are one per job too many."""
    m = _COUNT.fullmatch(opt.value.strip())
    if m is None:
        raise InputError(f"{opt.show()}: expected [TYPE:]N with a whole number N, e.g. 2 or a100:2"
                         + (" (tsbatch runs a job on one GPU type)" if "," in opt.value else ""))
    return (m.group(1) or "").lower(), _positive(int(m.group(2)), opt)


def _gres(opt: GivenOption) -> tuple[str, int]:
    """``gpu[:type][:N]`` (N defaults to 1, as in Slurm); other GRES would make Slurm arbitrate devices."""
    items = [s.strip() for s in opt.value.split(",")]
    others = [s for s in items if s.split(":")[0] != "gpu"]
    if others:
        raise InputError(f"{opt.show()}: only gpu GRES is translated ({others[0]!r} is not); "
                         "tesserae jobs hold no Slurm GRES (the daemon arbitrates GPUs, MPS included)")
    if len(items) != 1:
        raise InputError(f"{opt.show()}: give one gpu entry (tsbatch runs a job on one GPU type)")
    fields = items[0].split(":")[1:]
    count = "1"
    if fields and fields[-1].isdigit():
        count = fields.pop()
    if len(fields) > 1 or (fields and not re.fullmatch(r"[A-Za-z][\w.-]*", fields[0])):
        raise InputError(f"{opt.show()}: expected gpu, gpu:N or gpu:TYPE:N")
    return (fields[0].lower() if fields else ""), _positive(int(count), opt)


def _nodes(opt: GivenOption) -> int:
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", opt.value.strip())
    if m is None or (m.group(2) is not None and m.group(2) != m.group(1)):
        raise InputError(f"{opt.show()}: expected one node count N (tesserae decides where the job runs, "
                         "so a range of node counts cannot be honoured)")
    return _positive(int(m.group(1)), opt)


def _tasks(opts: dict[str, GivenOption], nodes: int) -> tuple[int, list[GivenOption]]:
    """Slurm's task count: -n, else --ntasks-per-node on each node, else one task per node."""
    on_nodes = [opts["nodes"]] if "nodes" in opts else []
    if "ntasks" in opts:
        return _whole(opts["ntasks"]), [opts["ntasks"]]
    if "ntasks-per-node" in opts:
        return _whole(opts["ntasks-per-node"]) * nodes, [*on_nodes, opts["ntasks-per-node"]]
    return nodes, on_nodes


def describe(opts: Sequence[GivenOption]) -> str:
    """Options as the user wrote them, grouped by where: ``-N 2 --gpus-per-node=4 (run.sh #SBATCH)``."""
    groups: dict[str, list[str]] = {}
    for o in opts:
        groups.setdefault(o.where, []).append(o.spelled)
    return " and ".join(" ".join(s) + (f" ({w})" if w else "") for w, s in groups.items())


def _whole(opt: GivenOption) -> int:
    if not opt.value.strip().isdigit():
        raise InputError(f"{opt.show()}: expected a whole number")
    return _positive(int(opt.value), opt)


def _positive(n: int, opt: GivenOption) -> int:
    if n <= 0:
        raise InputError(f"{opt.show()}: must be at least 1 (every tesserae job runs on GPUs)")
    return n


def _check_type(gtype: str, opt: GivenOption, types: tuple[str, ...], partition: str) -> None:
    if gtype not in types:
        raise InputError(f"{opt.show()}: partition {partition!r} has no {gtype} GPUs "
                         f"(it has {', '.join(types)})")
    if len(types) > 1:
        raise InputError(f"{opt.show()}: tesserae chooses the GPU type in partition {partition!r} "
                         f"({', '.join(types)}) and cannot keep a job to {gtype}; drop the type")


def cluster_shape(spec: str, default_type: str) -> PartitionShape:
    """``--cluster 2x4:a100,1x8:v100`` (nodes x GPUs per node [: type]): a partition for --dry-run without Slurm."""
    nodes: list[tuple[str, int]] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)(?::([A-Za-z][\w.-]*))?\s*", part)
        if m is None or int(m.group(1)) <= 0 or int(m.group(2)) <= 0:
            raise InputError(f"--cluster {spec}: expected NODESxGPUS[:TYPE][,...], e.g. 2x4:a100 or 4x8")
        nodes += [((m.group(3) or default_type).lower(), int(m.group(2)))] * int(m.group(1))
    return PartitionShape(tuple(nodes))
