"""The site's configuration (``/etc/tesserae/tesserae.yaml``) as frozen dataclasses, with one-line errors.

What the daemon, tsbatch, the admin commands and the page share: the managed partition, the policy and
profile, preemption, MPS, the state database's path, limits. This module checks every value it can
alone; ``scheduler.py`` checks the named configuration and the profile, ``load.py`` reads the file.
Every key is described in etc/tesserae.yaml, the shipped file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..model import InputError
from ..model.gpu_limits import GpuLimits, limits_from


@dataclass(frozen=True)
class SlurmSection:
    partition: str = "tesserae"  # the managed partition; the daemon is its only GPU arbiter
    # auto | cli | pyslurm; auto takes pyslurm only when it imports and matches `sinfo --version`
    # (docs/slurm-versions.md says what each is tested against)
    backend: str = "auto"
    command_timeout_s: float = 10.0
    retries: int = 2
    bin_dir: str = ""  # directory of squeue/scontrol/...; "" = PATH
    start_timeout_s: float = 120.0  # a released job Slurm has not started by then is held back again
    guard_seconds: float = 5.0  # between rounds: stop hand-started jobs, admin-hold new ones; 0 = rounds only
    # between rounds: list the partition's jobs this often (one cheap squeue); a new job or one gone starts
    # what fits free GPUs now (round/start_between.py); 0 = jobs start only at rounds
    poll_seconds: float = 1.0
    # how many started jobs' `scontrol update` (its node list and assignment) are in flight at once; the
    # release that follows is one call for all of them (round/stop_start.py); 1 = one after another
    parallel_starts: int = 8


@dataclass(frozen=True)
class SchedulerSection:
    # a named configuration (tesserae simulate --policy ...); the default is the one that led on the real
    # runs and across the simulator's suites (docs/results.md, sections 9 and 11)
    policy: str = "tesserae-t-fair"
    round_seconds: float = 360.0
    profile: str = "a100"  # a100 | gavel | path to a profile CSV/JSON
    gpu_type: str = "a100"  # GPU type of every node unless node_gpu_types says otherwise
    node_gpu_types: Mapping[str, str] = field(default_factory=dict)
    policy_options: Mapping[str, Any] = field(default_factory=dict)  # over the named configuration's own
    seed: int = 0  # for randomized policies (POP's partitions), as `tesserae simulate --seed`


@dataclass(frozen=True)
class PackingSection:
    # a pair is formed only if each member keeps this normalized speed (0 = the named configuration's own,
    # which is 0 for every shipped one: any pair that raises throughput); placement/pack.py
    min_speed: float = 0.0
    # form pairs whose normalized speeds sum below 1.0 (off: such a pair delivers less than either job
    # alone at its best; EngineConfig.pairs_below_one)
    pairs_below_one: bool = False


@dataclass(frozen=True)
class PreemptionSection:
    signal: str = "USR1"  # sent to the batch shell (tsbatch submits with --signal=B:USR1@grace)
    grace_seconds: float = 90.0  # time to checkpoint before requeue-hold
    # shared directory (mode 1777) where a stopped job's launcher records that its payload checkpointed and
    # exited: the daemon then requeue-holds it at once instead of waiting out the grace; "" = always the grace
    stop_records_dir: str = ""


@dataclass(frozen=True)
class MpsSection:
    thread_percentage: int = 50  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for each job of a packed pair
    # pairs of two users' jobs: their MPS servers time-slice the GPU instead of sharing it
    # (timeslice: score such pairs with the profile's time-sliced speeds, so only those that gain are
    # formed; never: pack only jobs of one user)
    cross_user: str = "timeslice"


@dataclass(frozen=True)
class StateSection:
    database: str = "/var/lib/tesserae/state.db"
    # each round's decision inputs (the engine's RoundRequest) in its decision JSON, for a replay
    # (`tesserae plan --request`); off by default: at scale they are megabytes a round
    record_inputs: bool = False


@dataclass(frozen=True)
class MovesSection:
    """What moving or preempting a job costs here: the engine moves or preempts one only when what that
    buys exceeds this (docs/daemon.md, "Moves that pay for themselves")."""

    enabled: bool = True  # false: every move free, as the paper's plan (named configurations that pay)
    restart_s: float = 30.0  # a job's restart: checkpoint load and warm-up
    restart_per_model: Mapping[str, float] = field(default_factory=lambda: {"Bert-Large": 90.0,
                                                                           "GPT2-Medium": 90.0})
    requeue_s: float = 5.0  # Slurm's requeue-hold and the relaunch gap, besides preemption.grace_seconds
    horizon_s: float = 0.0  # how far ahead a gain counts for a job of unknown length; 0: three rounds
    recent_rounds: int = 3  # a job moved within this many rounds costs one more move per move (hysteresis)


@dataclass(frozen=True)
class MetricsSection:
    listen: str = "127.0.0.1:9478"  # Prometheus /metrics; "" disables


@dataclass(frozen=True)
class HttpSection:
    """The read-only web page and JSON API (daemon/operators/web.py): any user who can reach it may read it."""

    listen: str = "127.0.0.1:9479"  # HOST:PORT; "" disables; port 0 picks a free one (logged)


@dataclass(frozen=True)
class FeedbackSection:
    """Online feedback (docs/profiling.md): jobs report measured steps/s, folded into the table."""

    reports_dir: str = ""  # shared sticky directory (mode 1777) jobs append reports to; "" = off
    report_every_s: float = 60.0  # window a job measures over; shorter windows (< half) are refused
    alpha: float = 0.3  # EWMA weight of the newest report
    min_reports: int = 3  # reports of a situation before its measured speed replaces the table's
    max_speed: float = 1.0  # normalized speeds derived from reports are clamped to [0, max_speed]

    @property
    def enabled(self) -> bool:
        return bool(self.reports_dir)


@dataclass(frozen=True)
class RetentionSection:
    """History pruned between rounds (daemon/state/retention.py); 0 = keep (the default: nothing pruned)."""

    rounds_days: float = 0.0  # rounds (with their placements, actions, Slurm calls, events) older than this
    max_rounds: int = 0  # ... or beyond the newest N rounds
    jobs_days: float = 0.0  # job rows whose jobs ended more than this long ago
    batch: int = 200  # rounds (or jobs) deleted per transaction: readers and the next round wait at most one
    budget_s: float = 1.0  # most seconds spent pruning in one pause between rounds


@dataclass(frozen=True)
class AdminSection:
    """Who may act through `tesserae hold|release|requeue|cancel|drain|resume` (docs/daemon.md)."""

    operators: tuple[str, ...] = ()  # Unix user names, besides root and the daemon's own user
    requests_dir: str = ""  # where those commands leave requests for the daemon; "" = <state dir>/requests


@dataclass(frozen=True)
class SiteConfig:
    slurm: SlurmSection = SlurmSection()
    scheduler: SchedulerSection = SchedulerSection()
    packing: PackingSection = PackingSection()
    preemption: PreemptionSection = PreemptionSection()
    mps: MpsSection = MpsSection()
    state: StateSection = StateSection()
    metrics: MetricsSection = MetricsSection()
    http: HttpSection = HttpSection()
    feedback: FeedbackSection = FeedbackSection()
    retention: RetentionSection = RetentionSection()
    admin: AdminSection = AdminSection()
    moves: MovesSection = MovesSection()
    limits: GpuLimits | None = None  # per-user/account GPU limits for every policy (model/limits.py)
    log_level: str = "INFO"


_SECTIONS = {f.name: f.type for f in fields(SiteConfig)}
_SECTION_CLASSES = {"slurm": SlurmSection, "scheduler": SchedulerSection, "packing": PackingSection,
                    "preemption": PreemptionSection,
                    "mps": MpsSection, "state": StateSection, "metrics": MetricsSection,
                    "http": HttpSection, "feedback": FeedbackSection, "retention": RetentionSection,
                    "admin": AdminSection, "moves": MovesSection}


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
    if key == "operators":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise InputError(f"{name} must be a list of user names")
        return tuple(value)
    if key == "restart_per_model":
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, (int, float))
                                                     and not isinstance(v, bool) for k, v in value.items()):
            raise InputError(f"{name} must map model names to seconds")
        return {k: float(v) for k, v in value.items()}
    if key == "policy_options":
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise InputError(f"{name} must be a mapping of option names to values")
        return dict(value)
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in value.items()):
            raise InputError(f"{name} must be a mapping of strings")
        return dict(value)
    return value


def parse_config(raw: Any, where: str = "config") -> SiteConfig:
    """The configuration from its YAML document, every value checked except the named configuration
    and the profile (``scheduler.check_scheduler``: they load the engine and a profile)."""
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
    kwargs["limits"] = limits_from(raw.get("limits"), where)
    if kwargs.get("feedback") is not None and kwargs["feedback"].reports_dir.startswith("~"):
        import dataclasses
        fb = kwargs["feedback"]
        kwargs["feedback"] = dataclasses.replace(fb, reports_dir=str(Path(fb.reports_dir).expanduser()))
    if kwargs.get("preemption") is not None and kwargs["preemption"].stop_records_dir.startswith("~"):
        import dataclasses
        pre = kwargs["preemption"]
        kwargs["preemption"] = dataclasses.replace(pre, stop_records_dir=str(Path(pre.stop_records_dir).expanduser()))
    cfg = SiteConfig(**kwargs)
    _validate(cfg, where)
    return cfg


def _validate(cfg: SiteConfig, where: str) -> None:
    if not cfg.slurm.partition or any(c.isspace() or c == "," for c in cfg.slurm.partition):
        raise InputError(f"{where}: slurm.partition must be one partition name, got {cfg.slurm.partition!r}")
    _validate_values(cfg, where)


def _validate_values(cfg: SiteConfig, where: str) -> None:
    if cfg.scheduler.round_seconds <= 0:
        raise InputError(f"{where}: scheduler.round_seconds must be > 0")
    if not 0.0 <= cfg.packing.min_speed <= 1.0:
        raise InputError(f"{where}: packing.min_speed must be in [0, 1] (a normalized speed)")
    if cfg.slurm.backend not in ("auto", "cli", "pyslurm"):
        raise InputError(f"{where}: slurm.backend must be auto, cli or pyslurm")
    if cfg.slurm.command_timeout_s <= 0 or cfg.slurm.retries < 0:
        raise InputError(f"{where}: slurm.command_timeout_s must be > 0 and slurm.retries >= 0")
    from ..slurm.commands import signal_name
    try:
        signal_name(cfg.preemption.signal)
    except InputError as exc:
        raise InputError(f"{where}: preemption.signal: {exc}") from None
    if cfg.slurm.guard_seconds < 0:
        raise InputError(f"{where}: slurm.guard_seconds must be >= 0")
    if cfg.slurm.poll_seconds < 0:
        raise InputError(f"{where}: slurm.poll_seconds must be >= 0 (0 = jobs start only at rounds)")
    if cfg.slurm.parallel_starts < 1:
        raise InputError(f"{where}: slurm.parallel_starts must be an integer >= 1 (1 = one start at a time)")
    if cfg.slurm.start_timeout_s <= 0:
        raise InputError(f"{where}: slurm.start_timeout_s must be > 0")
    if cfg.preemption.grace_seconds < 0:
        raise InputError(f"{where}: preemption.grace_seconds must be >= 0")
    if not 0 < cfg.mps.thread_percentage <= 100:
        raise InputError(f"{where}: mps.thread_percentage must be in 1..100")
    if cfg.mps.cross_user not in ("timeslice", "never"):
        raise InputError(f"{where}: mps.cross_user must be timeslice or never, got {cfg.mps.cross_user!r}")
    if cfg.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise InputError(f"{where}: log_level must be DEBUG, INFO, WARNING or ERROR")
    for name, listen in (("metrics.listen", cfg.metrics.listen), ("http.listen", cfg.http.listen)):
        if listen:
            host, _, port = listen.rpartition(":")
            if not host or not port.isdigit() or int(port) > 65535:
                raise InputError(f"{where}: {name} must be HOST:PORT (port 0-65535) or empty, got {listen!r}")
    if cfg.metrics.listen and cfg.metrics.listen == cfg.http.listen and not cfg.http.listen.endswith(":0"):
        raise InputError(f"{where}: http.listen and metrics.listen must differ, both are {cfg.http.listen!r}")
    _validate_feedback(cfg.feedback, where)
    _shared_dir(cfg.preemption.stop_records_dir, "preemption.stop_records_dir", where)
    m = cfg.moves
    if m.restart_s < 0 or m.requeue_s < 0 or m.horizon_s < 0 or any(v < 0 for v in m.restart_per_model.values()):
        raise InputError(f"{where}: moves.restart_s, restart_per_model, requeue_s and horizon_s must be >= 0")
    if m.recent_rounds < 0:
        raise InputError(f"{where}: moves.recent_rounds must be >= 0")
    r = cfg.retention
    if r.rounds_days < 0 or r.max_rounds < 0 or r.jobs_days < 0:
        raise InputError(f"{where}: retention.rounds_days, max_rounds and jobs_days must be >= 0 (0 = keep all)")
    if r.batch < 1 or not r.budget_s > 0:
        raise InputError(f"{where}: retention.batch must be >= 1 and retention.budget_s > 0")


def _shared_dir(path: str, name: str, where: str) -> None:
    """A directory jobs write to and the daemon reads: named in each job's AdminComment."""
    if path and not Path(path).is_absolute():
        raise InputError(f"{where}: {name} must be an absolute path (jobs on other hosts open it), got {path!r}")
    if any(c.isspace() or ord(c) < 32 for c in path):  # it travels in AdminComment, one token
        raise InputError(f"{where}: {name} must not contain whitespace")


def _validate_feedback(fb: FeedbackSection, where: str) -> None:
    _shared_dir(fb.reports_dir, "feedback.reports_dir", where)
    if not fb.report_every_s > 0:
        raise InputError(f"{where}: feedback.report_every_s must be > 0")
    if not 0.0 < fb.alpha <= 1.0:
        raise InputError(f"{where}: feedback.alpha must be in (0, 1]")
    if fb.min_reports < 1:
        raise InputError(f"{where}: feedback.min_reports must be >= 1")
    if not 0.0 < fb.max_speed <= 2.0:
        raise InputError(f"{where}: feedback.max_speed must be in (0, 2]")
