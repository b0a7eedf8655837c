"""The web page in a real headless browser (Debian's chromium) against `tesserae daemon` driving the dev
cluster: nodes x GPUs as the jobs hold them with a packed pair, names and users on the cells, the queue
with reasons, a held job said held, the user filter, a job's history, the rounds on a time axis; and the
page drawn at its load event (a plain `chromium --screenshot` with no time to wait), so a loaded machine
never catches it at "waiting for the API"; screenshots saved.

Set TESSERAE_SCREENSHOTS=DIR to keep the screenshot (docs/img/web-before.png and web-after.png come from
scripts/page_screenshots.py on a busier cluster).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path

import pytest

from tesserae_slurm.site.config import SiteConfig

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


def browse(url: str, *args: str, timeout: float = 60, wait: bool = True) -> str:
    """One headless chromium run on a fresh profile; ``wait``: give the page's own API requests time (virtual
    time), else take what is there at the load event, as a plain `chromium --screenshot` does."""
    budget = ["--virtual-time-budget=4000", "--run-all-compositor-stages-before-draw"] if wait else []
    with tempfile.TemporaryDirectory(prefix="tesserae-chromium-") as profile:
        proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *budget, *args, url],
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
        at_load = browse(url, "--dump-dom", wait=False)  # no time for any request: the embedded answers only
        other = browse(url + "?user=someone-else", "--dump-dom", wait=False)
        history = browse(url + f"#job-{big}", "--dump-dom")
        shots = tmp_path / "shots"
        shots.mkdir()
        browse(url, f"--screenshot={shots / 'web.png'}", wait=False)
        held = subprocess.run([str(BIN / "tesserae"), "hold", big, "--config", str(env.config)], env=env.os_env(),
                              capture_output=True, text=True, timeout=60, check=False)
        assert held.returncode == 0, held.stderr
        wait_for(lambda: bool(api(url, "/api/cluster")["jobs"].get(big, {}).get("held")), 30,
                 f"the hold of {big} in force", every=0.5)
        dom_held = browse(url, "--dump-dom", wait=False)
    finally:
        daemon.stop()

    # the map: every node, every GPU, where the jobs hold GPUs; the pair as two occupants with names and users
    for node in cluster["nodes"]:
        assert f'data-node="{node["name"]}"' in dom
        for i in range(len(node["gpus"])):
            assert f'data-gpu="{node["name"]}:{i}"' in dom
    pair = cluster["packed"][0]
    cell = re.search(r'<td class="gpu pair[^"]*" data-gpu="[^"]+" data-jobs="([0-9+]+)"[^>]*>(.*?)</td>', dom)
    assert cell is not None and sorted(cell.group(1).split("+")) == sorted(pair), dom[:3000]
    for j in pair:
        assert re.search(rf'href="#job-{j}"[^>]*>{j}</a> <span class="name">dcgan\d</span> <span class="who">root',
                         cell.group(2)), cell.group(2)
    on_map = {j for n in cluster["nodes"] for g in n["gpus"] for j in g}
    assert big not in on_map and len(on_map) >= 7  # where jobs run now: the pending job is on no GPU
    assert all(cluster["jobs"][j]["state"] in ("RUNNING", "STARTING", "PREEMPTING") and cluster["jobs"][j]["gpus"]
               for j in on_map)
    # the queue: the pending job with its reason and rank, a running job where it runs
    row = re.search(rf'<tr class="pending" data-job="{big}">(.*?)</tr>', dom)
    bigrec = next(r for r in jobs["jobs"] if r["job_id"] == big)
    reason = bigrec["reason"]
    assert row is not None and "big8" in row.group(1) and f"({reason})" in row.group(1).replace("&amp;", "&")
    running = next(r for r in jobs["jobs"] if r["state"] == "RUNNING")
    assert re.search(rf'<tr class="running" data-job="{running["job_id"]}">.*?RUNNING.*?{re.escape(running["gpus"])}',
                     dom)
    # figures of the newest finished round; the rounds on a time axis, preemptions among the series
    policy = re.escape(SiteConfig().scheduler.policy)
    assert re.search(rf'id="figures"[^>]*>last finished round \d+ \({policy}, ', dom), dom[:2000]
    assert all(f'data-series="{s}"' in dom for s in ("utilization", "packed_pairs", "migrated", "preempted",
                                                      "decision_ms"))
    assert re.search(r'data-axis="time"><span[^>]*>\d', dom)
    assert 'data-loaded="1"' in dom and "cannot read the API" not in dom
    # drawn at the load event, before any request of its own could answer
    assert 'data-loaded="1"' in at_load and "waiting for the API" not in at_load and "as of " in at_load
    assert f'data-job="{big}"' in at_load and re.search(r'class="gpu pair', at_load)
    # the user filter: another user's cells dimmed, none of the queue shown
    assert re.search(r'class="gpu (busy|pair)[^"]* dim"', other) and '<tr class="running"' not in other
    assert "0 job(s) of someone-else" in other
    # the job's history and its JSON
    box = re.search(r'<section id="job" class="job">(.*?)</section>', history, re.S)
    assert box is not None and f'href="/api/jobs/{big}"' in box.group(1) and "big8" in box.group(1), history[:3000]
    # a held job says held, with who held it
    row = re.search(rf'<tr class="held" data-job="{big}">(.*?)</tr>', dom_held)
    assert row is not None and "HELD" in row.group(1) and "held by root" in row.group(1), dom_held[:3000]
    assert SECRET not in dom and SECRET not in json.dumps([cluster, jobs]) and SECRET not in at_load
    # `tesserae jobs` and `explain` through the same API, as a user who cannot read the database would
    assert [p.returncode for p in cli] == [0, 0], [p.stderr for p in cli]
    assert re.search(rf"^\s*{big}\s+big8\s+\S+\s+PD\s.*\({re.escape(reason)}\)$", cli[0].stdout, re.M), \
        cli[0].stdout
    assert f"reason: {reason}" in cli[1].stdout and f"rank {bigrec['rank']} of 10" in cli[1].stdout, cli[1].stdout
    png = (shots / "web.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    keep = os.environ.get("TESSERAE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shots / "web.png", Path(keep) / "web.png")
