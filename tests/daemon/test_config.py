"""Daemon configuration: the shipped file documents every key with its default; broken files fail with
one clear line (and the daemon and tsbatch do nothing)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from tesserae_slurm.cli import tsbatch as tsbatch_cli
from tesserae_slurm.cli.main import main
from tesserae_slurm.site.config import SiteConfig
from tesserae_slurm.site.load import config_from_mapping, load_config
from tesserae_slurm.model import InputError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "etc" / "tesserae.yaml"


def test_shipped_config_documents_every_key_with_its_default():
    assert load_config(SHIPPED) == SiteConfig()
    raw = yaml.safe_load(SHIPPED.read_text())
    for section in fields(SiteConfig):
        if section.name == "log_level":
            assert "log_level" in raw
            continue
        if section.name == "limits":  # none by default: the shipped file names every key, limiting nothing
            assert set(raw["limits"]) == {"users", "accounts", "default_user", "default_account"}
            continue
        documented = set(raw[section.name])
        assert documented == {f.name for f in fields(getattr(SiteConfig(), section.name))}, section.name


def test_overrides_and_policy_options():
    cfg = config_from_mapping({"scheduler": {"policy": "tiresias", "round_seconds": 60,
                                             "policy_options": {"queue_limits": [100, 200]}},
                               "preemption": {"grace_seconds": 5}})
    assert cfg.scheduler.round_seconds == 60.0 and cfg.scheduler.policy_options == {"queue_limits": [100, 200]}
    assert cfg.preemption.grace_seconds == 5.0
    assert not cfg.feedback.enabled  # online feedback is off until a reports directory is configured
    fb = config_from_mapping({"feedback": {"reports_dir": "~/reports", "alpha": 1}}).feedback
    assert fb.enabled and fb.reports_dir == str(Path("~/reports").expanduser()) and fb.alpha == 1.0


def test_packing_min_speed_goes_over_the_named_configuration():
    from tesserae_slurm.site.scheduler import engine_config

    assert engine_config(config_from_mapping({})).min_speed == 0.0
    cfg = config_from_mapping({"scheduler": {"policy": "tesserae-t-sticky"}, "packing": {"min_speed": 0.5}})
    engine = engine_config(cfg)
    assert engine.min_speed == 0.5 and engine.placement == "sticky"  # the rest stays the named configuration's


BROKEN = [
    ("packing: {min_speed: 1.5}\n", "packing.min_speed must be in [0, 1]"),
    ("scheduler: [1, 2\n", "malformed YAML at line"),
    ("[1, 2]\n", "expected a mapping at the top level"),
    ("schedulr: {}\n", "unknown key(s) schedulr"),
    ("scheduler: {rounds: 5}\n", "unknown key(s) scheduler.rounds"),
    ("scheduler: {round_seconds: soon}\n", "scheduler.round_seconds must be a number"),
    ("scheduler: {round_seconds: 0}\n", "round_seconds must be > 0"),
    ("scheduler: {policy: magic}\n", "scheduler.policy 'magic' unknown"),
    ("scheduler: {policy: tiresias, policy_options: {queue_limits: [5, 1]}}\n",
     "queue_limits must be positive and increasing"),
    ("scheduler: {policy: fifo, policy_options: {speed: 2}}\n", "bad options"),
    ("slurm: {retries: 1.5}\n", "slurm.retries must be an integer"),
    ("slurm: {backend: rest}\n", "slurm.backend must be auto, cli or pyslurm"),
    ("slurm: {partition: 'a,b'}\n", "one partition name"),
    ("preemption: {signal: USR9}\n", "preemption.signal"),
    ("preemption: {grace_seconds: -1}\n", "grace_seconds must be >= 0"),
    ("mps: {thread_percentage: 150}\n", "thread_percentage must be in 1..100"),
    ("mps: {cross_user: sometimes}\n", "mps.cross_user must be timeslice or never"),
    ("metrics: {listen: localhost}\n", "metrics.listen must be HOST:PORT"),
    ("log_level: LOUD\n", "log_level must be"),
    ("state: {database: 5}\n", "state.database must be a string"),
    ("scheduler: {gpu_type: h100}\n", "GPU type(s) h100 not in profile a100"),
    ("scheduler: {profile: gavel}\n", "GPU type(s) a100 not in profile gavel"),
    ("scheduler: {profile: /no/such.csv}\n", "scheduler.profile: unknown profile"),
    ("feedback: {reports_dir: reports}\n", "feedback.reports_dir must be an absolute path"),
    ("feedback: {reports_dir: '/shared/my reports'}\n", "feedback.reports_dir must not contain whitespace"),
    ("preemption: {stop_records_dir: stops}\n", "preemption.stop_records_dir must be an absolute path"),
    ("preemption: {stop_records_dir: '/shared/my stops'}\n", "preemption.stop_records_dir must not contain whitespace"),
    ("slurm: {poll_seconds: -1}\n", "slurm.poll_seconds must be >= 0"),
    ("slurm: {parallel_starts: 0}\n", "slurm.parallel_starts must be an integer >= 1"),
    ("slurm: {parallel_starts: 2.5}\n", "slurm.parallel_starts must be an integer"),
    ("feedback: {alpha: 0}\n", "feedback.alpha must be in (0, 1]"),
    ("feedback: {min_reports: 0}\n", "feedback.min_reports must be >= 1"),
    ("feedback: {report_every_s: 0}\n", "feedback.report_every_s must be > 0"),
    ("feedback: {max_speed: 5}\n", "feedback.max_speed must be in (0, 2]"),
    ("feedback: {min_reports: 2.5}\n", "feedback.min_reports must be an integer"),
]


@pytest.mark.parametrize("text,message", BROKEN, ids=[m for _, m in BROKEN])
def test_broken_config_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=None) as exc:
        load_config(path)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert str(path) in str(exc.value)


def test_daemon_and_tsbatch_refuse_a_broken_config_before_doing_anything(tmp_path, capsys):
    db = tmp_path / "state.db"
    path = tmp_path / "t.yaml"
    path.write_text(f"state: {{database: {db}}}\nscheduler: {{round_seconds: -1}}\n")
    assert main(["daemon", "--config", str(path), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tesserae daemon: error: ") and "round_seconds" in err[0]
    assert not db.exists()
    assert main(["daemon", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read config" in capsys.readouterr().err
    assert tsbatch_cli.main(["--config", str(path), "--gpus", "1", "--no-profile", "x.sh"]) == 2
    assert capsys.readouterr().err.startswith("tsbatch: error: ")


def test_systemd_unit_runs_as_a_service_user_and_reloads_on_sighup():
    unit = (ROOT / "systemd" / "tesserae.service").read_text()
    settings = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert settings["User"] not in ("root", "0") and settings["Restart"] == "on-failure"
    assert settings["ExecStart"].endswith("tesserae daemon --config /etc/tesserae/tesserae.yaml")
    assert settings["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert settings["StateDirectory"] == "tesserae" and settings["ConfigurationDirectory"] == "tesserae"
    assert SiteConfig().state.database.startswith("/var/lib/tesserae/")
    # SIGTERM is heeded mid-grace; the worst case is two Slurm calls in flight that time out (docs/daemon.md)
    slurm = SiteConfig().slurm
    assert int(settings["TimeoutStopSec"]) > 2 * (slurm.command_timeout_s * (slurm.retries + 1) + 1.5) + 2
    # numba's cache (the fast extra) must be somewhere the unit lets the service write
    cache = settings["Environment"].removeprefix("NUMBA_CACHE_DIR=")
    assert cache.startswith(settings["ReadWritePaths"] + "/")


def test_the_site_move_costs_reach_the_engine():
    """A stop costs the restart, the grace period and the requeue; the horizon is three rounds unless set;
    ``moves.enabled: false`` is the paper's plan, and a configuration that stands for another system's
    rule keeps its own."""
    from tesserae_slurm.site.scheduler import engine_config

    cfg = config_from_mapping({"scheduler": {"round_seconds": 5}, "preemption": {"grace_seconds": 20},
                               "moves": {"restart_s": 12, "restart_per_model": {"GPT2-Medium": 40}, "requeue_s": 3}})
    m = engine_config(cfg).moves
    assert m is not None and (m.seconds("resnet50"), m.seconds("GPT2-Medium")) == (12 + 20 + 3, 40 + 20 + 3)
    assert m.horizon_s == 15 and m.recent_rounds == 3
    assert engine_config(config_from_mapping({"moves": {"horizon_s": 600}})).moves.horizon_s == 600
    assert engine_config(config_from_mapping({"moves": {"enabled": False}})).moves is None
    assert engine_config(config_from_mapping({"scheduler": {"policy": "tesserae-t-nomig"}})).moves is None
    with pytest.raises(InputError, match="moves.restart_per_model must map model names to seconds"):
        config_from_mapping({"moves": {"restart_per_model": {"GPT2-Medium": "slow"}}})
    with pytest.raises(InputError, match="moves.restart_s"):
        config_from_mapping({"moves": {"restart_s": -1}})
