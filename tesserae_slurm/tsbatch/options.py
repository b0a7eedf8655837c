"""tsbatch's command line: its own options, sbatch's options passed through, and the checks on both.

Pure: argv and the partition's shape in, a validated ``Submission`` out, or an ``InputError`` with one
line. sbatch options are recognised from a table (Slurm 22.05's ``sbatch --help``) so the script is
found exactly where sbatch would find it; options that would fight the daemon (GPU requests, node
lists, --no-requeue, a comment, another partition ...) are refused with the reason, both on the
command line and in the script's ``#SBATCH`` header.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import InputError
from ..model.meta import UNPROFILED, JobMeta
from ..profiles import ThroughputProfile
from ..site.job_rules import check_meta
from ..site.partition import PartitionShape
from .gpus import TRANSLATED, GivenOption, merge, translate
from .header import header_tokens, without

# sbatch long options -> whether they take a value: "req", "opt" (only as --opt=value) or "no".
SBATCH_LONG: dict[str, str] = {
    **dict.fromkeys((
        "array", "account", "bb", "bbf", "begin", "comment", "cpu-freq", "cpus-per-task", "dependency",
        "deadline", "delay-boot", "chdir", "error", "export-file", "gid", "gres", "gres-flags", "input",
        "job-name", "licenses", "clusters", "container", "distribution", "mail-type", "mail-user",
        "mcs-label", "ntasks", "ntasks-per-node", "nodes", "output", "partition", "power", "priority",
        "profile", "qos", "core-spec", "signal", "switches", "thread-spec", "time", "time-min", "uid",
        "wckey", "cluster-constraint", "constraint", "nodefile", "mem", "mincpus", "reservation", "tmp",
        "nodelist", "exclude", "mem-per-cpu", "sockets-per-node", "cores-per-socket", "threads-per-core",
        "extra-node-info", "ntasks-per-core", "ntasks-per-socket", "cpus-per-gpu", "gpus", "gpu-bind",
        "gpu-freq", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "mem-per-gpu", "open-mode",
        "mem-bind", "hint", "acctg-freq", "network", "kill-on-invalid-dep", "wrap", "batch",
        "ntasks-per-gpu", "prefer", "burst-buffer",
    ), "req"),
    **dict.fromkeys(("export", "nice", "propagate", "get-user-env", "exclusive"), "opt"),
    **dict.fromkeys((
        "hold", "ignore-pbs", "no-kill", "no-requeue", "overcommit", "parsable", "quiet", "reboot",
        "oversubscribe", "spread-job", "use-min-nodes", "verbose", "wait", "contiguous", "test-only", "requeue",
    ), "no"),
}
SBATCH_SHORT_VALUE = frozenset("aAbcdDeiJLMmnNopqStwxGFCB")
SBATCH_SHORT_FLAG = frozenset("HkOQsvW")
SHORT_TO_LONG = {"a": "array", "b": "begin", "d": "dependency", "G": "gpus", "M": "clusters", "N": "nodes",
                  "n": "ntasks", "p": "partition", "w": "nodelist", "F": "nodefile", "H": "hold", "J": "job-name"}

_NODE_REASON = "tesserae chooses the nodes"
_PER_GPU = "Slurm sees no GPUs in a tesserae job (the daemon assigns them)"
# Options that would take a decision away from the daemon or break its protocol, and why. GPU and
# node counts are not here: gpus.py translates them.
REFUSED: dict[str, str] = {
    "gpus-per-socket": "tesserae chooses the GPUs: use -G/--gpus or --gpus-per-node",
    "ntasks-per-gpu": f"{_PER_GPU}: use -n/--ntasks",
    "mem-per-gpu": f"{_PER_GPU}: use --mem",
    "cpus-per-gpu": f"{_PER_GPU}: use -c/--cpus-per-task",
    "nodelist": _NODE_REASON, "nodefile": _NODE_REASON, "exclusive": _NODE_REASON, "batch": _NODE_REASON,
    "no-requeue": "preemption requeues the job: it must stay requeueable",
    "comment": "the job's Comment carries its tesserae metadata",
    "signal": "tesserae sends the checkpoint signal (configured by the admin, preemption.signal)",
    "array": "submit one job per tsbatch call",
    "dependency": "tesserae decides when jobs start; dependencies are not supported",
    "begin": "tesserae decides when jobs start",
    "clusters": "tsbatch submits to the local cluster's managed partition",
}


@dataclass(frozen=True)
class Submission:
    """What tsbatch will submit: metadata, the user's sbatch options, and the script with its args."""

    meta: JobMeta
    sbatch_args: tuple[str, ...]  # the user's own sbatch options, verbatim, less the translated ones
    script: tuple[str, ...]  # (path, args...) or () with --wrap in sbatch_args
    nodes: int = 1
    parsable: bool = False
    dry_run: bool = False
    config: str | None = None
    script_text: str | None = None  # the script to submit instead of script[0]: its header lost GPU options
    gpus_from: str = ""  # the options the GPU count was translated from ("" for the default 1)


