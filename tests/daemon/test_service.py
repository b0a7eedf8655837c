"""The daemon as a service, on the real dev cluster: Slurm outage, SIGHUP reload, SIGTERM, /metrics,
and shadow mode (--dry-run)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from .helpers import BIN, Env, progressed, submit_tick, wait_for


class Background:
    """`tesserae daemon` in the background, its stderr collected in a file."""

    def __init__(self, env: Env, *args: str) -> None:
        self.log = env.tmp / "daemon.log"
        self.fh = self.log.open("w")
        self.proc = subprocess.Popen([str(BIN / "tesserae"), "daemon", "--config", str(env.config), *args],
                                     env=env.os_env(), stdout=self.fh, stderr=subprocess.STDOUT, text=True)

    def text(self) -> str:
        return self.log.read_text()

    def wait_log(self, pattern: str, timeout: float = 60, after: int = 0) -> re.Match[str]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.text()[after:])
            if m:
                return m
            assert self.proc.poll() is None, f"daemon exited ({self.proc.returncode}):\n{self.text()[-3000:]}"
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} in the daemon log within {timeout}s:\n{self.text()[-3000:]}")

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.fh.close()


@pytest.mark.every_release  # the controller outage, on each release
def test_slurmctld_outage_skips_rounds_without_action_and_recovers(env: Env) -> None:
    env.write_config(scheduler={"round_seconds": 1}, slurm={"command_timeout_s": 3, "retries": 0})
    jobs = [submit_tick(env, 2, 3000, name=f"o{i}", step_time=0.05) for i in range(2)]
    daemon = Background(env)
    try:
        wait_for(lambda: all(progressed(env, j, 10) for j in jobs), 60, "the jobs to run")
        env.cluster.stop_controller()
        try:
            mark = len(daemon.text())
            daemon.wait_log(r"round \d+ skipped: Slurm unavailable", timeout=60, after=mark)
            daemon.wait_log(r"round \d+ skipped: Slurm unavailable", timeout=60,
                            after=mark + daemon.text()[mark:].index("skipped") + 1)  # a second one: it keeps going
        finally:
            env.cluster.start_controller()
        mark = len(daemon.text())
        daemon.wait_log(r"round \d+ applied", timeout=60, after=mark)
    finally:
        assert daemon.stop() == 0, daemon.text()[-2000:]
    store = env.store()
    skipped = [r for r in store.rounds(limit=1000) if r.status == "skipped"]
    assert len(skipped) >= 2 and all("Slurm unavailable" in r.error for r in skipped)
    for r in skipped:
        assert store.actions(round_id=r.round_id) == [] and store.slurm_calls(round_id=r.round_id) == []
    # the running jobs were not touched by the outage: each started once and is still running
    rows = {r.job_id: r for r in store.jobs()}
    for j in jobs:
        assert rows[j].state == "RUNNING" and [e["event"] for e in env.events(j)].count("start") == 1
    assert any(e.kind == "round-skipped" for e in store.events(limit=1000))


def test_sighup_reloads_bad_config_is_kept_out_sigterm_stops_and_metrics_serve(env: Env) -> None:
    env.write_config(scheduler={"round_seconds": 1}, metrics={"listen": "127.0.0.1:0"})
    daemon = Background(env)
    try:
        port = int(daemon.wait_log(r"metrics on http://127\.0\.0\.1:(\d+)/metrics").group(1))
        daemon.wait_log(r"round \d+ applied")
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert re.search(r'^tesserae_rounds_total\{status="applied"\} [1-9]', body, re.M), body
        for family in ("tesserae_decision_seconds_count", "tesserae_jobs", "tesserae_packed_pairs",
                       "tesserae_migrations_total", "tesserae_slurm_call_errors_total"):
            assert family in body
        env.write_config(scheduler={"round_seconds": 1, "policy": "fifo", "policy_options": {}},
                         metrics={"listen": "127.0.0.1:0"})
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_log(r"configuration reloaded \(policy fifo")
        mark = len(daemon.text())
        Path(env.config).write_text("scheduler: {round_seconds: -5}\n")
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_log(r"configuration not reloaded, keeping the running one: .*round_seconds must be > 0", after=mark)
        daemon.wait_log(r"round \d+ applied", after=mark)  # still scheduling, with the old configuration
        assert daemon.proc.poll() is None
    finally:
        code = daemon.stop()
    assert code == 0, daemon.text()[-2000:]
    assert "stopping after the current action" in daemon.text()
    assert env.store().rounds(limit=1)[0].policy == "fifo"


def test_dry_run_records_decisions_and_sends_nothing(env: Env) -> None:
    jobs = [submit_tick(env, 4, 100, name=f"s{i}") for i in range(3)]
    proc = env.daemon_cli("--once", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    store = env.store()
    (rnd,) = store.rounds()
    assert rnd.dry_run and rnd.status == "dry-run" and rnd.started == 2 and rnd.pending == 1
    assert {a.status for a in store.actions(round_id=rnd.round_id)} == {"skipped"}
    assert store.slurm_calls() == []
    slurm = env.squeue()
    assert all(slurm[j]["state"] == "PENDING" and slurm[j]["reason"] == "JobHeldUser" for j in jobs)
    assert all(slurm[j]["admin_comment"] == "" for j in jobs)
    # the next shadow round keeps the imagined placement: nothing moves, nothing is recorded as sent
    proc = env.daemon_cli("--once", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    second = env.store().rounds(limit=1)[0]
    assert second.kept == 2 and second.started == 0 and env.store().slurm_calls() == []
