"""The web page in a real headless browser (Debian's chromium) against `tesserae daemon` driving the dev
cluster: nodes x GPUs with a packed pair, running jobs, the queue with reasons; screenshots saved.

Set TESSERAE_SCREENSHOTS=DIR to keep the screenshots (docs/img/web.png is one of them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from .helpers import BIN, Env, submit_tick, wait_for

# Host lane only (not every_release): chromium is installed on the host only; the page reads the state database.
pytestmark = pytest.mark.slurm_live

SECRET = "S3CRET-ARGUMENT-never-shown"  # on a job's command line: it must not reach the API or the page
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1280,1000"]


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:  # ./dev test installs it (scripts/install-browser.sh)
        pytest.fail("chromium is not installed: run scripts/install-browser.sh (./dev test does)", pytrace=False)
    return path


def browse(url: str, *args: str, timeout: float = 60) -> str:
    """One headless chromium run on a fresh profile; waits for the page's first API answers (virtual time)."""
    with tempfile.TemporaryDirectory(prefix="tesserae-chromium-") as profile:
        proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               "--virtual-time-budget=4000", "--run-all-compositor-stages-before-draw", *args, url],
                              capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class DaemonProcess:
    """`tesserae daemon` as systemd runs it; learns the web port (http.listen port 0) from its log."""

    def __init__(self, env: Env) -> None:
        self.proc = subprocess.Popen([str(BIN / "tesserae"), "daemon", "--config", str(env.config)],
                                     env=env.os_env(), stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def url(self) -> str:
        found: list[str] = []

        def seen() -> bool:
            found.extend(m.group(1) for line in list(self.lines)
                         if (m := re.search(r"web page and API on (http://\S+/)", line)))
            assert self.proc.poll() is None, "".join(self.lines)
            return bool(found)

        wait_for(seen, 30, "the daemon to log its web address", every=0.2)
        return found[0]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def api(url: str, path: str) -> dict:
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as r:
        return json.loads(r.read())


def test_page_in_headless_chromium(env: Env, tmp_path: Path) -> None:
    chromium()
    # Tiresias' own queue limits (not the tests' 1 GPU-second): arrival order, no churn while we look
    env.write_config(http={"listen": "127.0.0.1:0"}, scheduler={"round_seconds": 1, "policy_options": {}})
    small = [submit_tick(env, 1, 600, SECRET, name=f"dcgan{i}", model="DCGAN", batch="32") for i in range(9)]
    big = submit_tick(env, 8, 20, name="big8")
    daemon = DaemonProcess(env)
    try:
        url = daemon.url()

        def settled() -> bool:
            c, j = api(url, "/api/cluster"), api(url, "/api/jobs")
            states = {r["job_id"]: r["state"] for r in j["jobs"]}
            return bool(c["packed"]) and sum(states.get(s) == "RUNNING" for s in small) >= 7 \
                and states.get(big) == "PENDING" and bool(next(r for r in j["jobs"] if r["job_id"] == big)["reason"])

        wait_for(settled, 40, "9 small jobs placed with a packed pair, the 8-GPU job pending", every=0.5)
        cluster, jobs = api(url, "/api/cluster"), api(url, "/api/jobs")
        cli = [subprocess.run([str(BIN / "tesserae"), *argv, "--api", url], env=env.os_env(), capture_output=True,
                              text=True, timeout=60, check=False) for argv in (["jobs"], ["explain", big])]
        dom = browse(url + "?every=1", "--dump-dom")
        shots = tmp_path / "shots"
        shots.mkdir()
        browse(url, f"--screenshot={shots / 'web.png'}")
    finally:
        daemon.stop()

    # the placement map: every node, every GPU, the pair as a+b
    for node in cluster["nodes"]:
        assert f'data-node="{node["name"]}"' in dom
        for i in range(len(node["gpus"])):
            assert f'data-gpu="{node["name"]}:{i}"' in dom
    pair = cluster["packed"][0]
    cell = re.search(r'<td class="gpu pair[^"]*" data-gpu="[^"]+" data-jobs="([0-9+]+)"[^>]*>([0-9+]+)</td>', dom)
    assert cell is not None and sorted(cell.group(1).split("+")) == sorted(pair), dom[:3000]
    # the queue: the pending job with its reason and rank, a running job where it runs
    row = re.search(rf'<tr class="pending" data-job="{big}">(.*?)</tr>', dom)
    bigrec = next(r for r in jobs["jobs"] if r["job_id"] == big)
    reason = bigrec["reason"]
    assert row is not None and "big8" in row.group(1) and f"({reason})" in row.group(1).replace("&amp;", "&")
    running = next(r for r in jobs["jobs"] if r["state"] == "RUNNING")
    assert re.search(rf'<tr class="running" data-job="{running["job_id"]}">.*?RUNNING.*?{re.escape(running["gpus"])}',
                     dom)
    # the timeline, and what is never shown
    assert all(f'data-series="{s}"' in dom for s in ("utilization", "packed_pairs", "migrated", "decision_ms"))
    assert 'data-loaded="1"' in dom and "cannot read the API" not in dom
    assert SECRET not in dom and SECRET not in json.dumps([cluster, jobs])
    # `tesserae jobs` and `explain` through the same API, as a user who cannot read the database would
    assert [p.returncode for p in cli] == [0, 0], [p.stderr for p in cli]
    assert re.search(rf"^{big}\s+big8\s.*PENDING.*\({re.escape(reason)}\)$", cli[0].stdout, re.M), cli[0].stdout
    assert f"reason: {reason}" in cli[1].stdout and f"rank {bigrec['rank']} of 10" in cli[1].stdout, cli[1].stdout
    png = (shots / "web.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    keep = os.environ.get("TESSERAE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shots / "web.png", Path(keep) / "web.png")