# ---- parsing ---------------------------------------------------------------------------------

_OWN_VALUE = {"--model", "--batch-size", "--parallelism", "--config", "--cluster"}
_OWN_FLAG = {"--no-pack", "--no-profile", "--parsable", "--dry-run", "--help", "--list-models"}


def parse_argv(argv: Sequence[str]) -> tuple[dict[str, str | bool], list[str], list[str]]:
    """Split argv into tsbatch's options, sbatch options (verbatim tokens) and the script argv."""
    own: dict[str, str | bool] = {}
    sbatch: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        tok = args[i]
        if tok == "--":
            return own, sbatch, args[i + 1:]
        if not tok.startswith("-") or tok == "-":
            return own, sbatch, args[i:]
        name, eq, value = tok.partition("=")
        if tok == "-h":
            name = "--help"
        if name in _OWN_VALUE:
            if not eq:
                if i + 1 >= len(args):
                    raise InputError(f"option {name} needs a value")
                i += 1
                value = args[i]
            if name in own:
                raise InputError(f"option {name} given twice")
            own[name] = value
        elif name in _OWN_FLAG:
            if eq:
                raise InputError(f"option {name} takes no value")
            own[name] = True
        elif tok.startswith("--"):
            i = _long_sbatch(args, i, sbatch)
        else:
            i = _short_sbatch(args, i, sbatch)
        i += 1
    return own, sbatch, []


def _long_sbatch(args: list[str], i: int, out: list[str]) -> int:
    tok = args[i]
    name, eq, _ = tok[2:].partition("=")
    kind = SBATCH_LONG.get(name)
    if kind is None:
        raise InputError(f"unknown option --{name} (tsbatch options: --model --batch-size --parallelism --no-pack "
                         "--no-profile --parsable --dry-run --cluster --config --list-models; other options are "
                         "sbatch's, see tsbatch --help)")
    if kind == "no" and eq:
        raise InputError(f"sbatch option --{name} takes no value")
    out.append(tok)
    if kind == "req" and not eq:
        if i + 1 >= len(args):
            raise InputError(f"sbatch option --{name} needs a value")
        out.append(args[i + 1])
        return i + 1
    return i


def _short_sbatch(args: list[str], i: int, out: list[str]) -> int:
    tok = args[i]
    letter = tok[1:2]
    if letter in SBATCH_SHORT_VALUE:
        out.append(tok)
        if len(tok) == 2:
            if i + 1 >= len(args):
                raise InputError(f"sbatch option -{letter} needs a value")
            out.append(args[i + 1])
            return i + 1
        return i
    if all(c in SBATCH_SHORT_FLAG for c in tok[1:]):
        out.append(tok)
        return i
    raise InputError(f"unknown option {tok} (see sbatch --help; tsbatch's own options are long options)")


