"""Screenshots of the web page on a busy dev cluster (docs/img/web-before.png, web-after.png).

`tesserae bench moves`' scenario (8 nodes x 4 fake GPUs, 32 jobs from root and `nobody`, the dev
configuration) with the daemon's page on a free port; at each of the given offsets (seconds after the
start) a plain `chromium --screenshot` (no virtual time: what a person or a script catches at the load
event) and one that gives the page's own requests 8 s, plus the API's answers beside them. The run is
stopped after the last shot (the cluster is taken down). Root only (a second user through runuser).

    python scripts/page_screenshots.py OUTDIR [--at 150,175] [--dir /tmp/tesserae-page-shots]

Run another checkout's page (the BEFORE of a change) with PYTHONPATH=THAT_CHECKOUT: the daemon and the
jobs import from it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tesserae_slurm.bench.moves import run_scenario, scenario_jobs
from tesserae_slurm.devcluster import DevCluster, ensure_slurm_installed
from tesserae_slurm.devcluster.compare import Settings, policy_options


def shoot(url: str, out: Path, tag: str, wait: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="tesserae-chromium-") as profile:
        budget = ["--virtual-time-budget=8000"] if wait else []
        try:
            return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                   "--no-first-run", f"--user-data-dir={profile}", "--window-size=1280,1500", *budget,
                                   f"--screenshot={out / f'shot-{tag}.png'}", url],
                                  capture_output=True, text=True, timeout=120, check=False).returncode
        except subprocess.TimeoutExpired:
            return 124


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--at", default="150,175", help="seconds after the start, comma-separated")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/tesserae-page-shots"), help="cluster and run directory")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    offsets = [float(x) for x in args.at.split(",")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    settings = Settings(policy="tesserae-t", policy_options=policy_options("tesserae-t"), round_seconds=5,
                        grace_seconds=20, timeout_s=900, daemon_extra={"http": {"listen": f"127.0.0.1:{port}"}})
    ensure_slurm_installed()
    cluster = DevCluster(args.dir / "cluster", nodes=8, gpus_per_node=4)
    work = args.dir / "run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    work.chmod(0o755)
    t0 = time.time()

    env = {**os.environ, **cluster.env()}
    ran: list[BaseException] = []

    def scenario() -> None:
        try:
            run_scenario(scenario_jobs(32, 0), cluster.env(), work, settings, ["", "nobody"])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            ran.append(exc)

    try:
        cluster.up()
        print(f"page {url}", flush=True)
        run = threading.Thread(target=scenario, daemon=True)
        run.start()
        for at in offsets:
            time.sleep(max(0.0, t0 + at - time.time()))
            for wait in (False, True):
                rc = shoot(url, args.out, f"{int(at)}-{'waited' if wait else 'plain'}", wait)
                print(f"shot at {time.time() - t0:.0f} s ({'waited' if wait else 'plain'}): rc {rc}", flush=True)
            for ep in ("cluster", "jobs", "rounds?n=40"):
                with urllib.request.urlopen(url + "api/" + ep, timeout=30) as r:
                    (args.out / f"api-{int(at)}-{ep.split('?')[0]}.json").write_bytes(r.read())
        while run.is_alive():  # end the run: cancel every job (also those submitted since), the daemon stops
            subprocess.run(["scancel", "-p", "tesserae"], env=env, capture_output=True, timeout=30, check=False)
            run.join(5)
    finally:
        cluster.down()
    if ran:
        print(f"the run ended with {ran[0]!r} (after the shots, that is the cancel)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
