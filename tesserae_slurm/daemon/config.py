"""Daemon configuration: YAML on disk, validated into frozen dataclasses with one-line errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..model import InputError


@dataclass(frozen=True)
class SlurmSection:
    partition: str = "tesserae"  # the managed partition; the daemon is its only GPU arbiter
    backend: str = "auto"  # auto | cli | pyslurm
    command_timeout_s: float = 10.0
    retries: int = 2
    bin_dir: str = ""  # directory of squeue/scontrol/...; "" = PATH


@dataclass(frozen=True)
class SchedulerSection:
    policy: str = "tesserae-t"  # a named configuration (tesserae simulate --policy ...)
    round_seconds: float = 360.0
    profile: str = "a100"  # a100 | gavel | path to a profile CSV/JSON
    gpu_type: str = "a100"  # GPU type of every node unless node_gpu_types says otherwise
    node_gpu_types: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreemptionSection:
    signal: str = "USR1"  # sent to the batch shell (tsbatch submits with --signal=B:USR1@grace)
    grace_seconds: float = 90.0  # time to checkpoint before requeue-hold


@dataclass(frozen=True)
class MpsSection:
    thread_percentage: int = 50  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for each job of a packed pair


@dataclass(frozen=True)
class StateSection:
    database: str = "/var/lib/tesserae/state.db"


@dataclass(frozen=True)
class MetricsSection:
    listen: str = "127.0.0.1:9478"  # Prometheus /metrics; "" disables


@dataclass(frozen=True)
class DaemonConfig:
    slurm: SlurmSection = SlurmSection()
    scheduler: SchedulerSection = SchedulerSection()
    preemption: PreemptionSection = PreemptionSection()
    mps: MpsSection = MpsSection()
    state: StateSection = StateSection()
    metrics: MetricsSection = MetricsSection()
    log_level: str = "INFO"


_SECTIONS = {f.name: f.type for f in fields(DaemonConfig)}
_SECTION_CLASSES = {"slurm": SlurmSection, "scheduler": SchedulerSection, "preemption": PreemptionSection,
                    "mps": MpsSection, "state": StateSection, "metrics": MetricsSection}


def _coerce(section: str, key: str, value: Any, default: Any, where: str) -> Any:
    name = f"{where}: {section}.{key}"
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise InputError(f"{name} must be true or false, got {value!r}")
        return value
    if isinstance(default, int) and not isinstance(default, bool):
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputError(f"{name} must be an integer, got {value!r}")
        return value
    if isinstance(default, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InputError(f"{name} must be a number, got {value!r}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise InputError(f"{name} must be a string, got {value!r}")
        return value
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise InputError(f"{name} must be a mapping of strings")
        return dict(value)
    return value


def config_from_mapping(raw: Any, where: str = "config") -> DaemonConfig:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected a mapping at the top level")
    unknown = set(raw) - set(_SECTIONS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(_SECTIONS)}")
    kwargs: dict[str, Any] = {}
    for section, cls in _SECTION_CLASSES.items():
        body = raw.get(section) or {}
        if not isinstance(body, Mapping):
            raise InputError(f"{where}: {section} must be a mapping")
        valid = {f.name: f for f in fields(cls)}
        bad = set(body) - set(valid)
        if bad:
            raise InputError(f"{where}: unknown key(s) {section}.{', '.join(sorted(bad))}; valid: {', '.join(valid)}")
        defaults = cls()
        kwargs[section] = cls(**{k: _coerce(section, k, v, getattr(defaults, k), where) for k, v in body.items()})
    if "log_level" in raw:
        kwargs["log_level"] = _coerce("", "log_level", raw["log_level"], "", where)
    cfg = DaemonConfig(**kwargs)
    _validate(cfg, where)
    return cfg


def _validate(cfg: DaemonConfig, where: str) -> None:
    from ..sim.configs import CONFIGS  # a name must exist before the daemon starts
    if cfg.scheduler.policy not in CONFIGS:
        raise InputError(f"{where}: scheduler.policy {cfg.scheduler.policy!r} unknown; known: {', '.join(CONFIGS)}")
    if cfg.scheduler.round_seconds <= 0:
        raise InputError(f"{where}: scheduler.round_seconds must be > 0")
    if cfg.slurm.backend not in ("auto", "cli", "pyslurm"):
        raise InputError(f"{where}: slurm.backend must be auto, cli or pyslurm")
    if cfg.slurm.command_timeout_s <= 0 or cfg.slurm.retries < 0:
        raise InputError(f"{where}: slurm.command_timeout_s must be > 0 and slurm.retries >= 0")
    if cfg.preemption.grace_seconds < 0:
        raise InputError(f"{where}: preemption.grace_seconds must be >= 0")
    if not 0 < cfg.mps.thread_percentage <= 100:
        raise InputError(f"{where}: mps.thread_percentage must be in 1..100")
    if cfg.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise InputError(f"{where}: log_level must be DEBUG, INFO, WARNING or ERROR")
    if cfg.metrics.listen:
        host, _, port = cfg.metrics.listen.rpartition(":")
        if not host or not port.isdigit():
            raise InputError(f"{where}: metrics.listen must be HOST:PORT or empty, got {cfg.metrics.listen!r}")


def load_config(path: str | Path) -> DaemonConfig:
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"{p}: cannot read config ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{p}: malformed YAML{at}: {getattr(exc, 'problem', exc)}") from None
    return config_from_mapping(raw, str(p))