def given_options(tokens: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """(long name, value, first token, last token) of each sbatch option in an already split token list."""
    out: list[tuple[str, str, int, int]] = []
    i = 0
    while i < len(tokens):
        tok, first = tokens[i], i
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if SBATCH_LONG.get(name) == "req" and not eq:
                i += 1
                value = tokens[i] if i < len(tokens) else ""
            out.append((name, value, first, i))
        elif tok.startswith("-"):
            letter = tok[1:2]
            if letter in SBATCH_SHORT_VALUE:
                value = tok[2:]
                if not value:
                    i += 1
                    value = tokens[i] if i < len(tokens) else ""
                out.append((SHORT_TO_LONG.get(letter, letter), value, first, i))
            else:
                out.extend((SHORT_TO_LONG.get(c, c), "", first, i) for c in tok[1:])
        i += 1
    return out


def check_sbatch_options(tokens: Sequence[str], partition: str, where: str = "command line") -> None:
    for name, value, _, _ in given_options(tokens):
        if name == "partition":
            if value != partition:
                raise InputError(f"{where}: --partition={value}: tsbatch submits to the managed partition "
                                 f"{partition!r}; use sbatch for other partitions")
            continue
        if name == "open-mode" and value != "append":
            raise InputError(f"{where}: --open-mode={value}: a requeued job must append to its output")
        reason = REFUSED.get(name)
        if reason:
            raise InputError(f"{where}: sbatch option --{name} is not allowed under tesserae: {reason}")


def script_directives(text: str) -> list[str]:
    """Tokens of the `#SBATCH` lines sbatch reads: those before the first command of the script."""
    return [t.text for t in header_tokens(text)]


def _given(tokens: Sequence[str], where: str) -> list[GivenOption]:
    return [GivenOption(name, value, " ".join(tokens[a:b + 1]), where)
            for name, value, a, b in given_options(tokens)]


# ---- validation ------------------------------------------------------------------------------


def build_meta(own: dict[str, str | bool], n: int, shape: PartitionShape, profile: ThroughputProfile,
               gpus_from: str = "") -> JobMeta:
    """The command line's metadata for ``n`` GPUs (translated from ``gpus_from``), checked by the job rules
    the daemon applies to every job (``site/job_rules.py``)."""
    model = str(own.get("--model", "")).strip()
    batch = str(own.get("--batch-size", "")).strip()
    no_profile = bool(own.get("--no-profile"))
    raw_par = own.get("--parallelism")
    if no_profile and (model or batch or raw_par):
        raise InputError("--no-profile runs the job without a throughput profile: drop --model, "
                         "--batch-size and --parallelism")
    if not no_profile and not model:
        known = [m for m in profile.models() if m != UNPROFILED]
        raise InputError(f"--model is required (one of: {', '.join(known)}), "
                         "or --no-profile for a job that is scheduled alone and never packed")
    parallelism: tuple[str, ...] = ()
    if raw_par is not None:
        parallelism = tuple(s.strip() for s in str(raw_par).split(";"))
    meta = JobMeta(n, model, batch, parallelism, no_pack=bool(own.get("--no-pack")), no_profile=no_profile)
    try:
        check_meta(meta, shape, profile)
    except InputError as exc:  # name the options the user wrote, not the metadata's field
        prefix = f"--gpus {n}: "
        if gpus_from and str(exc).startswith(prefix):
            raise InputError(f"{gpus_from}: {n} GPUs: {str(exc)[len(prefix):]}") from None
        raise
    return meta


def check_command_line(own: dict[str, str | bool], sbatch: Sequence[str], script: Sequence[str],
                       partition: str) -> None:
    """What can be refused from the command line alone, before reading the script or asking Slurm."""
    check_sbatch_options(sbatch, partition)
    wrap = any(name == "wrap" for name, _, _, _ in given_options(sbatch))
    if wrap and script:
        raise InputError("give either --wrap or a script, not both")
    if not wrap and not script:
        raise InputError("missing batch script (usage: tsbatch [-G N] [--model M ...] [sbatch options] "
                         "script.sh [args])")


def make_submission(own: dict[str, str | bool], sbatch: Sequence[str], script: Sequence[str], partition: str,
                    script_text: str | None, shape: PartitionShape, profile: ThroughputProfile) -> Submission:
    """Validate the whole request; ``script_text`` is the script's content (None with --wrap).

    GPU and node options, on the command line or in the header, become the metadata's GPU count and
    the job's node count (gpus.py) and are left out of what Slurm sees."""
    check_command_line(own, sbatch, script, partition)
    if not shape.node_gpus:
        raise InputError(f"partition {partition!r} has no schedulable nodes with GPUs")
    where = f"{script[0]} #SBATCH" if script else ""
    header = header_tokens(script_text) if script_text is not None else []
    header_args = [t.text for t in header]
    check_sbatch_options(header_args, partition, where=where)
    request = translate(merge(_given(header_args, where), _given(sbatch, "")), shape, partition)
    meta = build_meta(own, request.num_gpus, shape, profile, request.origin)
    drop = {i for name, _, a, b in given_options(sbatch) if name in TRANSLATED for i in range(a, b + 1)}
    header_drop = [header[i] for name, _, a, b in given_options(header_args) if name in TRANSLATED
                   for i in range(a, b + 1)]
    return Submission(meta, tuple(t for i, t in enumerate(sbatch) if i not in drop), tuple(script),
                      nodes=request.nodes, parsable=bool(own.get("--parsable")), dry_run=bool(own.get("--dry-run")),
                      config=str(own["--config"]) if "--config" in own else None,
                      script_text=without(script_text, header_drop) if script_text and header_drop else None,
                      gpus_from=request.origin)


def sbatch_args(sub: Submission, partition: str, signal: str, grace_s: float) -> list[str]:
    """The full option list tsbatch hands to sbatch (before the user's own options)."""
    return [
        f"--partition={partition}", "--hold", "--requeue", "--open-mode=append",
        f"--signal=B:{signal}@{max(1, int(round(grace_s)))}", f"--comment={sub.meta.encode()}",
        f"--nodes={sub.nodes}", *sub.sbatch_args,
    ]
